#pragma once
// One client connection, owned by one worker thread. Reads into a bounded
// query buffer, parses every complete command in it, runs them in order, and
// sends all their replies with one write. While a write is in flight it does
// not read, which bounds each client's memory (backpressure).
//
// Memory: the query buffer grows only when it is nearly full of bytes actually
// received, geometrically from what it holds, so it never exceeds about twice
// the bytes held plus one read chunk, whatever size a bulk header announces.
// A command's arguments cost one 16-byte view each while it runs (and the
// parser's storage for quoted inline words); the count is bounded by the
// query buffer limit at 16 bytes each (see parser_limits()), and a large
// argv is given back once the commands read have run. Every buffer's
// capacity is reported to core::memory_add (used_memory), and the query and
// reply buffers to the client's state (CLIENT LIST).
//
// Client slot: the connection owns the --maxclients slot the acceptor took
// for it and gives it back when destroyed, however it ended.
//
// TLS: the same class serves both; only the stream differs (see
// make_tls_connection).
//
// Deferred replies: a command may suspend the client (ClientSuspender, see
// command/context.hpp). The connection then runs none of its later commands
// and reads nothing more until the reply arrives, posted to this connection's
// thread; the pending reply's sink keeps the connection alive meanwhile.
//
// Replicas: once PSYNC is answered the connection lends its socket to a
// ReplicaFeed (replica_feed.hpp) as its FeedTransport, and hands it every
// command the replica sends and every completed write (connection_feed.cpp).

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include "bloomery/command/context.hpp"
#include "bloomery/command/pubsub.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/resp/parser.hpp"
#include "bloomery/resp/writer.hpp"
#include "client_slot.hpp"
#include "connection_environment.hpp"
#include "replica_feed.hpp"
#include "worker_pool.hpp"

