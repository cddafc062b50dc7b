#include "migrator.hpp"

#include <spdlog/spdlog.h>

#include <deque>
#include <random>

#include "bloomery/core/memory.hpp"
#include "bloomery/resp/writer.hpp"
#include "link_stream.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;
using command::MigrateRequest;
using command::MigrateResult;
using tcp = asio::ip::tcp;

// One MIGRATE.
struct Migrator::Job {
    MigrateRequest request;
    std::function<void(MigrateResult)> done;
    MigrateResult result;
    bool retried = false;
    bool reply_read = false;  // a RESTORE's reply came: no retry from here
    bool auth_failed = false;
    bool select_failed = false;
    std::size_t next_key = 0;
};

// One host:port, its cached connection and the MIGRATEs waiting for it.
struct Migrator::Target {
    Target(asio::io_context& io, asio::ssl::context* tls_context, std::string host_name,
           std::uint16_t port_number)
        : host(std::move(host_name)),
          port(port_number),
          stream(io, tls_context),
          resolver(io),
          timer(io) {}
    std::string host;
    std::uint16_t port;
    LinkStream stream;  // plain TCP, or TLS with --tls-cluster
    tcp::resolver resolver;
    asio::steady_timer timer;
    bool connected = false;
    std::int64_t last_db = -1;  // SELECTed on this connection; -1: unknown
    std::chrono::steady_clock::time_point last_use = std::chrono::steady_clock::now();
    std::deque<std::shared_ptr<Job>> jobs;            // the running one first
    std::string input;                                // read past the last reply line
    std::string output;                               // being written
    core::MemoryCharge held{core::MemoryUse::other};  // input and output
    std::uint64_t session = 0;                        // bumped at every close: older handlers stop
    bool timed_out = false;                           // the last operation ran past the timeout
};

namespace {

std::string command_text(std::initializer_list<std::string_view> words) {
    return resp::encode_command(words);
}

}  // namespace

Migrator::~Migrator() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
        stopping_ = true;
        sweep_timer_.cancel();
        for (auto& [name, target] : targets_) {
            close(*target);
            target->jobs.clear();
        }
        targets_.clear();
        work_.reset();
    });
    thread_.join();
}

void Migrator::start_thread() {
    std::call_once(started_, [this] {
        thread_ = std::thread([this] { io_.run(); });
        asio::post(io_, [this] { sweep(); });
    });
}

std::size_t Migrator::cached_connections() {
    return cached_.load(std::memory_order_relaxed);
}

void Migrator::migrate(MigrateRequest request, std::function<void(MigrateResult)> done) {
    start_thread();
    auto job = std::make_shared<Job>();
    job->request = std::move(request);
    job->done = std::move(done);
    asio::post(io_, [this, job] {
        if (stopping_) return;
        const std::string name = job->request.host + ":" + std::to_string(job->request.port);
        auto found = targets_.find(name);
        if (found == targets_.end()) {
            if (targets_.size() >= kMaxCachedTargets) {
                // Too many: one unused connection goes, at random, as Redis.
                std::vector<std::string> idle;
                for (const auto& [other, target] : targets_) {
                    if (target->jobs.empty()) idle.push_back(other);
                }
                if (!idle.empty()) {
                    thread_local std::mt19937 random{std::random_device{}()};
                    const std::string& victim = idle[std::uniform_int_distribution<std::size_t>(
                        0, idle.size() - 1)(random)];
                    close(*targets_[victim]);
                    targets_.erase(victim);
                }
            }
            found = targets_
                        .emplace(name, std::make_shared<Target>(
                                           io_, tls_context_, job->request.host, job->request.port))
                        .first;
        }
        const std::shared_ptr<Target> target = found->second;
        target->jobs.push_back(job);
        if (target->jobs.size() == 1) run_next(target);
    });
}

void Migrator::arm_timer(const std::shared_ptr<Target>& target) {
    target->timed_out = false;
    target->timer.expires_after(
        std::chrono::milliseconds(target->jobs.front()->request.timeout_ms));
    target->timer.async_wait([target, session = target->session](const error_code& error) {
        if (error || session != target->session) return;
        // The operation in flight ends with an error once the socket is
        // closed; it sees timed_out.
        target->timed_out = true;
        target->stream.close();
        target->resolver.cancel();
    });
}

