#pragma once
// One client connection, owned by one worker thread. Reads into a bounded
// query buffer, parses every complete command in it, runs them in order, and
// sends all their replies with one write. While a write is in flight it does
// not read, which bounds each client's memory (backpressure).
//
// Memory: the query buffer grows only when it is nearly full of bytes actually
// received, geometrically from what it holds, so it never exceeds about twice
// the bytes held plus one read chunk, whatever size a bulk header announces.
// Both buffers' capacities are reported to core::memory_add (used_memory) and
// to the client's state (CLIENT LIST).
//
// Deferred replies: a command may suspend the client (ClientSuspender, see
// command/context.hpp). The connection then runs none of its later commands
// and reads nothing more until the reply arrives, posted to this connection's
// thread; the pending reply's sink keeps the connection alive meanwhile.

#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio.hpp>

#include "bloomery/command/context.hpp"
#include "bloomery/core/memory.hpp"
#include "bloomery/net/server.hpp"
#include "bloomery/resp/parser.hpp"
#include "bloomery/resp/writer.hpp"

namespace bloomery::net {

class Connection : public std::enable_shared_from_this<Connection>,
                   public command::ClientSuspender {
public:
    Connection(Server& server, Server::Worker& worker, boost::asio::ip::tcp::socket socket,
               std::int64_t id);
    void start();
    // Thread-safe: closes the connection from its own worker thread.
    void request_close();
    // Thread-safe description for CLIENT LIST.
    std::string describe() const;
    const command::ClientState& client() const { return client_; }

    // ClientSuspender: called by a handler on this connection's thread.
    std::shared_ptr<command::ReplySink> suspend() override;
    // Runs on this connection's thread: the deferred reply has come.
    void on_deferred_reply(command::ReplyWriter write_reply);
    boost::asio::any_io_executor executor() { return socket_.get_executor(); }

private:
    // Decides the next step when no read or write is in flight: run buffered
    // commands, write replies, close, wait for a deferred reply, or read.
    void advance();
    void read();
    void on_read(const boost::system::error_code& error, std::size_t bytes);
    // Runs every complete command buffered; returns false if the connection
    // must close once the replies are written.
    void process();
    void write();
    void on_write(const boost::system::error_code& error, std::size_t bytes);
    void close();
    void make_room();
    // Moves the unconsumed bytes into a new buffer of `capacity` bytes.
    void reallocate_input(std::size_t capacity);
    // Publishes the buffers' sizes to used_memory and CLIENT LIST.
    void report_buffers();

    Server& server_;
    Server::Worker& worker_;
    boost::asio::ip::tcp::socket socket_;
    command::ClientState client_;
    resp::Parser parser_;
    std::string out_;
    resp::Writer writer_;
    std::unique_ptr<char[]> in_;  // not zero-filled: only received bytes touch pages
    std::size_t in_capacity_ = 0;
    std::size_t in_start_ = 0;  // first unconsumed byte
    std::size_t in_end_ = 0;    // one past the last byte read
    bool need_more_ = true;     // the last parse asked for more bytes
    bool closing_ = false;
    bool writing_ = false;
    bool closed_ = false;
    bool blocked_ = false;           // a command waits for its deferred reply
    bool deferred_arrived_ = false;  // ...and it has come (applied by advance())
    command::ReplyWriter deferred_reply_;
    std::vector<std::string_view> argv_;
    std::list<std::weak_ptr<Connection>>::iterator tracked_;
    core::MemoryCharge query_charge_{core::MemoryUse::query_buffers};
    core::MemoryCharge output_charge_{core::MemoryUse::output_buffers};
};

}  // namespace bloomery::net
