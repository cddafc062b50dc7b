// maxmemory-clients, as Redis 7's client eviction: when the clients together
// hold at least the limit (query buffers, arguments, replies, transactions,
// subscriptions), the ones holding most are closed, largest first, until the
// rest hold less. Replicas' feeds are never closed for it, nor clients that
// said CLIENT NO-EVICT on; a replica's link to its primary is no client here.
//
// Cost: a connection publishes what it holds where it already reports its
// buffers to used_memory, and only when that changed (its own state, no
// shared line written). When it grew (an allocation, at most once a command
// and usually once a burst), the server reads the process-wide counters of
// client buffers (relaxed loads) and walks the clients only when those reach
// the limit. Redis sorts its clients into memory buckets so that its single
// thread finds the largest at once; here a walk collects them, once the
// counters say the limit may be reached, and at most one thread walks at a
// time.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "bloomery/core/memory.hpp"
#include "client_book.hpp"
#include "connection.hpp"

namespace bloomery::net {

namespace asio = boost::asio;

namespace {

// What every client's buffers hold together, by the process-wide counters:
// at least what the walk sums (they also count the query buffers of
// replicas' feeds and a replica's link to its primary).
std::uint64_t client_buffers_counted() {
    return core::memory_used(core::MemoryUse::query_buffers) +
           core::memory_used(core::MemoryUse::output_buffers);
}

// After a walk that found the clients under the limit while the counters
// said otherwise (what the counters hold beside them: a replica's link to
// its primary, replicas' input buffers), growth walks again only once the
// counters grew this fraction of the limit more, so that walks stay rare
// (each visits every client: 10,000 at --maxclients' default) while the
// clients can pass the limit unseen by at most that much until the next
// cron tick (100 ms) walks anyway.
constexpr std::uint64_t kRecheckFraction = 16;

}  // namespace

void Connection::publish_memory() {
    const std::uint64_t bytes = query_charge_.bytes() + arguments_charge_.bytes() +
                                output_charge_.bytes() + client_.transaction.charge.bytes() +
                                client_.subscriptions.charge.bytes();
    const std::uint64_t published = client_.memory_bytes.load(std::memory_order_relaxed);
    if (bytes == published) return;
    client_.memory_bytes.store(bytes, std::memory_order_relaxed);
    if (bytes > published) env_.clients.client_memory_grew();
}

void Connection::evict() {
    client_.evicted.store(true, std::memory_order_relaxed);
    // Closed even while a write is in flight (a client that does not read
    // would keep its replies): what it holds goes with the connection.
    asio::post(executor_, [self = shared_from_this()] { self->close(); });
}

void ClientBook::client_memory_grew() {
    const std::uint64_t limit = settings_.maxmemory_clients().bytes(config_.maxmemory);
    if (limit == 0) return;
    const std::uint64_t held = client_buffers_counted();
    if (held < limit || held < eviction_recheck_at_.load(std::memory_order_relaxed)) return;
    evict_clients(limit, held);
}

void ClientBook::evict_clients_over_limit() {
    const std::uint64_t limit = settings_.maxmemory_clients().bytes(config_.maxmemory);
    if (limit == 0) return;
    const std::uint64_t held = client_buffers_counted();
    if (held >= limit) evict_clients(limit, held);
}

void ClientBook::evict_clients(std::uint64_t limit, std::uint64_t held) {
    // One walk at a time. A thread that finds one under way leaves it the
    // work, and says so first: the walker, once done, walks again if anyone
    // did (that walk may have read this client before it grew), so growth
    // past the limit is never left to the next cron tick (on a slow build,
    // fifty clients sending a million arguments each passed the limit by
    // far more than one request's worth without the second walk).
    eviction_wanted_.store(true, std::memory_order_seq_cst);
    while (!evicting_.exchange(true, std::memory_order_seq_cst)) {
        eviction_wanted_.store(false, std::memory_order_seq_cst);
        evict_largest_clients(limit, held);
        evicting_.store(false, std::memory_order_seq_cst);
        // Growth seen while this walked set the flag before it found the
        // walk under way, so it is seen here.
        if (!eviction_wanted_.load(std::memory_order_seq_cst)) return;
        held = client_buffers_counted();
        if (held < limit) return;
    }
}

void ClientBook::evict_largest_clients(std::uint64_t limit, std::uint64_t held) {
    const std::vector<std::shared_ptr<Connection>> live = pool_.live_connections();
    std::uint64_t total = 0;
    bool closing = false;  // clients chosen before, still counted until they are gone
    std::vector<std::pair<std::uint64_t, Connection*>> candidates;
    for (const auto& connection : live) {
        const command::ClientState& client = connection->client();
        if (client.is_replica.load(std::memory_order_relaxed)) continue;
        if (client.evicted.load(std::memory_order_relaxed)) {
            closing = true;
            continue;
        }
        const std::uint64_t bytes = client.memory_bytes.load(std::memory_order_relaxed);
        total += bytes;
        if (!client.no_evict.load(std::memory_order_relaxed)) {
            candidates.emplace_back(bytes, connection.get());
        }
    }
    if (total >= limit) {
        std::sort(candidates.begin(), candidates.end(),
                  [](const auto& a, const auto& b) { return a.first > b.first; });
        for (const auto& [bytes, connection] : candidates) {
            if (total < limit) break;
            // Redis's words, and the client's line (tot-mem: what it held).
            spdlog::info("Evicting client: {} (maxmemory-clients {} bytes)", connection->describe(),
                         limit);
            connection->evict();
            total -= bytes;
            closing = true;
            evicted_clients_.fetch_add(1, std::memory_order_relaxed);
        }
    }
    // While chosen clients are still being closed, the counters still hold
    // them: the next growth walks again and leaves them out.
    eviction_recheck_at_.store(closing ? 0 : held + limit / kRecheckFraction,
                               std::memory_order_relaxed);
}

std::uint64_t ClientBook::evicted_clients() {
    return evicted_clients_.load(std::memory_order_relaxed) -
           evicted_clients_base_.load(std::memory_order_relaxed);
}

void ClientBook::reset_evicted_clients() {
    evicted_clients_base_.store(evicted_clients_.load(std::memory_order_relaxed),
                                std::memory_order_relaxed);
}

}  // namespace bloomery::net