void Migrator::close(Target& target) {
    ++target.session;
    target.stream.close();
    target.resolver.cancel();
    target.timer.cancel();
    if (target.connected) cached_.fetch_sub(1, std::memory_order_relaxed);
    target.connected = false;
    target.last_db = -1;
    target.input.clear();
    target.input.shrink_to_fit();
    target.output.clear();
    target.output.shrink_to_fit();
    target.held.set(0);
}

void Migrator::run_next(const std::shared_ptr<Target>& target) {
    if (target->jobs.empty()) return;
    Job& job = *target->jobs.front();
    job.result = MigrateResult{};
    job.reply_read = false;
    job.auth_failed = false;
    job.select_failed = false;
    job.next_key = 0;
    if (!target->connected) {
        connect(target);
    } else {
        send_auth(target);
    }
}

void Migrator::connect(const std::shared_ptr<Target>& target) {
    target->stream.reset();
    arm_timer(target);
    target->resolver.async_resolve(
        target->host, std::to_string(target->port),
        [this, target, session = target->session](const error_code& error,
                                                  const tcp::resolver::results_type& endpoints) {
            if (session != target->session) return;
            if (error) {
                fail(target, MigrateResult::Failure::connect);
                return;
            }
            asio::async_connect(
                target->stream.socket(), endpoints,
                [this, target, session](const error_code& connect_error, const tcp::endpoint&) {
                    if (session != target->session) return;
                    if (connect_error) {
                        // As Redis reports it: its connect waits only for
                        // the socket to be writable, so a target that
                        // refuses the connection is found by the first
                        // write; only a timeout fails the connect itself.
                        fail(target, target->timed_out ? MigrateResult::Failure::connect
                                                       : MigrateResult::Failure::write);
                        return;
                    }
                    error_code ignored;
                    target->stream.socket().set_option(tcp::no_delay(true), ignored);
                    handshake(target);
                });
        });
}

// Under the connect's timeout still: a target that accepts and never
// answers the TLS handshake times out as one that never accepts.
void Migrator::handshake(const std::shared_ptr<Target>& target) {
    target->stream.async_handshake(
        target->host, [this, target, session = target->session](const error_code& error) {
            if (session != target->session) return;
            if (error) {
                // MIGRATE's reply is Redis's fixed IOERR text: the reason
                // goes to the log.
                spdlog::warn("MIGRATE to {}:{}: {}", target->host, target->port,
                             target->timed_out ? std::string("TLS handshake timed out")
                                               : target->stream.handshake_failure(error));
                fail(target, MigrateResult::Failure::connect);
                return;
            }
            target->timer.cancel();
            target->connected = true;
            cached_.fetch_add(1, std::memory_order_relaxed);
            send_auth(target);
        });
}

void Migrator::exchange(const std::shared_ptr<Target>& target, std::string text,
                        std::function<void(std::string line)> then) {
    target->output = std::move(text);
    target->held.set(target->output.capacity() + target->input.capacity());
    arm_timer(target);
    target->stream.async_write(asio::buffer(target->output),
                               [this, target, session = target->session, then = std::move(then)](
                                   const error_code& error, std::size_t) mutable {
                                   if (session != target->session) return;
                                   // The payload goes as soon as it is written.
                                   std::string().swap(target->output);
                                   target->held.set(target->input.capacity());
                                   if (error) {
                                       fail(target, MigrateResult::Failure::write);
                                       return;
                                   }
                                   read_reply(target, std::move(then));
                               });
}

void Migrator::read_reply(const std::shared_ptr<Target>& target,
                          std::function<void(std::string line)> then) {
    arm_timer(target);
    target->stream.async_read_line(
        target->input, kMaxReplyLine,
        [this, target, session = target->session, then = std::move(then)](const error_code& error,
                                                                          std::size_t length) {
            if (session != target->session) return;
            if (error) {
                fail(target, MigrateResult::Failure::read);
                return;
            }
            target->timer.cancel();
            std::string line = target->input.substr(0, length - 2);
            target->input.erase(0, length);
            target->held.set(target->input.capacity());
            then(std::move(line));
        });
}

