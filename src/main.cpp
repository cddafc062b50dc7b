// bloomery: parse the configuration, set up logging, load the snapshot, serve.

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <csignal>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bloomery/app/command_line.hpp"
#include "bloomery/cluster/topology.hpp"
#include "bloomery/command/acl.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/allocator.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/core/latency_monitor.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/core/runtime_settings.hpp"
#include "bloomery/net/health_check.hpp"
#include "bloomery/net/replication.hpp"
#include "bloomery/net/server.hpp"
#include "bloomery/net/startup_checks.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "bloomery/persist/manager.hpp"
#include "bloomery/persist/rdb_import.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/age_shifter.hpp"
#include "bloomery/store/clock.hpp"
#include "bloomery/store/keyspace.hpp"

namespace {

// Like Redis, ask for enough descriptors for --maxclients plus files and
// listeners (32 spare); the default soft limit of 1024 would make accept()
// fail long before maxclients is reached.
void raise_open_file_limit(std::size_t max_clients) {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    const rlim_t wanted = static_cast<rlim_t>(max_clients) + 32;
    if (limit.rlim_cur >= wanted) return;
    const rlim_t old = limit.rlim_cur;
    limit.rlim_cur = std::min(wanted, limit.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < wanted) {
        spdlog::warn("open file limit is {} (wanted {} for maxclients {}); raise it with ulimit -n",
                     limit.rlim_cur > old ? limit.rlim_cur : old, wanted, max_clients);
    }
}

// Says at start who may connect; never prints a password.
void log_access_control(const bloomery::core::Config& config, const bloomery::command::Acl& acl) {
    if (!config.aclfile.empty()) {
        spdlog::info("access control: {} users from {}", acl.users().size(), config.aclfile);
    } else if (!config.requirepass.empty()) {
        spdlog::info("access control: the default user needs a password (AUTH)");
    }
    if (!acl.default_user().nopass()) return;
    const bool loopback_only = config.bind == "127.0.0.1" || config.bind == "::1";
    if (loopback_only) return;
    if (config.protected_mode) {
        spdlog::warn(
            "protected mode: the default user has no password, so only clients on the loopback "
            "interface are served; set --requirepass (or --requirepass-file, --aclfile) to "
            "serve others");
    } else {
        spdlog::warn(
            "the default user has no password and protected mode is off: anyone who can reach "
            "{}:{} may run every command",
            config.bind, config.port);
    }
}

// Says at start which slots this node serves, so a wrong --cluster-self
// shows in the first lines of the log.
void log_cluster(const bloomery::cluster::Topology& topology) {
    const bloomery::cluster::Node& self = topology.self();
    std::string role;
    if (self.primary) {
        for (const bloomery::cluster::SlotRange& range : topology.ranges()) {
            if (range.primary != topology.self_index()) continue;
            role += (role.empty() ? "" : ",") + std::to_string(range.first) + "-" +
                    std::to_string(range.last);
        }
        role = "primary of slots " + role;
    } else {
        role = "replica of " + topology.nodes()[self.primary_index].address;
    }
    spdlog::info("cluster mode: this node is {} (id {}), {}; {} nodes, {} primaries", self.address,
                 self.id, role, topology.nodes().size(), topology.primary_count());
}

// Keys loaded into slots the map gives to another primary (the map changed
// after a move that left some behind, or the wrong data directory): clients
// are redirected away from them, so say where they are.
void warn_of_stranded_keys(const bloomery::cluster::Topology& topology,
                           const bloomery::store::Keyspace& keyspace) {
    const std::size_t served = topology.self().primary_index;  // itself, for a primary
    std::uint64_t stranded = 0;
    std::uint32_t slots = 0, first = 0;
    for (std::uint32_t slot = 0; slot < bloomery::cluster::kSlotCount; ++slot) {
        const auto slot16 = static_cast<std::uint16_t>(slot);
        const std::uint64_t keys = keyspace.count_keys_in_slot(slot16);
        if (keys == 0 || topology.owner(slot16) == served) continue;
        if (slots++ == 0) first = slot;
        stranded += keys;
    }
    if (stranded == 0) return;
    spdlog::warn(
        "{} keys in {} slots this node does not serve (first: slot {}, {}'s): clients are "
        "redirected away from them; move them with deploy/move-slots.py --force or delete them "
        "(CLUSTER GETKEYSINSLOT lists them)",
        stranded, slots, first,
        topology.nodes()[topology.owner(static_cast<std::uint16_t>(first))].address);
}

// The modes that answer and exit instead of serving: --health-check,
// --test-config, --check-journal, --check-snapshot and --import-rdb. The
// exit code, or -1 to serve.
int run_tool(const bloomery::app::CommandLine& command_line) {
    using namespace bloomery;
    const core::Config& config = command_line.config;
    if (!command_line.health_check.empty()) {
        net::HealthCheckOptions options;
        if (command_line.health_check_tls)
            options.transport = net::HealthCheckOptions::Transport::tls;
        options.timeout_seconds = command_line.health_check_timeout_seconds;
        const core::Result<std::string> result =
            net::health_check(command_line.health_check, config, options);
        (result ? std::cout : std::cerr)
            << "bloomery: " << (result ? *result : result.error()) << '\n';
        return result ? 0 : 1;
    }
    if (command_line.test_config) {
        // Like nginx -t: the same checks as a start, nothing bound or loaded.
        for (const std::string& warning : command_line.warnings) {
            std::cerr << "bloomery: warning: " << warning << '\n';
        }
        std::vector<std::string> problems = command_line.problems;
        for (std::string& problem : net::run_startup_checks(config)) {
            problems.push_back(std::move(problem));
        }
        if (!problems.empty()) {
            std::cerr << "bloomery: configuration invalid:\n";
            for (const std::string& problem : problems) std::cerr << "  " << problem << '\n';
            return 1;
        }
        std::cout << "configuration OK\n" << net::describe_config(config);
        return 0;
    }
    if (!command_line.check_journal.empty()) {
        const persist::JournalCheckReport checked =
            persist::check_journal(command_line.check_journal,
                                   command_line.fix_journal ? persist::JournalRepair::cut_bad_tail
                                                            : persist::JournalRepair::none);
        std::cout << checked.report;
        if (checked.verdict == persist::JournalCheck::valid) return 0;
        std::cerr << "bloomery: " << checked.problem << '\n';
        // 2: only what a crash leaves, which a start cuts off by itself.
        return checked.verdict == persist::JournalCheck::torn_tail ? 2 : 1;
    }
    if (!command_line.check_snapshot.empty()) {
        const persist::SnapshotCheck checked = persist::check_snapshot(command_line.check_snapshot);
        if (!checked.verdict) {
            std::cerr << "bloomery: " << checked.verdict.error() << '\n';
            return 1;
        }
        std::cout << checked.report;
        return 0;
    }
    if (!command_line.import_rdb.empty()) {
        // A one-shot conversion into the data directory, as the check modes
        // run: the server then loads the snapshot like any other at start.
        const persist::RdbImportReport imported =
            persist::import_rdb(command_line.import_rdb, config);
        std::cout << imported.report;
        if (!imported.status) {
            std::cerr << "bloomery: " << imported.status.error() << '\n';
            return 1;
        }
        return 0;
    }
    return -1;
}

spdlog::level::level_enum spdlog_level(bloomery::core::LogLevel level) {
    using bloomery::core::LogLevel;
    switch (level) {
        case LogLevel::trace:
            return spdlog::level::trace;
        case LogLevel::debug:
            return spdlog::level::debug;
        case LogLevel::info:
            break;
        case LogLevel::warn:
            return spdlog::level::warn;
        case LogLevel::error:
            return spdlog::level::err;
        case LogLevel::critical:
            return spdlog::level::critical;
        case LogLevel::off:
            return spdlog::level::off;
    }
    return spdlog::level::info;
}

// The log goes to --logfile or stderr at --loglevel. False (said on stderr)
// if the file cannot be opened.
bool set_up_logging(const bloomery::core::Config& config) {
    try {
        if (!config.log_file.empty()) {
            spdlog::set_default_logger(spdlog::basic_logger_mt("bloomery", config.log_file));
        } else {
            spdlog::set_default_logger(spdlog::stderr_color_mt("bloomery"));
        }
    } catch (const spdlog::spdlog_ex& e) {
        std::cerr << "bloomery: cannot open log file: " << e.what() << '\n';
        return false;
    }
    spdlog::set_level(spdlog_level(config.log_level));
    spdlog::flush_on(spdlog::level::info);
    return true;
}

// What --test-config checks, checked before anything is touched; then the
// process settings a server needs. False (logged) if a check fails.
bool prepare_process(const bloomery::core::Config& config) {
    if (const std::vector<std::string> problems = bloomery::net::run_startup_checks(config);
        !problems.empty()) {
        for (const std::string& problem : problems)
            spdlog::critical("refusing to start: {}", problem);
        return false;
    }
    // A write past RLIMIT_FSIZE must fail with EFBIG (and be reported) rather
    // than kill the server; a closed peer must not kill it either.
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    raise_open_file_limit(config.max_clients);
    bloomery::core::allocator_configure();
    return true;
}

// The command table and who may run what. False (logged) on a bad table or
// users file.
bool build_registry(bloomery::command::Registry& registry, const bloomery::core::Config& config) {
    if (const auto built = bloomery::command::build_default_registry(registry); !built) {
        spdlog::critical("command table: {}", built.error());
        return false;
    }
    if (const auto acl = bloomery::command::configure_access_control(registry, config); !acl) {
        spdlog::critical("refusing to start: {}", acl.error());
        return false;
    }
    log_access_control(config, registry.acl());
    return true;
}

// Loads the data and serves until stopped; the exit code.
int serve(const bloomery::core::Config& config, const bloomery::command::Registry& registry) {
    using namespace bloomery;
    // What CONFIG SET changes from here on; the keyspace's use counters
    // follow its LFU settings.
    core::RuntimeSettings settings(config);
    store::Keyspace keyspace(config.keyspace_shards, settings.lfu());
    // Before the snapshot loads, so loaded keys are counted per slot too.
    if (config.cluster_enabled) {
        keyspace.enable_slot_counts();
        if (config.cluster) log_cluster(*config.cluster);
    }
    std::unique_ptr<net::Server> server;
    persist::Manager persistence(config, keyspace,
                                 [&server] { return server ? server->total_changes() : 0; });
    // Made before the journal opens: its writer wakes replicas' feeds.
    net::ReplicationSource replication(config, persistence);
    persistence.set_journal_listener(
        [&replication](std::uint64_t written) { replication.on_written(written); });
    // Decides expiring filters' shifts while this server is primary: the
    // keyspace starts and stops it as deadlines are enforced or followed.
    store::AgeShifter age_shifter(keyspace,
                                  [] { return static_cast<std::uint64_t>(store::now_ms()); });
    keyspace.attach_age_shifter(&age_shifter);
    // The server (its monitoring thread reads replication and persistence)
    // goes first on every way out.
    struct StopServerFirst {
        std::unique_ptr<net::Server>& server;
        ~StopServerFirst() { server.reset(); }
    } stop_server_first{server};
    // Built before loading so that the monitoring listener answers while a
    // large snapshot loads (/healthz 200, /readyz 503).
    server = std::make_unique<net::Server>(config, settings, keyspace, registry, persistence,
                                           replication);
    // The latency monitor is process-wide (every layer records into it).
    core::set_latency_threshold_ms(settings.latency_monitor_threshold_ms());
    core::memory_mark_startup();
    try {
        server->start_metrics();
        if (const core::Status loaded = persistence.load(); !loaded) {
            throw std::runtime_error(loaded.error());
        }
        // A replica goes on following deadlines (its primary's DEL records
        // decide); a primary decides them from here on.
        const bool replica = !config.replicaof_host.empty() && !core::replicaof_names_self(config);
        if (!replica) persistence.enforce_deadlines();
        if (config.cluster) warn_of_stranded_keys(*config.cluster, keyspace);
        server->listen();
    } catch (const std::exception& e) {
        spdlog::critical("refusing to start: {}", e.what());
        return 1;
    }
    spdlog::info("bloomery {} ready on {} port {} TLS port {}, {} threads, data dir {}, save '{}'",
                 BLOOMERY_VERSION, config.bind,
                 config.port == 0 ? "off" : std::to_string(config.port),
                 config.tls_port == 0 ? "off" : std::to_string(config.tls_port), config.threads,
                 config.dir, core::format_save_points(config.save_points));
    const int code = server->run();
    server.reset();
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace bloomery;
    const app::CommandLine command_line = app::parse_command_line(argc, argv);
    if (command_line.exit_code >= 0) return command_line.exit_code;
    if (const int code = run_tool(command_line); code >= 0) return code;
    const core::Config& config = command_line.config;
    if (!set_up_logging(config)) return 1;
    for (const std::string& warning : command_line.warnings) spdlog::warn("{}", warning);
    if (!prepare_process(config)) return 1;
    command::Registry registry;
    if (!build_registry(registry, config)) return 1;
    return serve(config, registry);
}
