#include "common.hpp"

namespace bloomery::command {

bool valid_client_name(std::string_view name) {
    for (char c : name) {
        if (c < '!' || c > '~') return false;
    }
    return true;
}

void reply_help(Context& ctx, std::initializer_list<std::string_view> lines) {
    ctx.out.array(lines.size());
    for (std::string_view line : lines) ctx.out.simple(line);
}

}  // namespace bloomery::command
