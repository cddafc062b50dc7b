#include "etcd_test_cluster.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace bloomery::testing {

namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";
constexpr const char* kEtcdctl = "/usr/bin/etcdctl";
// How long members may take to serve: elections on a busy two-core machine.
constexpr std::chrono::seconds kStartLimit{30};

// A port nobody listens on now (the kernel's pick for a socket bound to 0).
std::uint16_t free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        if (fd >= 0) ::close(fd);
        throw std::runtime_error("cannot find a free port");
    }
    ::close(fd);
    return ntohs(address.sin_port);
}

void run_shell(const std::string& command, const std::string& log) {
    const std::string line = command + " >" + log + " 2>&1";
    if (std::system(line.c_str()) != 0) {
        std::ifstream in(log);
        std::stringstream text;
        text << in.rdbuf();
        throw std::runtime_error("failed: " + command + "\n" + text.str());
    }
}

}  // namespace

EtcdTestCluster::EtcdTestCluster(Options options) : options_(options), dir_("bloomery-etcd") {
    if (!std::filesystem::exists(kEtcd) || !std::filesystem::exists(kEtcdctl)) {
        throw std::runtime_error(
            "etcd is not installed (/usr/bin/etcd, /usr/bin/etcdctl): the etcd client's tests "
            "need it; `make test` installs Debian's etcd-server");
    }
    if (tls()) make_certificates();
    for (int i = 0; i < options_.members; ++i) {
        members_.push_back(Member{"m" + std::to_string(i), free_port(), free_port(), -1});
    }
    for (int i = 0; i < options_.members; ++i) start_member(i);
}

EtcdTestCluster::~EtcdTestCluster() {
    for (int i = 0; i < static_cast<int>(members_.size()); ++i) stop_member(i);
}

std::vector<std::string> EtcdTestCluster::endpoints() const {
    const std::string scheme = tls() ? "https" : "http";
    std::vector<std::string> urls;
    for (const auto& member : members_) {
        urls.push_back(scheme + "://127.0.0.1:" + std::to_string(member.client_port));
    }
    return urls;
}

cluster::EtcdSettings EtcdTestCluster::settings() const {
    cluster::EtcdSettings settings;
    settings.endpoints = endpoints();
    if (tls()) settings.ca_file = ca_file();
    if (options_.transport == Transport::mutual_tls) {
        settings.cert_file = client_cert_file();
        settings.key_file = client_key_file();
    }
    return settings;
}

void EtcdTestCluster::make_certificates() const {
    const std::string d = dir_.str();
    const std::string log = d + "/openssl.log";
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2";
    for (const std::string ca : {"ca", "other-ca"}) {
        run_shell("openssl req -x509" + key + " -keyout " + d + "/" + ca + ".key -out " + d + "/" +
                      ca + ".crt -subj /CN=bloomery-test-" + ca,
                  log);
    }
    run_shell("openssl req" + key + " -keyout " + d + "/server.key -out " + d +
                  "/server.csr -subj /CN=127.0.0.1",
              log);
    std::ofstream(d + "/san.cnf") << "subjectAltName=IP:127.0.0.1\n";
    run_shell("openssl x509 -req -in " + d + "/server.csr -CA " + d + "/ca.crt -CAkey " + d +
                  "/ca.key -CAcreateserial -days 2 -extfile " + d + "/san.cnf -out " + d +
                  "/server.crt",
              log);
    run_shell("openssl req" + key + " -keyout " + d + "/client.key -out " + d +
                  "/client.csr -subj /CN=bloomery-client",
              log);
    run_shell("openssl x509 -req -in " + d + "/client.csr -CA " + d + "/ca.crt -CAkey " + d +
                  "/ca.key -CAcreateserial -days 2 -out " + d + "/client.crt",
              log);
}

