#include "bloomery/cuckoo/cuckoo_filter.hpp"

#include <utility>

#include "bloomery/bloom/redisbloom.hpp"

namespace bloomery::cuckoo {
namespace {

constexpr std::uint64_t kAltMultiplier = 0x5bd1e995;
// A compaction that could not empty a sub-filter (RedisBloom's RELOC_FAIL).
constexpr int kRelocFailed = -1;

std::uint64_t next_power_of_two(std::uint64_t n) {
    // As RedisBloom rounds: 0 stays 0 (the decrement wraps, the increment wraps back).
    --n;
    for (unsigned shift = 1; shift < 64; shift <<= 1U) n |= n >> shift;
    return n + 1;
}

std::uint64_t alt_index(std::uint8_t fp, std::uint64_t index) {
    return index ^ (std::uint64_t{fp} * kAltMultiplier);
}

}  // namespace

std::uint64_t cuckoo_hash(std::string_view item) {
    return bloom::murmur_hash64a(item, 0);
}

CuckooFilter::Lookup CuckooFilter::lookup(std::uint64_t hash) {
    const auto fp = static_cast<std::uint8_t>(hash % 255 + 1);
    return Lookup{hash, alt_index(fp, hash), fp};
}

std::uint64_t CuckooFilter::index(const SubFilter& f, std::uint64_t hash) const {
    // RedisBloom keeps this byte offset in 32 bits.
    return static_cast<std::uint32_t>((hash % f.num_buckets) * bucket_size_);
}

core::Result<CuckooFilter> CuckooFilter::create(const CuckooParams& params,
                                                std::uint64_t max_bytes) {
    if (params.bucket_size == 0 || params.max_iterations == 0 ||
        params.capacity < std::uint64_t{params.bucket_size} * 2) {
        return core::Error{"ERR Could not create filter"};
    }
    CuckooFilter filter;
    filter.expansion_ = static_cast<std::uint16_t>(next_power_of_two(params.expansion));
    filter.bucket_size_ = params.bucket_size;
    filter.max_iterations_ = params.max_iterations;
    filter.num_buckets_ = next_power_of_two(params.capacity / params.bucket_size);
    if (filter.num_buckets_ == 0) filter.num_buckets_ = 1;
    if (!filter.grow(max_bytes)) return core::Error{"ERR Insufficient memory to create filter"};
    return filter;
}

bool CuckooFilter::sub_filter_buckets(std::size_t i, std::uint64_t& out) const {
    std::uint64_t buckets = num_buckets_;
    for (std::size_t k = 0; k < i; ++k) {
        if (expansion_ != 0 && buckets > kMaxNumBuckets / expansion_) return false;
        buckets *= expansion_;
    }
    if (buckets == 0 || buckets > kMaxNumBuckets) return false;
    out = buckets;
    return true;
}

bool CuckooFilter::grow(std::uint64_t max_bytes) {
    if (filters_.size() >= kMaxFilters) return false;
    std::uint64_t buckets = 0;
    if (!sub_filter_buckets(filters_.size(), buckets)) return false;
    if (buckets > kMaxNumBuckets / bucket_size_) return false;
    const std::uint64_t more = buckets * bucket_size_;
    if (more > max_bytes || bytes() > max_bytes - more) return false;
    filters_.push_back(SubFilter{buckets, std::vector<std::uint8_t>(more, 0)});
    return true;
}

std::uint64_t CuckooFilter::capacity() const {
    std::uint64_t slots = 0;
    for (const SubFilter& f : filters_) slots += f.data.size();
    return slots;
}

std::uint64_t CuckooFilter::info_size() const {
    // RedisBloom's CuckooFilter struct (40 bytes), a 16-byte SubCF each, the slots.
    return 40 + 16 * std::uint64_t{filters_.size()} + capacity();
}

std::uint64_t CuckooFilter::bytes() const {
    return sizeof(CuckooFilter) + sizeof(SubFilter) * filters_.capacity() + capacity();
}

std::string_view CuckooFilter::filter_data(std::uint16_t i) const {
    const auto& data = filters_[i].data;
    return {reinterpret_cast<const char*>(data.data()), data.size()};
}

bool CuckooFilter::exists(std::uint64_t hash) const {
    const Lookup key = lookup(hash);
    for (const SubFilter& f : filters_) {
        for (const std::uint64_t at : {index(f, key.h1), index(f, key.h2)}) {
            for (std::uint16_t s = 0; s < bucket_size_; ++s) {
                if (f.data[at + s] == key.fp) return true;
            }
        }
    }
    return false;
}

std::uint64_t CuckooFilter::count(std::uint64_t hash) const {
    const Lookup key = lookup(hash);
    std::uint64_t n = 0;
    for (const SubFilter& f : filters_) {
        for (const std::uint64_t at : {index(f, key.h1), index(f, key.h2)}) {
            for (std::uint16_t s = 0; s < bucket_size_; ++s) n += f.data[at + s] == key.fp ? 1 : 0;
        }
    }
    return n;
}

bool CuckooFilter::find_free(std::uint16_t i, const Lookup& key, SlotRef& out) const {
    const SubFilter& f = filters_[i];
    for (const std::uint64_t at : {index(f, key.h1), index(f, key.h2)}) {
        for (std::uint16_t s = 0; s < bucket_size_; ++s) {
            if (f.data[at + s] == 0) {
                out = SlotRef{i, at + s};
                return true;
            }
        }
    }
    return false;
}

bool CuckooFilter::free_slot_in(std::uint16_t i, std::uint64_t bucket, SlotRef& out) const {
    const SubFilter& f = filters_[i];
    for (std::uint16_t s = 0; s < bucket_size_; ++s) {
        if (f.data[bucket * bucket_size_ + s] == 0) {
            out = SlotRef{i, bucket * bucket_size_ + s};
            return true;
        }
    }
    return false;
}

// Kicks fingerprints around the newest sub-filter as RedisBloom does; on
// failure every swap is undone and the record is left without relocations.
bool CuckooFilter::relocate(std::uint16_t i, std::uint64_t h1, InsertRecord& record) {
    const std::uint64_t buckets = filters_[i].num_buckets;
    std::uint8_t fp = record.fingerprint;
    std::uint32_t victim = 0;
    std::uint64_t bucket = h1 % buckets;
    SlotRef from{};
    for (std::uint16_t n = 0; n < max_iterations_; ++n) {
        const SlotRef at{i, bucket * bucket_size_ + victim};
        std::swap(slot(at), fp);
        if (n == 0) {
            record.placed = at;
        } else {
            record.relocations.push_back(FingerprintMove{slot(at), from, at});
        }
        from = at;
        bucket = alt_index(fp, bucket) % buckets;
        SlotRef empty{};
        if (free_slot_in(i, bucket, empty)) {
            slot(empty) = fp;
            record.relocations.push_back(FingerprintMove{fp, from, empty});
            return true;
        }
        victim = (victim + 1) % bucket_size_;
    }
    for (std::uint16_t n = 0; n < max_iterations_; ++n) {
        victim = (victim + bucket_size_ - 1) % bucket_size_;
        bucket = alt_index(fp, bucket) % buckets;
        std::swap(slot(SlotRef{i, bucket * bucket_size_ + victim}), fp);
    }
    record.relocations.clear();
    return false;
}

InsertRecord CuckooFilter::insert(std::uint64_t hash, std::uint64_t max_bytes) {
    const Lookup key = lookup(hash);
    InsertRecord record;
    record.fingerprint = key.fp;
    for (;;) {
        for (std::size_t i = filters_.size(); i-- > 0;) {
            if (find_free(static_cast<std::uint16_t>(i), key, record.placed)) {
                slot(record.placed) = key.fp;
                ++num_items_;
                record.status = InsertStatus::inserted;
                record.filters = num_filters();
                return record;
            }
        }
        if (relocate(static_cast<std::uint16_t>(filters_.size() - 1), key.h1, record)) {
            ++num_items_;
            record.status = InsertStatus::inserted;
            record.filters = num_filters();
            return record;
        }
        record.filters = num_filters();
        record.placed = SlotRef{};
        if (expansion_ == 0) {
            record.status = InsertStatus::no_space;
            return record;
        }
        if (!grow(max_bytes)) {
            record.status = InsertStatus::grow_failed;
            return record;
        }
    }
}

InsertRecord CuckooFilter::insert_unique(std::uint64_t hash, std::uint64_t max_bytes) {
    if (exists(hash)) {
        InsertRecord record;
        record.status = InsertStatus::exists;
        record.fingerprint = lookup(hash).fp;
        record.filters = num_filters();
        return record;
    }
    return insert(hash, max_bytes);
}

DeleteRecord CuckooFilter::remove(std::uint64_t hash) {
    const Lookup key = lookup(hash);
    DeleteRecord record;
    for (std::size_t i = filters_.size(); i-- > 0 && !record.deleted;) {
        const SubFilter& f = filters_[i];
        for (const std::uint64_t at : {index(f, key.h1), index(f, key.h2)}) {
            for (std::uint16_t s = 0; s < bucket_size_ && !record.deleted; ++s) {
                if (f.data[at + s] == key.fp) {
                    record.cleared = SlotRef{static_cast<std::uint16_t>(i), at + s};
                    record.deleted = true;
                }
            }
            if (record.deleted) break;
        }
    }
    if (!record.deleted) return record;
    slot(record.cleared) = 0;
    --num_items_;
    ++num_deletes_;
    if (filters_.size() > 1 &&
        static_cast<double>(num_deletes_) > static_cast<double>(num_items_) * 0.10) {
        compact(false);
        record.compacted = true;
    }
    return record;
}

// Moves what sub-filter i holds into older ones where they have room; drops
// it if it is the newest and ends up empty.
int CuckooFilter::compact_one(std::uint16_t i) {
    int rv = 0;
    const std::uint64_t buckets = filters_[i].num_buckets;
    for (std::uint64_t b = 0; b < buckets; ++b) {
        for (std::uint16_t s = 0; s < bucket_size_; ++s) {
            std::uint8_t& here = filters_[i].data[b * bucket_size_ + s];
            if (here == 0) continue;
            const Lookup key{b, alt_index(here, b), here};
            bool moved = false;
            for (std::uint16_t k = 0; k < i && !moved; ++k) {
                SlotRef to{};
                if (find_free(k, key, to)) {
                    slot(to) = here;
                    here = 0;
                    moved = true;
                }
            }
            if (!moved) rv = kRelocFailed;
        }
    }
    if (rv == 0 && i + 1U == filters_.size()) filters_.pop_back();
    return rv;
}

void CuckooFilter::compact(bool keep_going) {
    for (std::size_t i = filters_.size(); i-- > 1;) {
        if (compact_one(static_cast<std::uint16_t>(i)) == kRelocFailed && !keep_going) break;
    }
    num_deletes_ = 0;
}

bool CuckooFilter::valid(const SlotRef& at) const {
    return at.filter < filters_.size() && at.offset < filters_[at.filter].data.size();
}

bool CuckooFilter::apply(const InsertRecord& record) {
    if (record.status != InsertStatus::inserted) {
        return record.status == InsertStatus::exists || record.filters == num_filters();
    }
    if (record.filters < num_filters() || record.filters > num_filters() + 1U) return false;
    const bool grew = record.filters > num_filters();
    if (grew && !grow(kNoLimit)) return false;
    bool fits = valid(record.placed) && record.fingerprint != 0;
    for (const FingerprintMove& m : record.relocations) {
        fits = fits && valid(m.to) && m.fingerprint != 0;
    }
    if (!fits) {
        if (grew) filters_.pop_back();  // leaves the filter as it was
        return false;
    }
    slot(record.placed) = record.fingerprint;
    for (const FingerprintMove& m : record.relocations) slot(m.to) = m.fingerprint;
    ++num_items_;
    return true;
}

bool CuckooFilter::apply(const DeleteRecord& record) {
    if (!record.deleted) return true;
    if (!valid(record.cleared) || slot(record.cleared) == 0) return false;
    slot(record.cleared) = 0;
    --num_items_;
    ++num_deletes_;
    if (record.compacted) compact(false);
    return true;
}

}  // namespace bloomery::cuckoo
