// Access control commands: AUTH and ACL CAT|HELP|LIST|USERS|WHOAMI. The users
// and their rules live in acl.hpp; they are fixed at start, so there is no
// ACL SETUSER, DELUSER, LOAD or SAVE (restart with a new --aclfile instead).

#include <string>

#include "args.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/errors.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/printable.hpp"
#include "common.hpp"
#include "families.hpp"

namespace bloomery::command {

namespace {

// AUTH [username] password. As Redis 7: the one-argument form checks the
// default user's password and is an error while it has none; a failure keeps
// whatever user the connection already had.
void cmd_auth(Context& ctx, Args argv) {
    ArgCursor args(argv);
    if (args.remaining() > 2) return ctx.out.error(errors::kSyntax);
    const Acl& acl = ctx.registry.acl();
    if (args.remaining() == 1 && acl.default_user().nopass()) {
        return ctx.out.error(errors::kAuthWithoutPassword);
    }
    const std::string_view username = args.remaining() == 2 ? args.next() : kDefaultUserName;
    const std::string_view password = args.next();
    if (const core::Status auth = authenticate_client(acl, ctx.client, username, password); !auth) {
        return ctx.out.error(auth.error());
    }
    ctx.out.ok();
}

void cmd_acl_whoami(Context& ctx, Args) {
    ctx.out.bulk(ctx.registry.acl().user_of(ctx.client).name());
}

void cmd_acl_users(Context& ctx, Args) {
    const auto users = ctx.registry.acl().users();
    ctx.out.array(users.size());
    for (const AclUser* user : users) ctx.out.bulk(user->name());
}

void cmd_acl_list(Context& ctx, Args) {
    const auto users = ctx.registry.acl().users();
    ctx.out.array(users.size());
    for (const AclUser* user : users) ctx.out.bulk(user->describe());
}

// ACL CAT: the categories; ACL CAT name: every command and subcommand in it
// (full names, "client|list"), from the same table the rules use.
void cmd_acl_cat(Context& ctx, Args argv) {
    ArgCursor args(argv, 2);
    if (args.remaining() > 1) return reply_wrong_arity(ctx, "acl|cat");
    const Registry& registry = ctx.registry;
    if (!args.has_next()) {
        ctx.out.array(registry.categories().size());
        for (const std::string& category : registry.categories()) ctx.out.bulk(category);
        return;
    }
    const std::string_view category_name = args.next();
    const int category = registry.category_index(category_name);
    if (category < 0) {
        std::string message(errors::kUnknownCategory);
        core::append_printable(message, category_name, 128);
        return ctx.out.error(message + "'");
    }
    std::vector<std::string_view> names;
    for (const CommandSpec* spec : registry.by_id()) {
        if (spec->categories & (std::uint64_t{1} << category)) names.push_back(spec->name);
    }
    ctx.out.array(names.size());
    for (std::string_view name : names) ctx.out.bulk(name);
}

void cmd_acl_help(Context& ctx, Args) {
    reply_help(ctx,
               {"ACL <subcommand> [<arg> ...]. Subcommands are:", "CAT [<category>]",
                "    Without a category: the ACL categories. With one: the commands in it.", "LIST",
                "    Every user's rules in ACL file format, passwords as SHA-256 hashes.", "USERS",
                "    The user names.", "WHOAMI", "    The user this connection runs as.", "HELP",
                "    This help.",
                "Users are fixed at start: edit the --aclfile and restart to change them."});
}

}  // namespace

void register_acl_commands(Registry& registry) {
    registry.register_handler<cmd_auth>("auth");
    registry.register_handler<cmd_acl_cat>("acl|cat");
    registry.register_handler<cmd_acl_help>("acl|help");
    registry.register_handler<cmd_acl_list>("acl|list");
    registry.register_handler<cmd_acl_users>("acl|users");
    registry.register_handler<cmd_acl_whoami>("acl|whoami");
}

}  // namespace bloomery::command
