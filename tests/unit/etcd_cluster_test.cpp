// EtcdClient's settings and connections: endpoint lists, failover in a
// three-member cluster, authentication, TLS, unreachable endpoints.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "bloomery/cluster/etcd.hpp"
#include "etcd_test_cluster.hpp"

namespace bloomery::cluster {
namespace {

using testing::EtcdTestCluster;
using namespace std::chrono_literals;

using testing::make_client;

TEST(EtcdSettings, ParsesEndpointsAndNamesTheBadOne) {
    EtcdSettings settings;
    settings.endpoints = {"http://127.0.0.1:2379", "http://etcd-1.local:2379/",
                          "http://[::1]:2380"};
    auto parsed = parse_etcd_endpoints(settings);
    ASSERT_TRUE(parsed) << parsed.error();
    ASSERT_EQ(parsed->size(), 3u);
    EXPECT_EQ((*parsed)[1].host, "etcd-1.local");
    EXPECT_EQ((*parsed)[2].host, "::1");
    EXPECT_EQ((*parsed)[2].port, 2380);
    EXPECT_FALSE((*parsed)[0].tls);

    for (const std::string bad :
         {"127.0.0.1:2379", "ftp://h:1", "http://h", "http://h:0", "http://h:70000",
          "http://h:2379/v3", "http://:2379", "http://[::1:2379"}) {
        settings.endpoints = {"http://ok:1", bad};
        auto refused = parse_etcd_endpoints(settings);
        ASSERT_FALSE(refused) << bad;
        EXPECT_NE(refused.error().find("'" + bad + "'"), std::string::npos) << refused.error();
        EXPECT_EQ(refused.error().find('\n'), std::string::npos);
    }
    settings.endpoints = {};
    EXPECT_FALSE(parse_etcd_endpoints(settings));
    settings.endpoints = {"https://h:1"};
    settings.ca_file = "/nonexistent/ca.crt";
    auto no_ca = parse_etcd_endpoints(settings);
    ASSERT_FALSE(no_ca);
    EXPECT_NE(no_ca.error().find("/nonexistent/ca.crt"), std::string::npos);
}

// Neither a refused connection nor a listener that never answers holds a
// call past one request_timeout per endpoint.
TEST(EtcdClient, UnreachableEndpointsFailWithinTheTimeout) {
    const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(::listen(silent, 8), 0);  // connects, never accepted nor answered
    ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length), 0);
    const int closed = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in closed_address{};
    closed_address.sin_family = AF_INET;
    closed_address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    length = sizeof closed_address;
    ASSERT_EQ(::bind(closed, reinterpret_cast<sockaddr*>(&closed_address), sizeof closed_address),
              0);
    ASSERT_EQ(::getsockname(closed, reinterpret_cast<sockaddr*>(&closed_address), &length), 0);

