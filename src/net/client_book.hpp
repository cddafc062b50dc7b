#pragma once
// The clients as the server keeps them: INFO's client counts, CLIENT LIST
// and KILL, maxmemory-clients eviction (client_eviction.cpp), and what the
// cron and a stop do to clients (output buffer limits, --timeout, closing).
// Implements the command layer's ClientDirectory over the connections the
// worker pool tracks.

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "bloomery/command/server.hpp"
#include "bloomery/core/config.hpp"
#include "worker_pool.hpp"

namespace bloomery::net {

class ClientBook final : public command::ClientDirectory {
public:
    ClientBook(const core::Config& config, core::RuntimeSettings& settings, WorkerPool& pool);

    // command::ClientDirectory; any thread.
    std::size_t connected_clients() override { return pool_.client_slots_taken(); }
    std::int64_t blocked_clients() override {
        return blocked_clients_.load(std::memory_order_relaxed);
    }
    std::pair<std::size_t, std::size_t> largest_buffers() override;
    std::string client_list(std::span<const std::int64_t> ids) override;
    bool kill_client(std::int64_t id) override;
    bool kill_client(std::string_view address) override;
    std::uint64_t evicted_clients() override;
    void reset_evicted_clients() override;
    void evict_clients_over_limit() override;

    // A connection starts (+1) or stops (-1) waiting for a deferred reply
    // (WAIT, SAVE). Blocking is rare, so one shared counter costs nothing
    // per command.
    void client_blocked(std::int64_t by) {
        blocked_clients_.fetch_add(by, std::memory_order_relaxed);
    }
    // maxmemory-clients: a connection's memory grew (an allocation of its
    // buffers or arguments, at most once a command). If the clients' buffers
    // together may have reached the limit, closes the clients holding most,
    // largest first, until the others hold less; never replicas or clients
    // with CLIENT NO-EVICT on. Reads a few shared counters and writes none
    // unless it evicts. The connection's thread.
    void client_memory_grew();

    // The cron's look at client-output-buffer-limit (soft limits, and
    // replicas' feeds when there are `replicas`). Main thread.
    void check_output_limits(std::int64_t now_ms, std::size_t replicas);
    // --timeout: closes the clients idle longer. Main thread.
    void close_idle_clients(std::int64_t now_ms);

    // Which connections a stop's walk takes: the clients only, or the
    // replicas' feeds too.
    enum class Reach { clients_only, clients_and_replicas };
    // Asks each connection within `reach` to close (after the replies it is
    // writing). Any thread.
    void close_connections(Reach reach);
    // Whether a connection within `reach` is still open. Any thread.
    bool any_connection(Reach reach);

private:
    // Asks every connection whose client matches to close; true if any did.
    template <class Match>
    bool close_clients_where(Match&& match);
    // The walk of client_memory_grew() and evict_clients_over_limit(), once
    // the counters say the clients may hold `held` >= `limit` bytes: by this
    // thread, or by the one walking already, which walks again for it.
    void evict_clients(std::uint64_t limit, std::uint64_t held);
    // One walk: closes the largest clients while all hold >= `limit`.
    void evict_largest_clients(std::uint64_t limit, std::uint64_t held);

    const core::Config& config_;
    core::RuntimeSettings& settings_;  // output limits, maxmemory-clients (CONFIG SET)
    WorkerPool& pool_;
    std::atomic<std::int64_t> blocked_clients_{0};  // blocked_clients()
    // maxmemory-clients: a walk is under way (one at a time); growth was
    // seen during one (it walks again); the counted bytes below which growth
    // needs no walk after one found nothing to close (see evict_clients);
    // clients closed, and the count at the last CONFIG RESETSTAT.
    std::atomic<bool> evicting_{false};
    std::atomic<bool> eviction_wanted_{false};
    std::atomic<std::uint64_t> eviction_recheck_at_{0};
    std::atomic<std::uint64_t> evicted_clients_{0};
    std::atomic<std::uint64_t> evicted_clients_base_{0};
};

}  // namespace bloomery::net
