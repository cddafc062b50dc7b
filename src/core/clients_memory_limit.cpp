// maxmemory-clients: its forms, as Redis's CONFIG SET and config file take
// them, and the limit they give (core/config.hpp).

#include <string>
#include <string_view>

#include "bloomery/core/config.hpp"
#include "bloomery/core/options.hpp"
#include "bloomery/core/parse_int64.hpp"

namespace bloomery::core {

namespace {

// Redis's reasons (config.c), after "argument '<name>') - ".
constexpr std::string_view kNotMemoryOrPercent = "argument must be a memory or percent value";
constexpr std::string_view kPercentTooLarge = "percentage argument must be less or equal to 100";

}  // namespace

Status ClientsMemoryLimit::parse(std::string_view text) {
    std::int64_t setting = 0;
    if (!text.empty() && text.back() == '%') {
        std::int64_t percent = 0;
        if (!parse_int64(text.substr(0, text.size() - 1), percent) || percent < 0) {
            return Error{std::string(kNotMemoryOrPercent)};
        }
        if (percent > 100) return Error{std::string(kPercentTooLarge)};
        setting = -percent;
    } else {
        const std::optional<std::uint64_t> bytes = memory_to_bytes(text);
        if (!bytes) return Error{std::string(kNotMemoryOrPercent)};
        const OptionSpec& option = *find_option("maxmemory-clients");
        if (*bytes > static_cast<std::uint64_t>(option.max)) {
            return Error{"argument must be " + describe_range(option)};
        }
        setting = static_cast<std::int64_t>(*bytes);
    }
    setting_.store(setting, std::memory_order_relaxed);
    return {};
}

std::uint64_t ClientsMemoryLimit::bytes(std::uint64_t maxmemory) const {
    const std::int64_t setting = setting_.load(std::memory_order_relaxed);
    std::uint64_t limit = 0;
    if (setting > 0) {
        limit = static_cast<std::uint64_t>(setting);
    } else if (setting < 0 && maxmemory != 0) {
        // maxmemory is below 2^63, so this cannot overflow.
        limit = maxmemory / 100 * static_cast<std::uint64_t>(-setting) +
                maxmemory % 100 * static_cast<std::uint64_t>(-setting) / 100;
    }
    if (limit == 0) return 0;  // 0 and 0%: no limit
    return limit < kMinClientsMemoryLimit ? kMinClientsMemoryLimit : limit;
}

std::string ClientsMemoryLimit::format() const {
    const std::int64_t setting = setting_.load(std::memory_order_relaxed);
    return setting < 0 ? std::to_string(-setting) + "%" : std::to_string(setting);
}

}  // namespace bloomery::core
