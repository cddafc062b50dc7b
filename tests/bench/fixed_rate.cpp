// An open-loop load generator: sends one command at a fixed total rate over
// several connections, each request at its scheduled time whether or not the
// replies before it have come, and measures every reply's latency from that
// scheduled time (so a server that stalls is charged for the requests that
// waited behind the stall, which closed-loop tools like redis-benchmark do
// not see). Prints one CSV line:
//
//   sent,answered,p50_us,p90_us,p99_us,p999_us,max_us
//
// Usage: fixed_rate PORT RATE CLIENTS SECONDS WORD...
// Every "__rand_int__" in the words becomes a random 12-digit number per
// request. Not a test (tests/bench/latency_bench.sh runs it).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Client {
    int fd = -1;
    std::deque<Clock::time_point> scheduled;  // of the requests awaiting replies
    std::string in;
    std::size_t parsed = 0;
};

// The end of the RESP value starting at `at` in `in`, or npos while it is
// incomplete.
std::size_t value_end(std::string_view in, std::size_t at) {
    if (at >= in.size()) return std::string_view::npos;
    const std::size_t line = in.find("\r\n", at);
    if (line == std::string_view::npos) return line;
    const char type = in[at];
    if (type != '$' && type != '*') return line + 2;
    const long long count =
        std::strtoll(std::string(in.substr(at + 1, line - at - 1)).c_str(), nullptr, 10);
    if (count < 0) return line + 2;
    if (type == '$') {
        const std::size_t end = line + 2 + static_cast<std::size_t>(count) + 2;
        return end <= in.size() ? end : std::string_view::npos;
    }
    std::size_t next = line + 2;
    for (long long i = 0; i < count; ++i) {
        next = value_end(in, next);
        if (next == std::string_view::npos) return next;
    }
    return next;
}

std::string encode(const std::vector<std::string>& words, std::mt19937_64& random) {
    std::string out = "*" + std::to_string(words.size()) + "\r\n";
    for (std::string word : words) {
        for (std::size_t at; (at = word.find("__rand_int__")) != std::string::npos;) {
            char digits[16];
            std::snprintf(digits, sizeof digits, "%012llu",
                          static_cast<unsigned long long>(random() % 1000000000000ULL));
            word.replace(at, 12, digits);
        }
        out += "$" + std::to_string(word.size()) + "\r\n" + word + "\r\n";
    }
    return out;
}

int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

// Reads what `client` has and records the latency of every whole reply.
bool take_replies(Client& client, std::vector<double>& latencies) {
    std::array<char, 65536> buffer{};
    for (;;) {
        const ssize_t got = ::recv(client.fd, buffer.data(), buffer.size(), 0);
        if (got == 0) return false;
        if (got < 0) break;
        client.in.append(buffer.data(), static_cast<std::size_t>(got));
    }
    const auto now = Clock::now();
    for (std::size_t end; (end = value_end(client.in, client.parsed)) != std::string_view::npos;) {
        client.parsed = end;
        if (client.scheduled.empty()) continue;
        latencies.push_back(
            std::chrono::duration<double, std::micro>(now - client.scheduled.front()).count());
        client.scheduled.pop_front();
    }
    client.in.erase(0, client.parsed);
    client.parsed = 0;
    return true;
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    const auto at = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
    return sorted[at];
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: fixed_rate PORT RATE CLIENTS SECONDS WORD...\n");
        return 2;
    }
    const int port = std::atoi(argv[1]);
    const double rate = std::atof(argv[2]);
    const int num_clients = std::atoi(argv[3]);
    const double seconds = std::atof(argv[4]);
    const std::vector<std::string> words(argv + 5, argv + argc);
    if (!(rate > 0) || num_clients < 1 || !(seconds > 0)) return 2;

    const int epoll = ::epoll_create1(0);
    std::vector<Client> clients(static_cast<std::size_t>(num_clients));
    for (std::size_t i = 0; i < clients.size(); ++i) {
        clients[i].fd = connect_to(port);
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.u64 = i;
        ::epoll_ctl(epoll, EPOLL_CTL_ADD, clients[i].fd, &event);
    }
    std::mt19937_64 random(42);
    const auto total = static_cast<std::uint64_t>(rate * seconds);
    const auto interval = std::chrono::duration<double>(1.0 / rate);
    std::vector<double> latencies;
    latencies.reserve(total);
    const auto start = Clock::now() + std::chrono::milliseconds(100);
    std::uint64_t sent = 0;
    std::array<epoll_event, 256> ready{};
    const auto deadline = start + std::chrono::duration<double>(seconds + 5.0);
    while (Clock::now() < deadline && latencies.size() < total) {
        auto now = Clock::now();
        for (; sent < total; ++sent) {
            const auto due = start + std::chrono::duration_cast<Clock::duration>(
                                         interval * static_cast<double>(sent));
            if (due > now) break;
            Client& client = clients[sent % clients.size()];
            const std::string request = encode(words, random);
            if (::send(client.fd, request.data(), request.size(), MSG_NOSIGNAL) !=
                static_cast<ssize_t>(request.size())) {
                std::fprintf(stderr, "fixed_rate: a send was cut short\n");
                return 1;
            }
            client.scheduled.push_back(due);
        }
        // Sleep until the next request is due (or 1 ms once all are sent),
        // to the nanosecond: epoll_wait's milliseconds would send late.
        auto wake = now + std::chrono::milliseconds(1);
        if (sent < total) {
            wake = start + std::chrono::duration_cast<Clock::duration>(interval *
                                                                       static_cast<double>(sent));
        }
        const auto wait_ns = std::max<long long>(
            0, std::chrono::duration_cast<std::chrono::nanoseconds>(wake - Clock::now()).count());
        const timespec timeout{static_cast<time_t>(wait_ns / 1000000000),
                               static_cast<long>(wait_ns % 1000000000)};
        const int n =
            ::epoll_pwait2(epoll, ready.data(), static_cast<int>(ready.size()), &timeout, nullptr);
        for (int i = 0; i < n; ++i) {
            Client& client = clients[ready[static_cast<std::size_t>(i)].data.u64];
            if (!take_replies(client, latencies)) {
                std::fprintf(stderr, "fixed_rate: the server closed a connection\n");
                return 1;
            }
        }
    }
    std::sort(latencies.begin(), latencies.end());
    std::printf("%llu,%zu,%.0f,%.0f,%.0f,%.0f,%.0f\n", static_cast<unsigned long long>(sent),
                latencies.size(), percentile(latencies, 0.5), percentile(latencies, 0.9),
                percentile(latencies, 0.99), percentile(latencies, 0.999),
                latencies.empty() ? 0.0 : latencies.back());
    return latencies.size() == total ? 0 : 1;
}
