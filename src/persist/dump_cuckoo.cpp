// DUMP / RESTORE payloads of Cuckoo filters (proto/dump.md).

#include <algorithm>
#include <string>

#include "bloomery/core/crc64.hpp"
#include "bloomery/persist/dump_payload.hpp"

namespace bloomery::persist {

std::string cuckoo_dump_payload(const cuckoo::CuckooFilter& filter) {
    std::string out;
    out.reserve(1 + cuckoo::kHeaderBytes + filter.capacity() + kDumpFooterBytes);
    out.push_back(static_cast<char>(kDumpTypeCuckoo));
    out += filter.header();
    for (std::uint16_t i = 0; i < filter.num_filters(); ++i) out += filter.filter_data(i);
    out.push_back(static_cast<char>(kDumpPayloadWholeVersion & 0xff));
    out.push_back(static_cast<char>(kDumpPayloadWholeVersion >> 8));
    const std::uint64_t crc = core::crc64(0, out);
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
    return out;
}

std::uint8_t dump_value_type(std::string_view payload) {
    return payload.size() > kDumpFooterBytes ? static_cast<std::uint8_t>(payload[0]) : 0;
}

core::Result<cuckoo::CuckooFilter> parse_dump_cuckoo(std::string_view payload,
                                                     std::uint64_t max_bytes) {
    if (payload.size() < 1 + cuckoo::kHeaderBytes + kDumpFooterBytes) {
        return core::Error{"value ends inside the Cuckoo filter's header"};
    }
    const std::string_view value = payload.substr(1, payload.size() - 1 - kDumpFooterBytes);
    const std::string_view header = value.substr(0, cuckoo::kHeaderBytes);
    const std::string_view slots = value.substr(cuckoo::kHeaderBytes);
    // No more than the payload holds is allocated for it.
    core::Result<cuckoo::CuckooFilter> filter = cuckoo::CuckooFilter::load_header(
        header, std::min<std::uint64_t>(max_bytes, slots.size() + cuckoo::kMaxBookkeepingBytes));
    if (!filter) return core::Error{"Cuckoo filter header: " + filter.error()};
    if (filter->capacity() != slots.size()) {
        return core::Error{std::to_string(slots.size()) + " bytes of slots for a filter of " +
                           std::to_string(filter->capacity())};
    }
    std::size_t at = 0;
    for (std::uint16_t i = 0; i < filter->num_filters(); ++i) {
        const std::size_t size = filter->filter_data(i).size();
        if (size == 0) continue;
        filter->load_chunk(static_cast<std::int64_t>(at + size + 1), slots.substr(at, size));
        at += size;
    }
    return filter;
}

}  // namespace bloomery::persist
