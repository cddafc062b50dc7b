// INFO's sections about the process and its clients: server, clients, cpu,
// modules, cluster, keyspace.

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>

#include "common.hpp"
#include "info_sections.hpp"

namespace bloomery::command::info {
namespace {

const std::string& run_id() {
    static const std::string id = [] {
        std::random_device device;
        std::mt19937_64 generator(device());
        std::string hex;
        const char* digits = "0123456789abcdef";
        for (int i = 0; i < 40; ++i) hex.push_back(digits[generator() % 16]);
        return hex;
    }();
    return id;
}

// A build id as Redis shows one (hex), from what identifies this build.
std::string build_id() {
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
    for (const char c : std::string_view("bloomery " BLOOMERY_VERSION " " __DATE__ " " __TIME__)) {
        hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    }
    char text[32];
    std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(hash));
    return text;
}

std::string executable_path() {
    char path[4096];
    const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
    return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

// CPU time in seconds.
struct CpuTimes {
    double user = 0;
    double system = 0;
};

// The main thread's CPU time (the thread that accepts connections and runs
// the cron), from /proc; none where /proc does not tell.
std::optional<CpuTimes> main_thread_times() {
    const std::string path = "/proc/self/task/" + std::to_string(getpid()) + "/stat";
    std::FILE* file = std::fopen(path.c_str(), "r");
    if (file == nullptr) return std::nullopt;
    char buffer[1024];
    const std::size_t n = std::fread(buffer, 1, sizeof buffer - 1, file);
    std::fclose(file);
    buffer[n] = '\0';
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15.
    const char* rest = std::strrchr(buffer, ')');
    if (rest == nullptr) return std::nullopt;
    unsigned long long utime = 0, stime = 0;
    if (std::sscanf(rest + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                    &stime) != 2) {
        return std::nullopt;
    }
    const auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    return CpuTimes{static_cast<double>(utime) / ticks, static_cast<double>(stime) / ticks};
}

std::string seconds_text(const timeval& time) {
    char text[64];
    std::snprintf(text, sizeof text, "%ld.%06ld", static_cast<long>(time.tv_sec),
                  static_cast<long>(time.tv_usec));
    return text;
}

}  // namespace

// Redis 7.0's fields, in its order, where they apply to bloomery (those about
// Lua, forks, eviction, pub/sub, defragmentation and client tracking say what
// holds here: none of it runs, so 0); bloomery's own fields follow each
// section's.
void server_section(InfoContext& ctx, std::string& out) {
    struct utsname name {};
    uname(&name);
    const std::int64_t now = store::now_ms();
    const std::int64_t uptime = (now - ctx.server.stats.start_time_ms()) / 1000;
    out.append("# Server\r\n");
    line(out, "redis_version", std::string(kRedisCompatVersion));
    line(out, "redis_git_sha1", "00000000");
    line(out, "redis_git_dirty", 0);
    line(out, "redis_build_id", build_id());
    line(out, "redis_mode", std::string(ctx.config.cluster_enabled ? "cluster" : "standalone"));
    line(out, "os", std::string(name.sysname) + " " + name.release + " " + name.machine);
    line(out, "arch_bits", static_cast<int>(sizeof(void*) * 8));
    line(out, "monotonic_clock", "POSIX clock_gettime");
    line(out, "multiplexing_api", "epoll");
    line(out, "atomicvar_api", "c11-builtin");
#if defined(__GNUC__)
    line(out, "gcc_version",
         std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
             std::to_string(__GNUC_PATCHLEVEL__));
#endif
    line(out, "process_id", static_cast<long long>(getpid()));
    line(out, "process_supervised", "no");
    line(out, "run_id", run_id());
    line(out, "tcp_port", ctx.config.port);
    line(out, "server_time_usec", now * 1000);
    line(out, "uptime_in_seconds", uptime);
    line(out, "uptime_in_days", uptime / 86400);
    line(out, "hz", 10);
    line(out, "configured_hz", 10);
    // Redis's LRU clock: seconds, 24 bits (bloomery's access clock).
    line(out, "lru_clock", store::access_clock() & 0xFFFFFFu);
    line(out, "executable", executable_path());
    line(out, "config_file", ctx.config.config_file);
    line(out, "io_threads_active", ctx.server.stats.worker_threads() > 1 ? 1 : 0);
    line(out, "bloomery_version", std::string(BLOOMERY_VERSION));
    line(out, "bloomery_threads", ctx.server.stats.worker_threads());
}

void clients_section(InfoContext& ctx, std::string& out) {
    const auto [largest_input, largest_output] = ctx.server.clients.largest_buffers();
    out.append("# Clients\r\n");
    line(out, "connected_clients", ctx.server.clients.connected_clients());
    line(out, "cluster_connections", 0);
    line(out, "maxclients", ctx.config.max_clients);
    // The largest buffers among the clients now (Redis: over the last
    // seconds).
    line(out, "client_recent_max_input_buffer", largest_input);
    line(out, "client_recent_max_output_buffer", largest_output);
    line(out, "blocked_clients", ctx.server.clients.blocked_clients());
    line(out, "tracking_clients", 0);
    line(out, "clients_in_timeout_table", 0);
}

void cpu_section(InfoContext&, std::string& out) {
    struct rusage self {};
    struct rusage children {};
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    out.append("# CPU\r\n");
    line(out, "used_cpu_sys", seconds_text(self.ru_stime));
    line(out, "used_cpu_user", seconds_text(self.ru_utime));
    line(out, "used_cpu_sys_children", seconds_text(children.ru_stime));
    line(out, "used_cpu_user_children", seconds_text(children.ru_utime));
    // The process's CPU time, and its main thread's.
    if (const std::optional<CpuTimes> main = main_thread_times()) {
        char text[64];
        std::snprintf(text, sizeof text, "%.6f", main->system);
        line(out, "used_cpu_sys_main_thread", std::string_view(text));
        std::snprintf(text, sizeof text, "%.6f", main->user);
        line(out, "used_cpu_user_main_thread", std::string_view(text));
    }
}

// RedisBloom's line as Redis 7.0 shows a loaded module (bloomery has its
// commands built in; filters=0 is Redis's count of the module's filters, not
// of Bloom filters).
void modules_section(InfoContext&, std::string& out) {
    out.append("# Modules\r\n");
    out.append("module:name=bf,ver=" + std::to_string(kRedisBloomVersion) +
               ",api=1,filters=0,usedby=[],using=[],options=[handle-io-errors]\r\n");
}

// redis-py's RedisCluster reads cluster_enabled before trusting CLUSTER SLOTS.
void cluster_section(InfoContext& ctx, std::string& out) {
    out.append("# Cluster\r\n");
    line(out, "cluster_enabled", ctx.config.cluster_enabled ? 1 : 0);
}

void keyspace_section(InfoContext& ctx, std::string& out) {
    const store::Keyspace::Counts counts = ctx.keyspace.counts();
    out.append("# Keyspace\r\n");
    if (counts.keys > 0) {
        out.append("db0:keys=" + std::to_string(counts.keys) +
                   ",expires=" + std::to_string(counts.with_expiry) +
                   ",avg_ttl=" + std::to_string(ctx.keyspace.average_ttl_ms()) + "\r\n");
    }
}

}  // namespace bloomery::command::info
