// The reply path of a connection: output buffer limits by client class, and
// writes that wait for the journal (its records written, or durable under
// --appendfsync always) before the replies leave.

#include <spdlog/spdlog.h>

#include "bloomery/persist/journal.hpp"
#include "connection.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

core::ClientClass Connection::output_class() const {
    // As Redis's getClientType: a client subscribed to anything is of class
    // pubsub (a replica's feed checks its own limit, ReplicaFeed).
    return client_.subscriptions.count() != 0 ? core::ClientClass::pubsub
                                              : core::ClientClass::normal;
}

bool Connection::output_limit_reached(const core::OutputBufferLimit& limit, std::uint64_t pending) {
    // As Redis's checkClientOutputBufferLimits, but a buffer of exactly the
    // hard limit is still served (the limit is the most bytes held).
    if (limit.hard_bytes != 0 && pending > limit.hard_bytes) return true;
    if (limit.soft_bytes != 0 && pending > limit.soft_bytes) {
        const std::int64_t now = store::now_ms();
        const std::int64_t since =
            client_.output_soft_limit_since_ms.load(std::memory_order_relaxed);
        if (since == 0) {
            client_.output_soft_limit_since_ms.store(now, std::memory_order_relaxed);
            return false;
        }
        return now - since > limit.soft_seconds * 1000;
    }
    client_.output_soft_limit_since_ms.store(0, std::memory_order_relaxed);
    return false;
}

void Connection::close_for_output_limit(std::uint64_t pending, OutputLimitClose when) {
    spdlog::warn(
        "Client {} {} for overcoming of output buffer limits ({} bytes waiting, "
        "client-output-buffer-limit {})",
        describe(), when == OutputLimitClose::now ? "closed" : "scheduled to be closed", pending,
        core::format_output_buffer_limits(env_.settings.client_output_buffer_limits()));
    command::WorkerStats::bump(worker_.stats.output_buffer_limit_disconnections);
    client_.output_soft_limit_since_ms.store(0, std::memory_order_relaxed);
    // The bytes a write in flight is sending stay until it completes (or the
    // close cancels it).
    if (!writing_) out_.clear();
    pushes_.clear();
    if (when == OutputLimitClose::now) {
        close();
    } else {
        closing_ = true;
    }
}

void Connection::enforce_output_limit() {
    const core::OutputBufferLimit limit =
        env_.settings.client_output_buffer_limits().get(output_class());
    const std::uint64_t held = out_.size() + pushes_.size();
    if (output_limit_reached(limit, held)) {
        close_for_output_limit(held, OutputLimitClose::after_write);
    }
}

void Connection::check_output_limit() {
    asio::post(executor_, [self = shared_from_this()] {
        if (self->closed_) return;
        if (self->feed_) {
            self->feed_->check_output_limit();
            return;
        }
        const core::OutputBufferLimit limit =
            self->env_.settings.client_output_buffer_limits().get(self->output_class());
        // While a write is in flight out_ is what the client has not read.
        const std::uint64_t pending = self->out_.size() + self->pushes_.size();
        if (self->output_limit_reached(limit, pending)) {
            self->close_for_output_limit(pending, OutputLimitClose::now);
        }
    });
}

void Connection::write() {
    writing_ = true;
    // appendfsync always: no reply leaves before every journal record that
    // was written when its command ran is durable. That covers a write's
    // own record, and a read (or an add answering 0) that saw bits set by
    // an add whose record is not durable yet (its record was written before
    // its bits, in a buffer position() takes), so no client learns of an
    // item a crash could still take back. Replies of every client wait for
    // the same fdatasync (group commit).
    persist::Journal* journal = env_.journal();
    if (journal != nullptr && journal->policy() == persist::FsyncPolicy::always) {
        // While the journal fails, reads and refused writes are answered
        // (their batch wrote nothing); a batch that wrote still waits, until
        // the disk recovers.
        const bool wait = journal_wrote_ || !journal->failing();
        journal_wrote_ = false;
        const std::uint64_t history = journal->log_id();
        const std::uint64_t target = wait ? journal->position() : 0;
        if (wait && journal->durable() < target) {
            write_when_durable(*journal, history, target);
            return;
        }
    } else if (journal != nullptr && journal->holds_unwritten()) {
        // everysec and no: as Redis writes its AOF before it answers, no
        // reply leaves before the records its batch made, or may have seen
        // (another client's add), are written, so a crash of the process
        // loses nothing a client was told. As Redis writes once per turn of
        // its event loop, the replies of every connection this worker
        // served meanwhile wait for one write, posted behind the
        // completions already queued.
        // (journal_wrote_ is read and cleared there.)
        worker_.awaiting_journal.push_back(shared_from_this());
        WorkerPool::post_journal_turn(worker_);
        return;
    }
    journal_wrote_ = false;
    start_write(asio::buffer(out_));
}

void Connection::end_journal_turn(Worker& worker) {
    worker.journal_turn_posted = false;
    persist::Journal* journal = worker.persistence.journal();
    // While the journal fails (a full disk), what was appended stays in
    // memory until the writer's retry writes it: a batch that wrote records
    // is not answered before then, so no client is told an add is kept
    // that a crash could still take back. The others (reads, and writes
    // the command layer refused with -MISCONF) are answered.
    const bool written = journal == nullptr || journal->write_through();
    const std::uint64_t history = written ? 0 : journal->log_id();
    const std::uint64_t target = written ? 0 : journal->position();
    std::vector<std::shared_ptr<Connection>> waiting;
    waiting.swap(worker.awaiting_journal);
    for (const auto& connection : waiting) {
        const bool wrote = connection->journal_wrote_;
        connection->journal_wrote_ = false;
        if (connection->closed_) continue;
        if (!written && wrote) {
            connection->write_when_durable(*journal, history, target);
        } else {
            connection->start_write(asio::buffer(connection->out_));
        }
    }
    waiting.clear();
    // The vector's capacity is kept for the next turn.
    if (worker.awaiting_journal.empty()) worker.awaiting_journal.swap(waiting);
}

void Connection::write_when_durable(persist::Journal& journal, std::uint64_t history,
                                    std::uint64_t offset) {
    journal.when_durable(history, offset, [self = shared_from_this()] {
        asio::post(self->executor_, [self] {
            if (self->closed_) return;
            self->start_write(asio::buffer(self->out_));
        });
    });
}

void Connection::on_write(const error_code& error, std::size_t bytes) {
    writing_ = false;
    if (error) {
        close();
        return;
    }
    command::WorkerStats::bump(worker_.stats.writes_processed);
    if (feed_) {
        command::WorkerStats::bump(worker_.stats.net_output_bytes, bytes);
        command::WorkerStats::bump(worker_.stats.net_repl_output_bytes, bytes);
        feed_->pump();
        return;
    }
    command::WorkerStats::bump(worker_.stats.net_output_bytes, bytes);
    // Keep the buffer's capacity for the next batch, unless one huge reply
    // (a SCANDUMP chunk) made it large.
    if (out_.capacity() > std::size_t{1024} * 1024) {
        std::string().swap(out_);
    } else {
        out_.clear();
    }
    report_buffers();
    client_.output_soft_limit_since_ms.store(0, std::memory_order_relaxed);
    // Commands may still be buffered (stopped at the high-water mark or behind
    // a deferred reply); advance() runs them, or closes, or reads.
    advance();
}

}  // namespace bloomery::net
