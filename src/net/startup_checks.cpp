#include "bloomery/net/startup_checks.hpp"

#include "bloomery/cluster/topology.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>  // before Asio (Boost 1.74)

#include <boost/asio/ip/address.hpp>

#include "bloomery/command/acl.hpp"
#include "bloomery/command/registry.hpp"
#include "bloomery/core/options.hpp"
#include "bloomery/net/tls.hpp"

namespace bloomery::net {

namespace {

using Problems = std::vector<std::string>;

std::string quoted(const std::string& text) {
    return "'" + text + "'";
}

// The nearest existing ancestor of `path` (itself if it exists), for "can it
// be created": mkdir -p needs that one to be a writable directory.
std::filesystem::path existing_ancestor(const std::filesystem::path& path) {
    std::filesystem::path current = std::filesystem::absolute(path);
    std::error_code ignored;
    while (!std::filesystem::exists(current, ignored) && current.has_parent_path() &&
           current != current.parent_path()) {
        current = current.parent_path();
    }
    return current;
}

// 0 if `parent` takes a new directory, else the errno of the attempt: one is
// made and removed again, as the start will make --dir, since access() says
// yes to root where mkdir fails (/proc, a read-only mount).
int refuses_directories(const std::filesystem::path& parent) {
    const std::filesystem::path probe =
        parent / (".bloomery-create-check-" + std::to_string(::getpid()));
    if (::mkdir(probe.c_str(), 0700) != 0) return errno;
    ::rmdir(probe.c_str());
    return 0;
}

void check_data_dir(const core::Config& c, Problems& problems) {
    if (c.dir.empty()) return;  // a value problem, reported by check_config_values
    struct stat info {};
    if (::stat(c.dir.c_str(), &info) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) {
            problems.push_back("--dir " + quoted(c.dir) + ": " + std::strerror(errno));
            return;
        }
        // Created at start (mkdir -p): the nearest existing ancestor must
        // take a new directory.
        const std::filesystem::path ancestor = existing_ancestor(c.dir);
        struct stat parent {};
        if (::stat(ancestor.c_str(), &parent) != 0 || !S_ISDIR(parent.st_mode)) {
            problems.push_back("--dir " + quoted(c.dir) + ": cannot be created: " +
                               quoted(ancestor.string()) + " is not a directory");
        } else if (const int error = refuses_directories(ancestor); error != 0) {
            problems.push_back("--dir " + quoted(c.dir) + ": cannot be created in " +
                               quoted(ancestor.string()) + ": " + std::strerror(error));
        }
        return;
    }
    if (!S_ISDIR(info.st_mode)) {
        problems.push_back("--dir " + quoted(c.dir) + ": not a directory");
        return;
    }
    // Writable, really: access() says yes to root even where writes fail (a
    // read-only mount, /proc), so create and remove an empty probe file.
    const std::string probe = c.dir + "/.bloomery-write-check-" + std::to_string(::getpid());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        problems.push_back("--dir " + quoted(c.dir) + ": not writable: " + std::strerror(errno));
        return;
    }
    ::close(fd);
    ::unlink(probe.c_str());
    // The snapshot, if there is one, must be readable (--check-snapshot
    // verifies its content).
    const std::string snapshot = c.snapshot_path();
    if (::stat(snapshot.c_str(), &info) == 0) {
        const int snapshot_fd = ::open(snapshot.c_str(), O_RDONLY | O_CLOEXEC);
        if (snapshot_fd < 0 || !S_ISREG(info.st_mode)) {
            problems.push_back("--dbfilename " + quoted(snapshot) + ": " +
                               (snapshot_fd < 0
                                    ? std::string("cannot read: ") + std::strerror(errno)
                                    : std::string("not a regular file")));
        }
        if (snapshot_fd >= 0) ::close(snapshot_fd);
    }
}

void check_log_file(const core::Config& c, Problems& problems) {
    if (c.log_file.empty()) return;
    // Opened for appending, without creating it: nothing is written.
    const int fd = ::open(c.log_file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
        ::close(fd);
        return;
    }
    if (errno != ENOENT) {
        problems.push_back("--logfile " + quoted(c.log_file) +
                           ": cannot open: " + std::strerror(errno));
        return;
    }
    const std::filesystem::path parent =
        std::filesystem::absolute(std::filesystem::path(c.log_file)).parent_path();
    if (::access(parent.c_str(), W_OK | X_OK) != 0) {
        problems.push_back("--logfile " + quoted(c.log_file) + ": cannot be created in " +
                           quoted(parent.string()) + ": " + std::strerror(errno));
    }
}

