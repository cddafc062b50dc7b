#pragma once
// A Cuckoo filter as the keyspace holds it (TYPE MBbloomCF): a CuckooFilter
// behind one lock, with the identity and the accounting a key's value needs.
//
// Locking: one mutex per filter, taken by every access, lookups included. A
// Cuckoo insert moves fingerprints between buckets, so a lock-free reader
// could miss an item caught between two slots; a lock per filter keeps every
// answer exact and makes each change, and its journal record, one step
// (Locked below). Clients using different filters never contend.
//
// Changes are numbered: every change to the data (an insert, a delete, a
// CF.COMPACT, a CF.LOADCHUNK chunk) takes the next sequence number, which
// its journal record carries. A snapshot stores the filter with the number
// of its last change, and replay skips records it already holds, so a
// snapshot may copy the filter at any moment after its cut and replay
// still ends with exactly the live bytes.
//
// Memory: the object and its filter's bytes are reported to core/memory.hpp
// (MemoryUse::filters) whenever a change may have resized them.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>

#include "bloomery/core/memory.hpp"
#include "bloomery/cuckoo/cuckoo_filter.hpp"

namespace bloomery::cuckoo {

class CuckooRef;

class CuckooObject {
public:
    // Takes `filter` with a new id (or `id`, for loaders) and its changes
    // numbered from `seq`.
    static CuckooRef make(CuckooFilter filter, std::uint64_t seq = 0);

    // The filter, under the lock: read or change it with locked.filter(),
    // then (for a change) call changed() before the lock is released.
    class Locked {
    public:
        explicit Locked(const CuckooObject& object)
            : object_(const_cast<CuckooObject&>(object)), lock_(object_.mutex_) {}
        CuckooFilter& filter() { return object_.filter_; }
        const CuckooFilter& filter() const { return object_.filter_; }
        // The sequence number of the last change.
        std::uint64_t seq() const { return object_.seq_.load(std::memory_order_relaxed); }
        // A change was made: takes the next number (returned) and brings the
        // reported bytes up to date.
        std::uint64_t changed() {
            object_.charge_.set(object_.bytes_locked());
            const std::uint64_t next = seq() + 1;
            object_.seq_.store(next, std::memory_order_relaxed);
            return next;
        }
        // Redoing a recorded change numbered `seq` (replay, replicas).
        void redone(std::uint64_t seq) {
            object_.charge_.set(object_.bytes_locked());
            object_.seq_.store(seq, std::memory_order_relaxed);
        }

    private:
        CuckooObject& object_;
        std::unique_lock<std::mutex> lock_;
    };
    Locked lock() const { return Locked(*this); }

    // The filter as it is now and the number of its last change, copied
    // under the lock, for whoever writes it out (snapshots, DUMP, COPY,
    // MIGRATE) without holding up its writers meanwhile. Throws
    // std::bad_alloc.
    struct Copy {
        CuckooFilter filter;
        std::uint64_t changes;
    };
    Copy copy() const {
        const Locked locked = lock();
        return Copy{locked.filter(), locked.seq()};
    }

    // The journal's name for this filter (the id space Bloom filters use:
    // bloom::ScalableFilter::next_id()).
    std::uint64_t id() const { return id_; }
    void set_id(std::uint64_t id) { id_ = id; }

    // The number of the last change, read without the lock (WATCH): a
    // moment's value.
    std::uint64_t changes() const { return seq_.load(std::memory_order_relaxed); }
    // Bytes held: MEMORY USAGE, INFO's used_memory. A moment's value.
    std::uint64_t allocated_bytes() const { return charge_.bytes(); }
    std::uint32_t references() const { return refs_.load(std::memory_order_relaxed); }

private:
    friend class CuckooRef;
    CuckooObject(CuckooFilter filter, std::uint64_t seq);
    ~CuckooObject() = default;
    std::uint64_t bytes_locked() const { return sizeof(CuckooObject) + filter_.bytes(); }
    void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() const {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

    mutable std::atomic<std::uint32_t> refs_{1};
    std::uint64_t id_;
    mutable std::mutex mutex_;
    std::atomic<std::uint64_t> seq_;  // written under mutex_
    CuckooFilter filter_;
    core::MemoryCharge charge_;
};

// An owning, thread-safe reference (intrusive count, as bloom::FilterRef).
class CuckooRef {
public:
    CuckooRef() = default;
    CuckooRef(const CuckooRef& other) : object_(other.object_) {
        if (object_ != nullptr) object_->retain();
    }
    CuckooRef(CuckooRef&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
    CuckooRef& operator=(CuckooRef other) noexcept {
        std::swap(object_, other.object_);
        return *this;
    }
    ~CuckooRef() {
        if (object_ != nullptr) object_->release();
    }
    CuckooObject* get() const { return object_; }
    CuckooObject& operator*() const { return *object_; }
    CuckooObject* operator->() const { return object_; }
    explicit operator bool() const { return object_ != nullptr; }

    // For a holder that keeps the pointer itself (store::ValueRef): gives up
    // this reference's count without releasing it, and takes one back.
    CuckooObject* release_ownership() { return std::exchange(object_, nullptr); }
    static CuckooRef adopt(CuckooObject* object) { return CuckooRef(object); }
    // A new reference to a filter another holder keeps alive.
    static CuckooRef share(CuckooObject& object) {
        object.retain();
        return CuckooRef(&object);
    }

private:
    friend class CuckooObject;
    explicit CuckooRef(CuckooObject* adopted) : object_(adopted) {}
    CuckooObject* object_ = nullptr;
};

}  // namespace bloomery::cuckoo
