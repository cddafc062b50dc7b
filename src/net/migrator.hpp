#pragma once
// MIGRATE's exchanges with target servers (command/server.hpp: Migration),
// on a thread and io_context of their own, started with the first MIGRATE:
// the worker that ran the command serves its other clients meanwhile, and a
// target that is slow or gone delays only the MIGRATEs sent to it.
//
// As Redis: connections are cached per host:port (at most 64; one unused
// for 10 s is closed), the SELECTed database is remembered per connection,
// every connect, write and reply read has the command's timeout, and a
// cached connection that fails before the first RESTORE is answered (the
// target closed it meanwhile) is replaced and the exchange tried again once,
// unless it timed out. MIGRATEs to one target run one after the other on
// its connection; those to different targets at once.
//
// Unlike Redis, the RESTOREs are sent one at a time, each payload made just
// before it is sent (MigrateRequest::restore_command), so an exchange holds
// one payload at a time (counted in used_memory), not every key's at once;
// and after an error reply to AUTH or SELECT no RESTORE is sent (Redis
// sends them anyway, and a target that refused SELECT restores them into
// whatever database the connection was in): the keys stay here, untouched
// there.
// With --tls-cluster (as Redis) the connections are TLS: the target's
// certificate chain is verified against --tls-ca-cert-file before AUTH or
// any key is sent, and a handshake that fails is a failed connect (IOERR).

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp needs std::exchange

#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>

#include "bloomery/command/server.hpp"

namespace bloomery::net {

class Migrator final : public command::Migration {
public:
    static constexpr std::size_t kMaxCachedTargets = 64;
    static constexpr std::chrono::seconds kIdleClose{10};
    // The longest reply line taken from a target (an error text); longer
    // is a read error.
    static constexpr std::size_t kMaxReplyLine = std::size_t{64} * 1024;

    // Connections are TLS with `tls_context` (null: plain TCP), which must
    // outlive the migrator.
    explicit Migrator(boost::asio::ssl::context* tls_context) : tls_context_(tls_context) {}
    // Closes every connection and stops the thread; exchanges not finished
    // are dropped without calling their `done` (their clients are going
    // with the server).
    ~Migrator() override;
    Migrator(const Migrator&) = delete;
    Migrator& operator=(const Migrator&) = delete;

    // Thread-safe; see command::Migration::migrate.
    void migrate(command::MigrateRequest request,
                 std::function<void(command::MigrateResult)> done) override;
    // Connections cached now (for tests). Thread-safe.
    std::size_t cached_connections();

private:
    struct Target;
    struct Job;
    void start_thread();
    void run_next(const std::shared_ptr<Target>& target);
    void connect(const std::shared_ptr<Target>& target);
    void handshake(const std::shared_ptr<Target>& target);
    void send_auth(const std::shared_ptr<Target>& target);
    void send_select(const std::shared_ptr<Target>& target);
    void send_next_key(const std::shared_ptr<Target>& target);
    void finish(const std::shared_ptr<Target>& target);
    // An I/O error or timeout in `what` (connect, write or read): closes the
    // connection, then tries again or gives up.
    void fail(const std::shared_ptr<Target>& target, command::MigrateResult::Failure what);
    // Writes `text`, reads one reply line, then calls `then(line)`.
    void exchange(const std::shared_ptr<Target>& target, std::string text,
                  std::function<void(std::string line)> then);
    // Reads one reply line, then calls `then(line)`.
    void read_reply(const std::shared_ptr<Target>& target,
                    std::function<void(std::string line)> then);
    void arm_timer(const std::shared_ptr<Target>& target);
    void close(Target& target);
    void sweep();  // closes connections unused for kIdleClose, every second

    boost::asio::ssl::context* tls_context_;
    std::once_flag started_;
    boost::asio::io_context io_{1};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_{
        io_.get_executor()};
    boost::asio::steady_timer sweep_timer_{io_};
    std::thread thread_;
    // On the thread only.
    std::unordered_map<std::string, std::shared_ptr<Target>> targets_;
    std::atomic<std::size_t> cached_{0};
    bool stopping_ = false;
};

}  // namespace bloomery::net