namespace bloomery::net {

// What every connection does, whatever its stream: buffers, parsing, commands,
// deferred replies, limits, stats, CLIENT LIST and closing. The stream itself
// (plain TCP or TLS over TCP, see make_*_connection) supplies reads, writes
// and closing through the three virtual transport functions; there is one
// virtual call per read or write initiated, none per command.
class Connection : public std::enable_shared_from_this<Connection>,
                   public command::ClientSuspender,
                   public command::Subscriber,
                   private FeedTransport {
public:
    ~Connection() override = default;
    // Registers with the server and starts serving (after the handshake, for
    // TLS). Call once, on the connection's worker thread.
    virtual void start() = 0;
    // Thread-safe: closes the connection from its own worker thread.
    void request_close() override;
    // Thread-safe description for CLIENT LIST.
    std::string describe() const;
    // Thread-safe, for the server's cron: checks the client-output-buffer-
    // limit of the connection's class on its own thread (a replica's feed
    // counts the stream it has still to send) and closes it if it is passed.
    void check_output_limit();
    // Thread-safe, for maxmemory-clients (client_eviction.cpp): marks the
    // client evicted (a command it has not run yet does not run) and closes
    // the connection on its own thread, replies in flight dropped.
    void evict();
    const command::ClientState& client() const { return client_; }

    // ClientSuspender: called by a handler on this connection's thread.
    std::shared_ptr<command::ReplySink> suspend() override;
    // Runs on this connection's thread: the deferred reply has come.
    void on_deferred_reply(command::ReplyWriter write_reply);

    // command::Subscriber: a published message for this client, from any
    // thread; it is written on the connection's own thread, after the
    // replies already buffered (a RESP3 push or, in RESP2, an array).
    void deliver(std::shared_ptr<const std::string> message) override;
    int subscriber_protocol() const override {
        return client_.protocol.load(std::memory_order_relaxed);
    }
    // The posted end of a worker's turn (--appendfsync everysec and no):
    // writes the journal through once, then sends the replies of every
    // connection of `worker` that waited for it. Worker thread.
    static void end_journal_turn(Worker& worker);
    // The worker's executor; fixed at construction, safe from any thread.
    const boost::asio::any_io_executor& executor() const { return executor_; }

protected:
    // Reads the endpoints from `socket`, which the derived class then moves
    // into its stream. `slot` is held until the connection is destroyed.
    Connection(const ConnectionEnvironment& environment, Worker& worker,
               boost::asio::ip::tcp::socket& socket, std::int64_t id, ClientSlot slot);
    // Counts and lists the connection (connected_clients, CLIENT LIST,
    // CLIENT KILL, shutdown).
    void track();
    // Begins the read / run / write loop.
    void serve() { advance(); }
    void on_read(const boost::system::error_code& error, std::size_t bytes);
    void on_write(const boost::system::error_code& error, std::size_t bytes);
    void close() override;
    bool closed() const { return closed_; }

    // The transport. start_read completes into on_read, start_write (all of
    // the buffer) into on_write; close_transport cancels whatever is pending.
    virtual void start_read(boost::asio::mutable_buffer buffer) = 0;
    virtual void start_write(boost::asio::const_buffer buffer) = 0;
    virtual void close_transport() = 0;

    const ConnectionEnvironment& env_;
    Worker& worker_;
    command::ClientState client_;

private:
    // FeedTransport (connection_feed.cpp): what the replica's feed uses of
    // this connection once it is one.
    command::ClientState& replica() override { return client_; }
    std::shared_ptr<void> keep_alive() override { return shared_from_this(); }
    void post(std::function<void()> work) override;
    bool sending() const override { return writing_; }
    void send(boost::asio::const_buffer bytes) override;
    void keep_reading() override;
    void run_command(command::Args argv) override;
    void close_if_over_output_limit(const core::OutputBufferLimit& limit,
                                    std::uint64_t pending) override;
    bool closing() const override { return closing_; }
    void mark_closing() override { closing_ = true; }
    // PSYNC ran and every reply before it is written: the feed takes over.
    void become_feed();
    // The replica's bytes read: each complete command goes to the feed.
    void read_replica_input();

    // Decides the next step when no read or write is in flight: run buffered
    // commands, write replies, close, wait for a deferred reply, or read.
    void advance();
    void read();
    // Runs the complete commands buffered, up to the write high-water mark or
    // a command that defers its reply.
    void process();
    // The command context of this connection: commands that may suspend it
    // (deferred replies) get `suspender`, the slow log `slowlog`.
    command::DispatchContext context(command::ClientSuspender* suspender,
                                     command::Slowlog* slowlog);
    void write();
    // Sends the replies once the journal is durable up to `offset` of
    // history `history` (or once it moved on to another history).
    void write_when_durable(persist::Journal& journal, std::uint64_t history, std::uint64_t offset);
    // Past the normal class's client-output-buffer-limit (hard, or soft for
    // longer than its seconds): drops the replies and closes. Called when no
    // write is in flight.
    void enforce_output_limit();
    // Whether `pending` bytes waiting pass `limit` (the soft limit's clock is
    // kept in client_.output_soft_limit_since_ms, started or stopped here).
    core::ClientClass output_class() const;
    bool output_limit_reached(const core::OutputBufferLimit& limit, std::uint64_t pending);
    // Drops the replies of a client past its output buffer limit (`pending`
    // bytes) and closes it `when` said: now (a client that stopped reading:
    // the write in flight is cancelled), or once the write in flight is
    // done. Logged as Redis logs it, counted in INFO's
    // client_output_buffer_limit_disconnections.
    enum class OutputLimitClose { now, after_write };
    void close_for_output_limit(std::uint64_t pending, OutputLimitClose when);
    void make_room();
    // Moves the unconsumed bytes into a new buffer of `capacity` bytes.
    void reallocate_input(std::size_t capacity);
    // Publishes the buffers' sizes to used_memory and CLIENT LIST.
    void report_buffers();
    // Publishes what the arguments of the last command hold to used_memory
    // (no atomic operation unless it changed).
    void report_arguments();
    // Publishes what the client holds in all (ClientState::memory_bytes)
    // when it changed, and tells the server when it grew (maxmemory-clients;
    // client_eviction.cpp). Called where the buffers' sizes are reported.
    void publish_memory();
    // Gives back argument storage a large command left.
    void shrink_arguments();

    const boost::asio::any_io_executor executor_;
    resp::Parser parser_;
    std::string out_;
    // Published messages that came while a write was in flight; they join
    // out_ when it is written.
    std::string pushes_;
    resp::Writer writer_;
    std::unique_ptr<char[]> in_;  // not zero-filled: only received bytes touch pages
    std::size_t in_capacity_ = 0;
    std::size_t in_start_ = 0;  // first unconsumed byte
    std::size_t in_end_ = 0;    // one past the last byte read
    bool need_more_ = true;     // the last parse asked for more bytes
    bool closing_ = false;
    bool writing_ = false;
    bool closed_ = false;
    bool tracked_ = false;           // listed by the pool (at position_)
    bool blocked_ = false;           // a command waits for its deferred reply
    bool deferred_arrived_ = false;  // ...and it has come (applied by advance())
    command::ReplyWriter deferred_reply_;
    bool journal_wrote_ = false;  // our commands wrote journal records since the last write()
    bool reading_ = false;        // a read is in flight
    std::unique_ptr<ReplicaFeed> feed_;  // set once this is a replica's feed
    std::vector<std::string_view> argv_;
    WorkerPool::Position position_;
    core::MemoryCharge query_charge_{core::MemoryUse::query_buffers};
    core::MemoryCharge output_charge_{core::MemoryUse::output_buffers};
    // argv_ and the parser's storage: bookkeeping of the query.
    core::MemoryCharge arguments_charge_{core::MemoryUse::query_buffers};
    ClientSlot slot_;
};

// A connection over plain TCP.
std::shared_ptr<Connection> make_plain_connection(const ConnectionEnvironment& environment,
                                                  Worker& worker,
                                                  boost::asio::ip::tcp::socket socket,
                                                  std::int64_t id, ClientSlot slot);
// A connection over TLS: start() runs the server handshake on the worker and
// closes the connection if it fails or does not finish within
// --tls-handshake-timeout; only then are commands read.
std::shared_ptr<Connection> make_tls_connection(const ConnectionEnvironment& environment,
                                                Worker& worker, boost::asio::ip::tcp::socket socket,
                                                std::int64_t id,
                                                boost::asio::ssl::context& tls_context,
                                                ClientSlot slot);

}  // namespace bloomery::net
