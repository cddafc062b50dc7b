// EtcdClient against a fake etcd that answers garbage: every answer becomes
// an error that says what was wrong, never a crash, a hang or a huge buffer.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "bloomery/cluster/etcd.hpp"

namespace bloomery::cluster {
namespace {

using namespace std::chrono_literals;

// Answers every request on 127.0.0.1 with `answer` (a whole HTTP response)
// and closes the connection.
class FakeEtcd {
public:
    explicit FakeEtcd(std::string answer) : answer_(std::move(answer)) {
        listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(listener_, 8) != 0 ||
            ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
            throw std::runtime_error("fake etcd: cannot listen");
        }
        port_ = ntohs(address.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~FakeEtcd() {
        stopping_ = true;
        ::shutdown(listener_, SHUT_RDWR);
        thread_.join();
        ::close(listener_);
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

private:
    void serve() {
        while (!stopping_) {
            const int fd = ::accept(listener_, nullptr, nullptr);
            if (fd < 0) return;
            // Read the request's header and a body of Content-Length bytes.
            std::string request;
            char buffer[4096];
            while (request.find("\r\n\r\n") == std::string::npos) {
                const ssize_t n = ::read(fd, buffer, sizeof buffer);
                if (n <= 0) break;
                request.append(buffer, static_cast<std::size_t>(n));
            }
            (void)!::write(fd, answer_.data(), answer_.size());
            ::shutdown(fd, SHUT_WR);
            while (::read(fd, buffer, sizeof buffer) > 0) {
            }
            ::close(fd);
        }
    }

    std::string answer_;
    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<bool> stopping_{false};
    std::thread thread_;
};

std::string http_answer(std::string_view status, std::string_view body) {
    return "HTTP/1.1 " + std::string(status) + "\r\nContent-Type: application/json\r\n" +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

std::string error_of_get(const std::string& answer) {
    FakeEtcd fake(answer);
    EtcdSettings settings;
    settings.endpoints = {fake.url()};
    settings.request_timeout = 2s;
    auto client = EtcdClient::create(settings);
    if (!client) return "create: " + client.error();
    auto got = (*client)->get("key");
    return got ? std::string("no error") : got.error();
}

TEST(EtcdHostileAnswers, GarbledJsonIsAnErrorNamingWhatIsWrong) {
    const std::string header = R"({"header":{"revision":"5"})";
    const std::pair<std::string, std::string> cases[] = {
        {"not json at all", "not JSON"},
        {"[1,2,3]", "not a JSON object"},
        {R"({"header":{"revision":"five"}})", "revision is not an integer"},
        {R"({"header":{"revision":"99999999999999999999"}})", "revision is not an integer"},
        {R"({"kvs":[]})", "no header"},
        {header + R"(,"kvs":5})", "kvs is not an array"},
        {header + R"(,"kvs":[5]})", "not an object"},
        {header + R"(,"kvs":[{"key":7}]})", "key is not a string"},
        {header + R"(,"kvs":[{"key":"%%%%"}]})", "base64"},
        {header + R"(,"kvs":[{"key":"abc"}]})", "base64"},
        {header + R"(,"kvs":[{"key":"YQ==","version":{"x":1}}]})", "version is not an integer"},
        {std::string(100000, '[') + std::string(100000, ']'), "not a JSON object"},
    };
    for (const auto& [body, expected] : cases) {
        const std::string error = error_of_get(http_answer("200 OK", body));
        EXPECT_NE(error.find(expected), std::string::npos)
            << body.substr(0, 80) << " gave: " << error;
        EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    }
}

TEST(EtcdHostileAnswers, RefusalsAndBrokenHttpAreErrors) {
    EXPECT_NE(error_of_get(http_answer("500 Internal", "<html>oops</html>"))
                  .find("HTTP 500 without etcd's error object"),
              std::string::npos);
    EXPECT_NE(error_of_get(http_answer("400 Bad", R"({"error":"etcdserver: nope","code":3})"))
                  .find("refused by http://127.0.0.1:"),
              std::string::npos);
    EXPECT_NE(error_of_get("garbage\r\n\r\n").find("no endpoint answered"), std::string::npos);
    // A body over the limit is refused from its Content-Length, before it comes.
    const std::string huge =
        "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kMaxEtcdResponseBytes + 1) +
        "\r\n\r\n{";
    EXPECT_NE(error_of_get(huge).find("larger than 64 MiB"), std::string::npos)
        << error_of_get(huge);
}

TEST(EtcdHostileAnswers, GarbledWatchStreamEndsTheWatchWithAnError) {
    const std::string stream =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "28\r\n{\"result\":{\"header\":{},\"created\":true}}\n\r\n"
        "d\r\n{\"result\":5}\n\r\n0\r\n\r\n";
    FakeEtcd fake(stream);
    EtcdSettings settings;
    settings.endpoints = {fake.url()};
    auto client = EtcdClient::create(settings);
    ASSERT_TRUE(client) << client.error();
    bool called = false;
    auto end = (*client)->watch(
        "/", 0, [&](const std::vector<EtcdEvent>&, std::int64_t) { called = true; });
    ASSERT_FALSE(end);
    EXPECT_FALSE(called);
    EXPECT_NE(end.error().find("etcd watch of '/': a watch message without its result"),
              std::string::npos)
        << end.error();
}

}  // namespace
}  // namespace bloomery::cluster
