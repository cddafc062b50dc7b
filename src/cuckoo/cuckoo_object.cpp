#include "bloomery/cuckoo/cuckoo_object.hpp"

#include "bloomery/bloom/scalable_filter.hpp"

namespace bloomery::cuckoo {

CuckooObject::CuckooObject(CuckooFilter filter, std::uint64_t seq)
    : id_(bloom::ScalableFilter::next_id()),
      seq_(seq),
      filter_(std::move(filter)),
      charge_(core::MemoryUse::filters, bytes_locked()) {}

CuckooRef CuckooObject::make(CuckooFilter filter, std::uint64_t seq) {
    return CuckooRef(new CuckooObject(std::move(filter), seq));
}

}  // namespace bloomery::cuckoo
