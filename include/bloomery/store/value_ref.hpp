#pragma once
// A key's value: a Bloom filter (bloom::ScalableFilter, TYPE MBbloom--), a
// Cuckoo filter (cuckoo::CuckooObject, TYPE MBbloomCF) or an expiring Bloom
// filter (bloom::AgeFilter, TYPE MBbloom--), held by one owning reference
// the size of a pointer (the pointer's two low bits say which), so a
// keyspace node stays as small as it was for Bloom filters alone.
//
// A command that expects one kind and finds another gets WrongType, the
// exception filter(), cuckoo() and age() throw; the command layer answers it
// with Redis's WRONGTYPE error, or, for a command of the BF family that
// does not work on expiring filters, with an error saying so
// (command/errors.hpp: kNotForExpiring). Thread safety: as the references
// it wraps.

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "bloomery/bloom/age_filter.hpp"
#include "bloomery/bloom/scalable_filter.hpp"
#include "bloomery/cuckoo/cuckoo_object.hpp"

namespace bloomery::store {

// A key holds a value of another kind than the command works on.
class WrongType : public std::logic_error {
public:
    WrongType() : std::logic_error("WRONGTYPE") {}
};

enum class ValueKind : std::uint8_t { bloom, cuckoo, age };

class ValueRef {
public:
    ValueRef() = default;
    ValueRef(bloom::FilterRef filter)  // NOLINT(google-explicit-constructor)
        : bits_(reinterpret_cast<std::uintptr_t>(filter.release_ownership())) {}
    ValueRef(cuckoo::CuckooRef filter)  // NOLINT(google-explicit-constructor)
        : bits_(tagged(filter.release_ownership(), kCuckooTag)) {}
    ValueRef(bloom::AgeFilterRef filter)  // NOLINT(google-explicit-constructor)
        : bits_(tagged(filter.release_ownership(), kAgeTag)) {}
    ValueRef(const ValueRef& other) : bits_(other.bits_) { retain(); }
    ValueRef(ValueRef&& other) noexcept : bits_(std::exchange(other.bits_, 0)) {}
    ValueRef& operator=(ValueRef other) noexcept {
        std::swap(bits_, other.bits_);
        return *this;
    }
    ~ValueRef() { release(); }

    explicit operator bool() const { return bits_ != 0; }
    ValueKind kind() const {
        switch (bits_ & kTagMask) {
            case kCuckooTag:
                return ValueKind::cuckoo;
            case kAgeTag:
                return ValueKind::age;
            default:
                return ValueKind::bloom;
        }
    }
    // fn(value) with the value of whichever kind it is.
    template <class Fn>
    decltype(auto) visit(Fn&& fn) const {
        switch (kind()) {
            case ValueKind::cuckoo:
                return fn(*cuckoo_pointer());
            case ValueKind::age:
                return fn(*age_pointer());
            default:
                return fn(*bloom_pointer());
        }
    }
    // The value if it is of that kind, else null (no exception).
    bloom::ScalableFilter* bloom_or_null() const {
        return kind() == ValueKind::bloom ? bloom_pointer() : nullptr;
    }
    cuckoo::CuckooObject* cuckoo_or_null() const {
        return kind() == ValueKind::cuckoo ? cuckoo_pointer() : nullptr;
    }
    bloom::AgeFilter* age_or_null() const {
        return kind() == ValueKind::age ? age_pointer() : nullptr;
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
    bloom::AgeFilter& age() const {
        if (kind() != ValueKind::age) throw WrongType();
        return *age_pointer();
    }
    // A new owning reference to the Bloom filter (WrongType as filter()).
    bloom::FilterRef filter_ref() const { return bloom::FilterRef::share(filter()); }

    // What every kind answers.
    std::uint64_t id() const {
        return visit([](const auto& value) { return value.id(); });
    }
    std::uint64_t allocated_bytes() const {
        return visit([](const auto& value) { return value.allocated_bytes(); });
    }
    std::uint32_t references() const {
        return visit([](const auto& value) { return value.references(); });
    }
    // Asks for the object's first `lines` cache lines (a small Bloom
    // filter's words follow it), for walks that will read it a few steps
    // later.
    void prefetch(int lines = 1) const {
        const auto* bytes = reinterpret_cast<const char*>(bits_ & ~kTagMask);  // NOLINT
        if (bytes == nullptr) return;
        for (int line = 0; line < lines; ++line) __builtin_prefetch(bytes + 64 * line);
    }
    // The journal's name for the value (set once, before it is shared).
    void set_id(std::uint64_t id) const {
        visit([id](auto& value) { value.set_id(id); });
    }

private:
    static constexpr std::uintptr_t kTagMask = 3;
    static constexpr std::uintptr_t kCuckooTag = 1;
    static constexpr std::uintptr_t kAgeTag = 2;
    template <class T>
    static std::uintptr_t tagged(T* object, std::uintptr_t tag) {
        static_assert(alignof(T) >= 4, "two low bits of the pointer hold the kind");
        return object == nullptr ? 0 : reinterpret_cast<std::uintptr_t>(object) | tag;
    }
    bloom::ScalableFilter* bloom_pointer() const {
        return reinterpret_cast<bloom::ScalableFilter*>(
            bits_);  // NOLINT(performance-no-int-to-ptr)
    }
    cuckoo::CuckooObject* cuckoo_pointer() const {
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        return reinterpret_cast<cuckoo::CuckooObject*>(bits_ & ~kTagMask);
    }
    bloom::AgeFilter* age_pointer() const {
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        return reinterpret_cast<bloom::AgeFilter*>(bits_ & ~kTagMask);
    }
    void retain() const {
        if (bits_ == 0) return;
        switch (kind()) {
            case ValueKind::cuckoo:
                cuckoo::CuckooRef::share(*cuckoo_pointer()).release_ownership();
                break;
            case ValueKind::age:
                bloom::AgeFilterRef::share(*age_pointer()).release_ownership();
                break;
            default:
                bloom::FilterRef::share(*bloom_pointer()).release_ownership();
        }
    }
    void release() {
        if (bits_ == 0) return;
        // The adopted reference is released as the temporary ends.
        switch (kind()) {
            case ValueKind::cuckoo:
                cuckoo::CuckooRef::adopt(cuckoo_pointer());
                break;
            case ValueKind::age:
                bloom::AgeFilterRef::adopt(age_pointer());
                break;
            default:
                bloom::FilterRef::adopt(bloom_pointer());
        }
        bits_ = 0;
    }

    std::uintptr_t bits_ = 0;
};

}  // namespace bloomery::store
