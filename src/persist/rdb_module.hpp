#pragma once
// Module values in an RDB image (rdb_module.cpp): their type names, the
// module opcodes of a value read through and skipped
// (rdbLoadCheckModuleValue), RedisBloom's Bloom filter value (`MBbloom--`)
// decoded as its BFRdbLoad reads it, and its Cuckoo filter value
// (`MBbloomCF`, rdb_cuckoo.cpp) as its CFRdbLoad reads it (RedisBloom
// src/rebloom.c).

#include <cstdint>
#include <string>
#include <vector>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/cuckoo/cuckoo_object.hpp"
#include "rdb_cursor.hpp"

namespace bloomery::persist::rdb {

// A module type's name, from the id an RDB file stores (its 54 high bits, 6
// bits a character); the low 10 bits are the encoding version.
std::string module_type_name(std::uint64_t id);

// The module opcodes of a value of module type `name`, which this reader
// does not load, up to its end marker.
void skip_module_fields(Cursor& in, const std::string& name);

// A RedisBloom value: the module opcodes of one field after another, each
// checked to be the kind of field expected.
class ModuleFields {
public:
    explicit ModuleFields(Cursor& in) : in_(in) {}
    std::uint64_t unsigned_field(const char* what);
    double double_field(const char* what);
    // A view into the file, or into `scratch` when the string had to be
    // decoded (LZF, an integer).
    std::string_view string_field(const char* what, std::string& scratch);
    // The value's end marker, `type` naming the value when it is missing.
    void end(const char* type);

private:
    void expect(std::uint64_t opcode, const char* what);
    Cursor& in_;
};

// RedisBloom's Bloom filter values, read one after another from one image.
class BloomValueReader {
public:
    explicit BloomValueReader(Cursor& in) : in_(in) {}

    // A `MBbloom--` value (at `at`, in `encoding` 0 to 4) as a
    // RedisBloom-scheme filter, checked as RedisBloom checks a loaded chain
    // and then against bloomery's bounds before anything is allocated.
    bloom::FilterRef read(std::uint64_t at, std::uint32_t encoding);

private:
    using Fields = ModuleFields;
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

// RedisBloom's Cuckoo filter value (`MBbloomCF`, at `at`, in `encoding` 0
// to 4) as CFRdbLoad reads it, refused unless it is a filter RedisBloom's
// own checks (CF.LOADCHUNK's) and bloomery's accept. Allocates no more
// than the bytes left in the image can hold, decompressed.
cuckoo::CuckooRef read_cuckoo_value(Cursor& in, std::uint64_t at, std::uint32_t encoding);

}  // namespace bloomery::persist::rdb
