#pragma once
// Real etcd members for the etcd client's tests: /usr/bin/etcd on 127.0.0.1
// with free ports, their data in a scratch directory, started and waited for
// (polled, bounded), and stopped by pid when the cluster object goes away, so
// no etcd outlives its test. Setting up throws std::runtime_error with the
// reason (etcd missing among them: `make test` installs etcd-server), which
// fails the test.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bloomery/cluster/cluster_map.hpp"
#include "bloomery/cluster/etcd.hpp"
#include "bloomery/cluster/topology.hpp"
#include "temp_dir.hpp"

namespace bloomery::testing {

class EtcdTestCluster {
public:
    // mutual_tls: members also require a client certificate signed by the CA.
    enum class Transport { plain, tls, mutual_tls };
    struct Options {
        int members = 1;
        Transport transport = Transport::plain;
    };

    explicit EtcdTestCluster(Options options);
    EtcdTestCluster() : EtcdTestCluster(Options{}) {}
    ~EtcdTestCluster();
    EtcdTestCluster(const EtcdTestCluster&) = delete;
    EtcdTestCluster& operator=(const EtcdTestCluster&) = delete;

    // The client URL of each member ("http://127.0.0.1:PORT", https with TLS).
    std::vector<std::string> endpoints() const;
    // Settings reaching every member (with the CA of a TLS cluster).
    cluster::EtcdSettings settings() const;
    // Kills member `index` (SIGKILL) and waits for it to exit; start_member
    // starts it again on the same ports and data, and waits until it serves.
    void stop_member(int index);
    void start_member(int index);
    // Runs etcdctl against the members with `arguments`; its output, or
    // throws with the output when it fails.
    std::string etcdctl(const std::string& arguments) const;

    // TLS clusters: the CA that signed the members' certificate, and another
    // that did not.
    std::string ca_file() const { return dir_.str() + "/ca.crt"; }
    std::string other_ca_file() const { return dir_.str() + "/other-ca.crt"; }
    // A client certificate the CA signed, and its key.
    std::string client_cert_file() const { return dir_.str() + "/client.crt"; }
    std::string client_key_file() const { return dir_.str() + "/client.key"; }
    const ScratchDir& dir() const { return dir_; }

private:
    struct Member {
        std::string name;
        std::uint16_t client_port = 0, peer_port = 0;
        pid_t pid = -1;
    };
    bool tls() const { return options_.transport != Transport::plain; }
    void make_certificates() const;
    std::vector<std::string> member_arguments(int index) const;
    void wait_until_serving(const std::vector<int>& members) const;

    Options options_;
    ScratchDir dir_;
    std::vector<Member> members_;
};

// A client of `settings`; throws (failing the test) if they are refused.
inline std::unique_ptr<cluster::EtcdClient> make_client(const cluster::EtcdSettings& settings) {
    auto client = cluster::EtcdClient::create(settings);
    if (!client) throw std::runtime_error(client.error());
    return std::move(*client);
}

// A cluster node on 127.0.0.1:port, with the id a static map would give it.
inline cluster::MapNode loopback_node(std::uint16_t port) {
    cluster::MapNode node;
    node.host = "127.0.0.1";
    node.port = port;
    node.address = "127.0.0.1:" + std::to_string(port);
    node.id = cluster::node_id(node.host, port);
    return node;
}

// Polls `condition` every 5 ms until it holds or `limit` passes; its last
// answer.
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return condition();
}

}  // namespace bloomery::testing
