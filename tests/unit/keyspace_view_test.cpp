// Keyspace views: the copy of every key a snapshot or a key walk reads.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "keyspace_test_support.hpp"

namespace bloomery::store {
namespace {

using keyspace_testing::make_filter;

// The keys' bytes are counted as keys are linked, replaced and unlinked
// (a view sizes its copy of the names by them): always the sum of the names.
TEST(Keyspace, KeyBytesFollowEveryChange) {
    Keyspace keyspace(4);
    std::set<std::string> names;
    const auto summed = [&] {
        std::size_t bytes = 0;
        for (const std::string& name : names) bytes += name.size();
        return bytes;
    };
    const auto in_view = [&] {
        const KeyspaceView view = keyspace.view(ViewFor::keys);
        std::size_t bytes = 0;
        for (std::size_t i = 0; i < view.size(); ++i) bytes += view.key(i).size();
        return bytes;
    };
    for (int i = 0; i < 3000; ++i) {
        names.insert("key" + std::to_string(i));
        keyspace.put("key" + std::to_string(i), make_filter(1));
    }
    EXPECT_EQ(keyspace.counts().key_bytes, summed());
    keyspace.put("key7", make_filter(1));  // replaced
    ASSERT_TRUE(keyspace.rename("key8", "a-much-longer-name"));
    names.erase("key8");
    names.insert("a-much-longer-name");
    ASSERT_TRUE(keyspace.rename("key9", "key10"));  // over an existing key
    names.erase("key9");
    for (int i = 100; i < 2500; ++i) {
        ASSERT_TRUE(keyspace.erase("key" + std::to_string(i)));
        names.erase("key" + std::to_string(i));
    }
    EXPECT_EQ(keyspace.counts().key_bytes, summed());
    EXPECT_EQ(in_view(), summed());
    keyspace.clear();
    EXPECT_EQ(keyspace.counts().key_bytes, 0u);
}

}  // namespace
}  // namespace bloomery::store
