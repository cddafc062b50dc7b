#include "common.hpp"

#include <optional>
#include <utility>

#include "bloomery/command/errors.hpp"

namespace bloomery::command {

bool valid_client_name(std::string_view name) {
    for (char c : name) {
        if (c < '!' || c > '~') return false;
    }
    return true;
}

void write_module_entry(Context& ctx) {
    ctx.out.map(4);
    ctx.out.bulk("name");
    ctx.out.bulk("bf");
    ctx.out.bulk("ver");
    ctx.out.integer(kRedisBloomVersion);
    ctx.out.bulk("path");
    ctx.out.bulk("built-in");
    ctx.out.bulk("args");
    ctx.out.array(0);
}

void reply_help(Context& ctx, std::initializer_list<std::string_view> lines) {
    ctx.out.array(lines.size());
    for (std::string_view line : lines) ctx.out.simple(line);
}

std::string_view exists_error(const Context& ctx, std::string_view key, store::ValueKind kind) {
    const std::optional<store::KeyDetails> found = ctx.keyspace.inspect(key);
    // Bloom filters, plain or expiring, are one family: either exists.
    const auto cuckoo = [](store::ValueKind k) { return k == store::ValueKind::cuckoo; };
    return found && cuckoo(found->value.kind()) != cuckoo(kind) ? errors::kWrongType
                                                                : errors::kItemExists;
}

core::Error wrong_arity(std::string_view command_name) {
    std::string message(errors::kWrongArity);
    message += command_name;
    message += "' command";
    return core::Error{std::move(message)};
}

}  // namespace bloomery::command