std::vector<std::string> EtcdTestCluster::member_arguments(int index) const {
    const Member& member = members_[index];
    const std::string client = endpoints()[index];
    const std::string peer = "http://127.0.0.1:" + std::to_string(member.peer_port);
    std::string initial;
    for (const auto& other : members_) {
        if (!initial.empty()) initial += ',';
        initial += other.name + "=http://127.0.0.1:" + std::to_string(other.peer_port);
    }
    // Short heartbeats: elections and etcd's minimum lease TTL (1.5 election
    // timeouts, rounded up to whole seconds) stay short.
    std::vector<std::string> args = {kEtcd,
                                     "--name",
                                     member.name,
                                     "--data-dir",
                                     dir_.str() + "/" + member.name,
                                     "--listen-client-urls",
                                     client,
                                     "--advertise-client-urls",
                                     client,
                                     "--listen-peer-urls",
                                     peer,
                                     "--initial-advertise-peer-urls",
                                     peer,
                                     "--initial-cluster",
                                     initial,
                                     "--initial-cluster-state",
                                     "new",
                                     "--initial-cluster-token",
                                     dir_.path().filename().string(),
                                     "--heartbeat-interval",
                                     "50",
                                     "--election-timeout",
                                     "500",
                                     "--log-level",
                                     "warn"};
    if (tls()) {
        args.insert(args.end(), {"--cert-file", dir_.str() + "/server.crt", "--key-file",
                                 dir_.str() + "/server.key"});
    }
    if (options_.transport == Transport::mutual_tls) {
        args.insert(args.end(), {"--client-cert-auth", "--trusted-ca-file", ca_file()});
    }
    return args;
}

void EtcdTestCluster::start_member(int index) {
    Member& member = members_[index];
    if (member.pid > 0) return;
    const auto args = member_arguments(index);
    std::vector<char*> argv;
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    const std::string log = dir_.str() + "/" + member.name + ".log";
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) throw std::runtime_error("cannot open " + log);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
        // Only async-signal-safe calls here: the test process has threads.
        // The member dies with the test process, even one that crashed, so
        // no etcd outlives its test (with the thread that started it, in
        // fact: tests start members from their own thread).
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        ::dup2(log_fd, 1);
        ::dup2(log_fd, 2);
        const int null_fd = ::open("/dev/null", O_RDONLY);
        if (null_fd >= 0) ::dup2(null_fd, 0);
        ::execv(kEtcd, argv.data());
        ::_exit(127);
    }
    ::close(log_fd);
    if (pid < 0) throw std::runtime_error("cannot start etcd: " + std::string(strerror(errno)));
    member.pid = pid;
    // A member alone cannot serve until a majority runs: wait once the last
    // of a new cluster is started, or for a restarted member right away.
    std::vector<int> running;
    for (int i = 0; i < static_cast<int>(members_.size()); ++i) {
        if (members_[i].pid > 0) running.push_back(i);
    }
    if (static_cast<int>(running.size()) * 2 > options_.members) wait_until_serving({index});
}

void EtcdTestCluster::stop_member(int index) {
    Member& member = members_[index];
    if (member.pid <= 0) return;
    ::kill(member.pid, SIGKILL);
    int status = 0;
    ::waitpid(member.pid, &status, 0);
    member.pid = -1;
}

void EtcdTestCluster::wait_until_serving(const std::vector<int>& members) const {
    for (const int index : members) {
        cluster::EtcdSettings settings = this->settings();
        settings.endpoints = {endpoints()[index]};
        settings.request_timeout = std::chrono::milliseconds(500);
        auto client = cluster::EtcdClient::create(settings);
        if (!client) throw std::runtime_error("etcd test client: " + client.error());
        const auto deadline = std::chrono::steady_clock::now() + kStartLimit;
        std::string last;
        for (;;) {
            // A linearizable read: answered once the member has a leader.
            auto answer = (*client)->get("health");
            if (answer) break;
            last = answer.error();
            int status = 0;
            if (::waitpid(members_[index].pid, &status, WNOHANG) == members_[index].pid) {
                throw std::runtime_error("etcd member " + members_[index].name + " exited; see " +
                                         dir_.str());
            }
            if (std::chrono::steady_clock::now() > deadline) {
                throw std::runtime_error("etcd member " + members_[index].name +
                                         " does not serve: " + last);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
}

std::string EtcdTestCluster::etcdctl(const std::string& arguments) const {
    std::string endpoint_list;
    for (const auto& url : endpoints()) endpoint_list += (endpoint_list.empty() ? "" : ",") + url;
    std::string command = std::string(kEtcdctl) + " --endpoints=" + endpoint_list;
    if (tls()) command += " --cacert=" + ca_file();
    if (options_.transport == Transport::mutual_tls) {
        command += " --cert=" + client_cert_file() + " --key=" + client_key_file();
    }
    const std::string log = dir_.str() + "/etcdctl.log";
    run_shell("ETCDCTL_API=3 " + command + " " + arguments, log);
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace bloomery::testing