void check_addresses(const core::Config& c, Problems& problems) {
    boost::system::error_code error;
    boost::asio::ip::make_address(c.bind, error);
    if (error) problems.push_back("--bind " + quoted(c.bind) + ": not an IP address");
    if (c.metrics_port != 0 && !c.metrics_bind.empty()) {
        boost::asio::ip::make_address(c.metrics_bind, error);
        if (error) {
            problems.push_back("--metrics-bind " + quoted(c.metrics_bind) + ": not an IP address");
        }
    }
}

// The same code the start uses: the command table, then the ACL built from
// --requirepass and --aclfile (errors name the file and line).
void check_access_control(const core::Config& c, Problems& problems) {
    command::Registry registry;
    if (const core::Status built = command::build_default_registry(registry); !built) {
        problems.push_back("command table: " + built.error());
        return;
    }
    if (const core::Status acl = command::configure_access_control(registry, c); !acl) {
        problems.push_back(acl.error());
    }
}

// Builds the TLS context as the start does: files readable, certificate and
// key matching, CA bundle usable.
void check_tls(const core::Config& c, Problems& problems) {
    if (c.tls_port != 0 && !c.tls_cert_file.empty() && !c.tls_key_file.empty()) {
        try {
            make_tls_context(c);
        } catch (const std::exception& e) {
            problems.push_back(e.what());
        }
    }
    // The context of the links this server opens, as the server builds it
    // (a missing CA is already refused by the configuration's checks).
    if (tls_links_wanted(c) && !c.tls_ca_cert_file.empty()) {
        try {
            make_tls_client_context(c);
        } catch (const std::exception& e) {
            problems.push_back(e.what());
        }
    }
}

constexpr void (*kStartupChecks[])(const core::Config&, Problems&) = {
    check_addresses, check_data_dir, check_log_file, check_access_control, check_tls,
};

std::string on_off(std::uint16_t port) {
    return port == 0 ? std::string("off") : std::to_string(port);
}

}  // namespace

std::vector<std::string> run_startup_checks(const core::Config& config) {
    Problems problems;
    for (auto* check : kStartupChecks) check(config, problems);
    return problems;
}

std::string describe_config(const core::Config& c) {
    std::string out;
    auto line = [&out](std::string_view name, const std::string& value) {
        out.append("  ").append(name).append(": ").append(value).push_back('\n');
    };
    line("listen", c.bind + " port " + on_off(c.port) + ", TLS port " + on_off(c.tls_port));
    line("metrics", c.metrics_port == 0 ? std::string("off")
                                        : "http://" + c.metrics_bind_address() + ":" +
                                              std::to_string(c.metrics_port) + "/metrics");
    line("threads", std::to_string(c.threads) + ", maxclients " + std::to_string(c.max_clients));
    std::error_code ignored;
    line("data", c.dir + (std::filesystem::exists(c.dir, ignored) ? "" : " (to be created)") +
                     ", snapshot " + c.dbfilename + ", save '" +
                     core::format_save_points(c.save_points) + "'");
    line("journal", c.appendonly ? "on, appendfsync " + std::string(core::name_of(c.appendfsync))
                                 : std::string("off"));
    line("maxmemory",
         c.maxmemory == 0 ? std::string("no limit") : std::to_string(c.maxmemory) + " bytes");
    line("access", !c.aclfile.empty()       ? "users from " + c.aclfile
                   : !c.requirepass.empty() ? std::string("password for the default user")
                   : c.protected_mode       ? std::string("no password: loopback clients only")
                                            : std::string("no password, protected mode off"));
    line("output buffers", core::format_output_buffer_limits(c.client_output_buffer_limits));
    line("slowlog", "slower than " + std::to_string(c.slowlog_log_slower_than_us) +
                        " us, at most " + std::to_string(c.slowlog_max_len) + " entries");
    line("latency monitor",
         c.latency_monitor_threshold_ms == 0
             ? std::string("off")
             : "events of " + std::to_string(c.latency_monitor_threshold_ms) + " ms or more");
    std::string role = "primary";
    if (core::replicaof_names_self(c)) {
        role = "primary (--replicaof " + c.replicaof_host + " names this server)";
    } else if (!c.replicaof_host.empty()) {
        role = "replica of " + c.replicaof_host + " " + std::to_string(c.replicaof_port) +
               (c.masterauth.empty() ? "" : " (with AUTH)");
    }
    line("replication", role);
    if (c.cluster_enabled && c.cluster) {
        line("cluster", "this node is " + c.cluster->self().address + ", of " +
                            std::to_string(c.cluster->nodes().size()) + " nodes");
    } else if (c.cluster_in_etcd()) {
        line("cluster", "this node is " + c.cluster_announce + ", of cluster '" + c.cluster_name +
                            "' kept in etcd at " + c.cluster_etcd);
    }
    if (!c.config_file.empty()) line("config file", c.config_file);
    return out;
}

}  // namespace bloomery::net