void Migrator::send_auth(const std::shared_ptr<Target>& target) {
    const MigrateRequest& request = target->jobs.front()->request;
    if (!request.auth) {
        send_select(target);
        return;
    }
    const std::string text = request.username.empty()
                                 ? command_text({"AUTH", request.password})
                                 : command_text({"AUTH", request.username, request.password});
    exchange(target, text, [this, target](std::string line) {
        Job& job = *target->jobs.front();
        if (!line.empty() && line[0] == '-') {
            job.auth_failed = true;
            if (job.result.target_error.empty()) job.result.target_error = line.substr(1);
            finish(target);
            return;
        }
        send_select(target);
    });
}

void Migrator::send_select(const std::shared_ptr<Target>& target) {
    const std::int64_t db = target->jobs.front()->request.db;
    if (target->last_db == db) {
        send_next_key(target);
        return;
    }
    exchange(target, command_text({"SELECT", std::to_string(db)}),
             [this, target](std::string line) {
                 Job& job = *target->jobs.front();
                 if (!line.empty() && line[0] == '-') {
                     job.select_failed = true;
                     if (job.result.target_error.empty()) job.result.target_error = line.substr(1);
                     finish(target);
                     return;
                 }
                 send_next_key(target);
             });
}

void Migrator::send_next_key(const std::shared_ptr<Target>& target) {
    Job& job = *target->jobs.front();
    std::string text;
    while (job.next_key < job.request.keys) {
        text.clear();
        bool made = false;
        try {
            made = job.request.restore_command(job.next_key, text);
        } catch (const std::exception& e) {
            // The command's own failures are its to report; this thread
            // must not die of one (the key is not sent).
            spdlog::warn("MIGRATE to {}:{}: cannot make a RESTORE: {}", target->host, target->port,
                         e.what());
        }
        if (made) break;
        ++job.next_key;
    }
    if (job.next_key == job.request.keys) {
        finish(target);
        return;
    }
    exchange(target, std::move(text), [this, target](std::string line) {
        Job& current = *target->jobs.front();
        current.reply_read = true;
        if (!line.empty() && line[0] == '-') {
            if (current.result.target_error.empty()) {
                current.result.target_error = line.substr(1);
            }
        } else if (!current.auth_failed && !current.select_failed) {
            current.result.accepted.push_back(current.next_key);
        }
        ++current.next_key;
        send_next_key(target);
    });
}

void Migrator::fail(const std::shared_ptr<Target>& target, MigrateResult::Failure what) {
    Job& job = *target->jobs.front();
    const bool timed_out = target->timed_out;
    const bool was_connected = target->connected;
    close(*target);
    // Redis's retry: once, over a new connection, if the old one failed
    // before any RESTORE was answered and not by timing out (a cached
    // connection the target closed meanwhile).
    if (what != MigrateResult::Failure::connect && was_connected && !timed_out && !job.reply_read &&
        !job.retried) {
        job.retried = true;
        run_next(target);
        return;
    }
    job.result.failure = what;
    finish(target);
}

void Migrator::finish(const std::shared_ptr<Target>& target) {
    std::shared_ptr<Job> job = target->jobs.front();
    target->jobs.pop_front();
    target->timer.cancel();
    target->last_use = std::chrono::steady_clock::now();
    if (target->connected) {
        // A target's error makes the SELECTed database uncertain (Redis).
        target->last_db = job->result.target_error.empty() ? job->request.db : -1;
    }
    // A connection that failed is not kept (the next MIGRATE connects).
    if (!target->connected && target->jobs.empty()) {
        const auto found = targets_.find(target->host + ":" + std::to_string(target->port));
        if (found != targets_.end() && found->second == target) targets_.erase(found);
    }
    job->done(std::move(job->result));
    if (!target->jobs.empty()) run_next(target);
}

void Migrator::sweep() {
    if (stopping_) return;
    const auto now = std::chrono::steady_clock::now();
    for (auto it = targets_.begin(); it != targets_.end();) {
        Target& target = *it->second;
        if (target.jobs.empty() && now - target.last_use > kIdleClose) {
            close(target);
            it = targets_.erase(it);
        } else {
            ++it;
        }
    }
    sweep_timer_.expires_after(std::chrono::seconds(1));
    sweep_timer_.async_wait([this](const error_code& error) {
        if (!error) sweep();
    });
}

}  // namespace bloomery::net