    EtcdSettings settings;
    settings.endpoints = {"http://127.0.0.1:" + std::to_string(ntohs(closed_address.sin_port)),
                          "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port))};
    settings.request_timeout = 300ms;
    auto client = make_client(settings);
    const auto start = std::chrono::steady_clock::now();
    auto answer = client->get("key");
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(answer);
    EXPECT_NE(answer.error().find("no endpoint answered"), std::string::npos) << answer.error();
    EXPECT_LT(took, 2 * settings.request_timeout + 200ms);
    auto watched = client->watch("/", 0, [](const std::vector<EtcdEvent>&, std::int64_t) {});
    EXPECT_FALSE(watched);
    ::close(silent);
    ::close(closed);
}

// The client is given all three members, the first of them dead: every call
// goes on as with a whole cluster.
TEST(EtcdCluster, ThreeMembersWithOneKilledKeepAnswering) {
    EtcdTestCluster etcd({.members = 3});
    etcd.stop_member(0);
    EtcdSettings settings = etcd.settings();
    // Longer than an election (the members' election timeout is 500 ms), so
    // a call made while the survivors elect a leader waits it out.
    settings.request_timeout = 2s;
    auto client = make_client(settings);
    auto put = client->put("/ha/key", "v");
    ASSERT_TRUE(put) << put.error();
    auto got = client->get("/ha/key");
    ASSERT_TRUE(got) << got.error();
    EXPECT_EQ(got->kvs.at(0).value, "v");
    auto lease = client->grant(5);
    ASSERT_TRUE(lease) << lease.error();
    EXPECT_TRUE(client->keep_alive(lease->id));
    std::vector<EtcdEvent> watched;
    auto end = client->watch("/ha/", *put, [&](const std::vector<EtcdEvent>& events, std::int64_t) {
        watched = events;
        client->cancel();
    });
    ASSERT_TRUE(end) << end.error();
    ASSERT_EQ(watched.size(), 1u);
    EXPECT_EQ(watched[0].kv.value, "v");

    // The member comes back and another goes: the client moves on again.
    etcd.start_member(0);
    etcd.stop_member(1);
    auto after = client->put("/ha/key", "w");
    ASSERT_TRUE(after) << after.error();
    EXPECT_EQ(client->get("/ha/key")->kvs.at(0).value, "w");
}

TEST(EtcdAuth, UserAndPasswordWorkWithoutThemTheClientFailsClearly) {
    EtcdTestCluster etcd;
    etcd.etcdctl("user add root:secret");
    etcd.etcdctl("auth enable");
    EtcdSettings settings = etcd.settings();
    settings.user = "root";
    settings.password = "secret";
    auto client = make_client(settings);
    auto put = client->put("/auth/key", "v");
    ASSERT_TRUE(put) << put.error();
    EXPECT_EQ(client->get("/auth/key")->kvs.at(0).value, "v");

    // A change of the users makes etcd refuse older tokens: the client
    // authenticates again on its own.
    etcd.etcdctl("--user root:secret user add other:pw");
    auto after = client->get("/auth/key");
    ASSERT_TRUE(after) << after.error();

    // A watch sends the token too.
    std::vector<EtcdEvent> watched;
    auto end =
        client->watch("/auth/", *put, [&](const std::vector<EtcdEvent>& events, std::int64_t) {
            watched = events;
            client->cancel();
        });
    ASSERT_TRUE(end) << end.error();
    ASSERT_EQ(watched.size(), 1u);
    EXPECT_EQ(watched[0].kv.key, "/auth/key");

    // Turning auth off and on drops every token etcd gave: the client's
    // next request and its next watch authenticate again.
    etcd.etcdctl("--user root:secret auth disable");
    etcd.etcdctl("auth enable");
    auto renewed = client->get("/auth/key");
    ASSERT_TRUE(renewed) << renewed.error();
    etcd.etcdctl("--user root:secret auth disable");
    etcd.etcdctl("auth enable");
    watched.clear();
    client->reset_cancel();
    end = client->watch("/auth/", *put, [&](const std::vector<EtcdEvent>& events, std::int64_t) {
        watched = events;
        client->cancel();
    });
    ASSERT_TRUE(end) << end.error();
    EXPECT_EQ(watched.size(), 1u);

    auto anonymous = make_client(etcd.settings());
    auto refused = anonymous->get("/auth/key");
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("user name is empty"), std::string::npos) << refused.error();
    auto unwatched =
        anonymous->watch("/auth/", 0, [](const std::vector<EtcdEvent>&, std::int64_t) {});
    ASSERT_FALSE(unwatched);
    EXPECT_NE(unwatched.error().find("user name is empty"), std::string::npos) << unwatched.error();

    settings.password = "wrong";
    auto wrong = make_client(settings)->get("/auth/key");
    ASSERT_FALSE(wrong);
    EXPECT_NE(wrong.error().find("authentication failed"), std::string::npos) << wrong.error();
}

TEST(EtcdTls, VerifiesEtcdsCertificateAndRefusesAnotherCa) {
    EtcdTestCluster etcd({.transport = EtcdTestCluster::Transport::tls});
    auto client = make_client(etcd.settings());
    auto put = client->put("/tls/key", "v");
    ASSERT_TRUE(put) << put.error();
    EXPECT_EQ(client->get("/tls/key")->kvs.at(0).value, "v");

    EtcdSettings other = etcd.settings();
    other.ca_file = etcd.other_ca_file();
    auto refused = make_client(other)->get("/tls/key");
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find("TLS handshake failed"), std::string::npos) << refused.error();
    EXPECT_NE(refused.error().find("certificate verify failed"), std::string::npos)
        << refused.error();
}

TEST(EtcdTls, PresentsAClientCertificateWhenEtcdAsksForOne) {
    EtcdTestCluster etcd({.transport = EtcdTestCluster::Transport::mutual_tls});
    auto client = make_client(etcd.settings());
    auto put = client->put("/mtls/key", "v");
    ASSERT_TRUE(put) << put.error();

    EtcdSettings anonymous = etcd.settings();
    anonymous.cert_file.clear();
    anonymous.key_file.clear();
    auto refused = make_client(anonymous)->get("/mtls/key");
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().find(etcd.endpoints()[0]), std::string::npos) << refused.error();

    EtcdSettings half = etcd.settings();
    half.key_file.clear();
    auto incomplete = EtcdClient::create(half);
    ASSERT_FALSE(incomplete);
    EXPECT_NE(incomplete.error().find("set both or neither"), std::string::npos);
}

}  // namespace
}  // namespace bloomery::cluster
