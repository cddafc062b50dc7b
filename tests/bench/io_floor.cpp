// The kernel's share of one request: a server that does nothing but answer
// every RESP command it receives with +PONG, on one thread, through one of
// three event loops:
//
//   epoll     epoll_wait, then one recv and one send per ready connection
//             (level-triggered; what a hand-written loop costs at best);
//   io_uring  one recv in flight per connection, every send and the next
//             recv of a turn submitted together with one io_uring_enter,
//             which also waits for the next completions (built only where
//             liburing is found);
//   asio      Boost.Asio's async_read_some and async_write, as bloomery's
//             connections use them.
//
// Driven by redis-benchmark (tests/bench/io_floor_bench.sh), its CPU per
// request is the floor under any server's on the same machine and kernel:
// what a Bloom-filter server adds to it is its own. Not a test.
//
// Usage: io_floor epoll|io_uring|asio PORT

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio.hpp>

#ifdef BLOOMERY_HAVE_LIBURING
#include <liburing.h>
#endif

namespace {

constexpr std::size_t kBufferBytes = 16 * 1024;

// One +PONG per command begun in `bytes` (a '*' at the start of a line):
// enough for redis-benchmark's fixed-size commands, which never straddle
// reads at these sizes in a way that changes the count.
void answer(std::string_view bytes, std::string& out) {
    out.clear();
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] == '*' && (i == 0 || bytes[i - 1] == '\n')) out += "+PONG\r\n";
    }
}

int listen_on(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd, 1024) != 0) {
        std::perror("listen");
        std::exit(1);
    }
    return fd;
}

void no_delay(int fd) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

[[noreturn]] void run_epoll(int listener) {
    const int epoll = ::epoll_create1(0);
    ::fcntl(listener, F_SETFL, O_NONBLOCK);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = listener;
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &event);
    std::array<epoll_event, 256> ready{};
    std::array<char, kBufferBytes> buffer{};
    std::string out;
    for (;;) {
        const int n = ::epoll_wait(epoll, ready.data(), static_cast<int>(ready.size()), -1);
        for (int i = 0; i < n; ++i) {
            const int fd = ready[static_cast<std::size_t>(i)].data.fd;
            if (fd == listener) {
                for (int client;
                     (client = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
                    no_delay(client);
                    event.data.fd = client;
                    ::epoll_ctl(epoll, EPOLL_CTL_ADD, client, &event);
                }
                continue;
            }
            const ssize_t got = ::recv(fd, buffer.data(), buffer.size(), 0);
            if (got <= 0) {
                ::close(fd);
                continue;
            }
            answer(std::string_view(buffer.data(), static_cast<std::size_t>(got)), out);
            ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
        }
    }
}

#ifdef BLOOMERY_HAVE_LIBURING
struct UringClient {
    int fd;
    std::array<char, kBufferBytes> buffer;
    std::string out;
};

// user_data: the client's address with the operation in its low bits.
enum Operation : std::uint64_t { kAccept = 0, kRecv = 1, kSend = 2 };

io_uring_sqe* next_sqe(io_uring& ring) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) {
        io_uring_submit(&ring);
        sqe = io_uring_get_sqe(&ring);
    }
    return sqe;
}

void queue_recv(io_uring& ring, UringClient* client) {
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_recv(sqe, client->fd, client->buffer.data(), client->buffer.size(), 0);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(client) | kRecv);
}

void complete(io_uring& ring, const io_uring_cqe& cqe) {
    if (cqe.user_data == kAccept) {
        if (cqe.res < 0) return;
        no_delay(cqe.res);
        queue_recv(ring, new UringClient{cqe.res, {}, {}});
        return;
    }
    auto* client = reinterpret_cast<UringClient*>(cqe.user_data & ~std::uint64_t{3});
    if ((cqe.user_data & 3) == kSend) {
        queue_recv(ring, client);
        return;
    }
    if (cqe.res <= 0) {
        ::close(client->fd);
        delete client;
        return;
    }
    answer(std::string_view(client->buffer.data(), static_cast<std::size_t>(cqe.res)), client->out);
    io_uring_sqe* sqe = next_sqe(ring);
    io_uring_prep_send(sqe, client->fd, client->out.data(), client->out.size(), MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uint64_t>(client) | kSend);
}

[[noreturn]] void run_io_uring(int listener) {
    io_uring ring{};
    io_uring_params params{};
    params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    if (const int error = io_uring_queue_init_params(4096, &ring, &params); error < 0) {
        std::fprintf(stderr, "io_uring refused: %s\n", std::strerror(-error));
        std::exit(1);
    }
    io_uring_sqe* accept = next_sqe(ring);
    io_uring_prep_multishot_accept(accept, listener, nullptr, nullptr, 0);
    io_uring_sqe_set_data64(accept, kAccept);
    for (;;) {
        io_uring_submit_and_wait(&ring, 1);
        unsigned head = 0;
        unsigned seen = 0;
        io_uring_cqe* cqe = nullptr;
        io_uring_for_each_cqe(&ring, head, cqe) {
            ++seen;
            complete(ring, *cqe);
        }
        io_uring_cq_advance(&ring, seen);
    }
}
#endif

namespace asio = boost::asio;

class AsioClient : public std::enable_shared_from_this<AsioClient> {
public:
    explicit AsioClient(asio::ip::tcp::socket socket) : socket_(std::move(socket)) {
        socket_.set_option(asio::ip::tcp::no_delay(true));
    }
    void read() {
        socket_.async_read_some(
            asio::buffer(buffer_),
            [self = shared_from_this()](boost::system::error_code error, std::size_t got) {
                if (!error) self->reply(got);
            });
    }

private:
    void reply(std::size_t got) {
        answer(std::string_view(buffer_.data(), got), out_);
        asio::async_write(
            socket_, asio::buffer(out_),
            [self = shared_from_this()](boost::system::error_code error, std::size_t) {
                if (!error) self->read();
            });
    }
    asio::ip::tcp::socket socket_;
    std::array<char, kBufferBytes> buffer_{};
    std::string out_;
};

void accept_next(asio::ip::tcp::acceptor& acceptor) {
    acceptor.async_accept([&acceptor](boost::system::error_code error, asio::ip::tcp::socket s) {
        if (!error) std::make_shared<AsioClient>(std::move(s))->read();
        accept_next(acceptor);
    });
}

[[noreturn]] void run_asio(int port) {
    asio::io_context io(1);
    asio::ip::tcp::acceptor acceptor(
        io, {asio::ip::address_v4::loopback(), static_cast<std::uint16_t>(port)});
    accept_next(acceptor);
    io.run();
    std::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: io_floor epoll|io_uring|asio PORT\n");
        return 2;
    }
    const std::string_view loop = argv[1];
    const int port = std::atoi(argv[2]);
    if (loop == "asio") run_asio(port);
    if (loop == "epoll") run_epoll(listen_on(port));
#ifdef BLOOMERY_HAVE_LIBURING
    if (loop == "io_uring") run_io_uring(listen_on(port));
#endif
    std::fprintf(stderr, "io_floor: no event loop %s in this build\n", argv[1]);
    return 2;
}
