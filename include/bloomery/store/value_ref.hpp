#pragma once
// A key's value: a Bloom filter (bloom::ScalableFilter, TYPE MBbloom--) or a
// Cuckoo filter (cuckoo::CuckooObject, TYPE MBbloomCF), held by one owning
// reference the size of a pointer (the pointer's low bit says which), so a
// keyspace node stays as small as it was for Bloom filters alone.
//
// A command that expects one kind and finds the other gets WrongType, the
// exception filter() and cuckoo() throw; the command layer answers it with
// Redis's WRONGTYPE error. Thread safety: as the references it wraps.

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/cuckoo/cuckoo_object.hpp"

namespace bloomery::store {

// A key holds a value of another kind than the command works on.
class WrongType : public std::logic_error {
public:
    WrongType() : std::logic_error("WRONGTYPE") {}
};

enum class ValueKind : std::uint8_t { bloom, cuckoo };

class ValueRef {
public:
    ValueRef() = default;
    ValueRef(bloom::FilterRef filter)  // NOLINT(google-explicit-constructor)
        : bits_(reinterpret_cast<std::uintptr_t>(filter.release_ownership())) {}
    ValueRef(cuckoo::CuckooRef filter)  // NOLINT(google-explicit-constructor)
        : bits_(tagged(filter.release_ownership())) {}
    ValueRef(const ValueRef& other) : bits_(other.bits_) { retain(); }
    ValueRef(ValueRef&& other) noexcept : bits_(std::exchange(other.bits_, 0)) {}
    ValueRef& operator=(ValueRef other) noexcept {
        std::swap(bits_, other.bits_);
        return *this;
    }
    ~ValueRef() { release(); }

    explicit operator bool() const { return bits_ != 0; }
    ValueKind kind() const {
        return (bits_ & kCuckooBit) != 0 ? ValueKind::cuckoo : ValueKind::bloom;
    }
    // The value if it is of that kind, else null (no exception).
    bloom::ScalableFilter* bloom_or_null() const {
        return kind() == ValueKind::bloom ? bloom_pointer() : nullptr;
    }
    cuckoo::CuckooObject* cuckoo_or_null() const {
        return kind() == ValueKind::cuckoo ? cuckoo_pointer() : nullptr;
    }
    // The value of that kind; WrongType if it is the other kind.
    bloom::ScalableFilter& filter() const {
        if (kind() != ValueKind::bloom) throw WrongType();
        return *bloom_pointer();
    }
    cuckoo::CuckooObject& cuckoo() const {
        if (kind() != ValueKind::cuckoo) throw WrongType();
        return *cuckoo_pointer();
    }
    // A new owning reference to the Bloom filter (WrongType as filter()).
    bloom::FilterRef filter_ref() const { return bloom::FilterRef::share(filter()); }

    // What every kind answers.
    std::uint64_t id() const {
        return kind() == ValueKind::bloom ? bloom_pointer()->id() : cuckoo_pointer()->id();
    }
    std::uint64_t allocated_bytes() const {
        return kind() == ValueKind::bloom ? bloom_pointer()->allocated_bytes()
                                          : cuckoo_pointer()->allocated_bytes();
    }
    std::uint32_t references() const {
        return kind() == ValueKind::bloom ? bloom_pointer()->references()
                                          : cuckoo_pointer()->references();
    }
    // Asks for the object's first `lines` cache lines (a small Bloom
    // filter's words follow it), for walks that will read it a few steps
    // later.
    void prefetch(int lines = 1) const {
        const auto* bytes = reinterpret_cast<const char*>(bits_ & ~kCuckooBit);  // NOLINT
        if (bytes == nullptr) return;
        for (int line = 0; line < lines; ++line) __builtin_prefetch(bytes + 64 * line);
    }
    // The journal's name for the value (set once, before it is shared).
    void set_id(std::uint64_t id) const {
        if (kind() == ValueKind::bloom) {
            bloom_pointer()->set_id(id);
        } else {
            cuckoo_pointer()->set_id(id);
        }
    }

private:
    static constexpr std::uintptr_t kCuckooBit = 1;
    static std::uintptr_t tagged(cuckoo::CuckooObject* object) {
        return object == nullptr ? 0 : reinterpret_cast<std::uintptr_t>(object) | kCuckooBit;
    }
    bloom::ScalableFilter* bloom_pointer() const {
        return reinterpret_cast<bloom::ScalableFilter*>(
            bits_);  // NOLINT(performance-no-int-to-ptr)
    }
    cuckoo::CuckooObject* cuckoo_pointer() const {
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        return reinterpret_cast<cuckoo::CuckooObject*>(bits_ & ~kCuckooBit);
    }
    void retain() const {
        if (bits_ == 0) return;
        if (kind() == ValueKind::bloom) {
            bloom::FilterRef::share(*bloom_pointer()).release_ownership();
        } else {
            cuckoo::CuckooRef::share(*cuckoo_pointer()).release_ownership();
        }
    }
    void release() {
        if (bits_ == 0) return;
        // The adopted reference is released as the temporary ends.
        if (kind() == ValueKind::bloom) {
            bloom::FilterRef::adopt(bloom_pointer());
        } else {
            cuckoo::CuckooRef::adopt(cuckoo_pointer());
        }
        bits_ = 0;
    }

    std::uintptr_t bits_ = 0;
};

}  // namespace bloomery::store
