#pragma once
// Module values in an RDB image (rdb_module.cpp): their type names, the
// module opcodes of a value read through and skipped
// (rdbLoadCheckModuleValue), and RedisBloom's Bloom filter value
// (`MBbloom--`) decoded as its BFRdbLoad reads it (RedisBloom src/rebloom.c).

#include <cstdint>
#include <string>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "rdb_cursor.hpp"

namespace bloomery::persist::rdb {

// A module type's name, from the id an RDB file stores (its 54 high bits, 6
// bits a character); the low 10 bits are the encoding version.
std::string module_type_name(std::uint64_t id);

// The module opcodes of a value of module type `name`, which this reader
// does not load, up to its end marker.
void skip_module_fields(Cursor& in, const std::string& name);

// RedisBloom's Bloom filter values, read one after another from one image.
class BloomValueReader {
public:
    explicit BloomValueReader(Cursor& in) : in_(in) {}

    // A `MBbloom--` value (at `at`, in `encoding` 0 to 4) as a
    // RedisBloom-scheme filter, checked as RedisBloom checks a loaded chain
    // and then against bloomery's bounds before anything is allocated.
    bloom::FilterRef read(std::uint64_t at, std::uint32_t encoding);

private:
    class Fields;
    // The chain's head: its item count, its sub-filter count, and the
    // options every sub-filter shares.
    struct Chain {
        std::uint64_t size = 0;
        std::uint64_t links = 0;
        bloom::FilterOptions options;
    };
    Chain read_chain(Fields& fields, std::uint64_t at, std::uint32_t encoding);
    // Sub-filter `index`'s geometry and bit array (a view into the image or
    // into scratch_), checked.
    struct Link {
        bloom::LayerGeometry geometry;
        std::string_view array;
    };
    Link read_link(Fields& fields, std::uint64_t index, std::uint32_t encoding);
    // The sub-filter's words, stored from the file (or its decompressed
    // copy) into `target`.
    void store_words(bloom::BloomLayer& target, std::string_view array);

    Cursor& in_;
    std::string scratch_;               // a decoded bit array
    std::vector<std::uint64_t> words_;  // words on their way into a layer
};

}  // namespace bloomery::persist::rdb
