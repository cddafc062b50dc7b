// The clients as the server keeps them (client_book.hpp); maxmemory-clients
// is in client_eviction.cpp.

#include "client_book.hpp"

#include <algorithm>

#include "connection.hpp"

namespace bloomery::net {

namespace {

bool is_replica(const command::ClientState& client) {
    return client.is_replica.load(std::memory_order_relaxed);
}

}  // namespace

ClientBook::ClientBook(const core::Config& config, core::RuntimeSettings& settings,
                       WorkerPool& pool)
    : config_(config), settings_(settings), pool_(pool) {}

std::pair<std::size_t, std::size_t> ClientBook::largest_buffers() {
    std::pair<std::size_t, std::size_t> largest{0, 0};
    pool_.for_each_connection([&](Connection& connection) {
        const command::ClientState& client = connection.client();
        if (is_replica(client)) return;
        largest.first =
            std::max(largest.first, client.query_buffer_used.load(std::memory_order_relaxed));
        largest.second =
            std::max(largest.second, client.output_buffer_used.load(std::memory_order_relaxed));
    });
    return largest;
}

std::string ClientBook::client_list(std::span<const std::int64_t> ids) {
    std::string out;
    pool_.for_each_connection([&](Connection& connection) {
        if (!ids.empty() &&
            std::find(ids.begin(), ids.end(), connection.client().id) == ids.end()) {
            return;
        }
        out += connection.describe();
        out += '\n';
    });
    return out;
}

template <class Match>
bool ClientBook::close_clients_where(Match&& match) {
    bool found = false;
    pool_.for_each_connection([&](Connection& connection) {
        if (match(connection.client())) {
            connection.request_close();
            found = true;
        }
    });
    return found;
}

bool ClientBook::kill_client(std::int64_t id) {
    return close_clients_where([&](const command::ClientState& c) { return c.id == id; });
}

bool ClientBook::kill_client(std::string_view address) {
    return close_clients_where([&](const command::ClientState& c) { return c.address == address; });
}

void ClientBook::close_connections(Reach reach) {
    close_clients_where([reach](const command::ClientState& client) {
        return reach == Reach::clients_and_replicas || !is_replica(client);
    });
}

bool ClientBook::any_connection(Reach reach) {
    bool found = false;
    pool_.for_each_connection([&](Connection& connection) {
        if (reach == Reach::clients_and_replicas || !is_replica(connection.client())) found = true;
    });
    return found;
}

void ClientBook::check_output_limits(std::int64_t now_ms, std::size_t replicas) {
    // As Redis's clientsCron: a client whose replies stay above the soft
    // limit is closed once its seconds have passed even if nothing more is
    // added (a client that stopped reading). A replica's feed always gets a
    // look: what it has still to send grows with every write, not with what
    // the feed itself does. Nothing is walked when neither can apply.
    const core::OutputBufferLimit normal =
        settings_.client_output_buffer_limits().get(core::ClientClass::normal);
    const core::OutputBufferLimit pubsub =
        settings_.client_output_buffer_limits().get(core::ClientClass::pubsub);
    if (normal.soft_bytes == 0 && pubsub.soft_bytes == 0 && replicas == 0) return;
    pool_.for_each_connection([&](Connection& connection) {
        const command::ClientState& client = connection.client();
        if (is_replica(client)) {
            connection.check_output_limit();
            return;
        }
        const bool subscribed =
            client.subscriptions.channel_count.load(std::memory_order_relaxed) +
                client.subscriptions.pattern_count.load(std::memory_order_relaxed) !=
            0;
        const core::OutputBufferLimit& limit = subscribed ? pubsub : normal;
        if (limit.soft_bytes == 0) return;
        const std::int64_t since =
            client.output_soft_limit_since_ms.load(std::memory_order_relaxed);
        if (since != 0 && now_ms - since > limit.soft_seconds * 1000) {
            connection.check_output_limit();
        }
    });
}

void ClientBook::close_idle_clients(std::int64_t now_ms) {
    if (config_.timeout_seconds <= 0) return;
    const std::int64_t limit = config_.timeout_seconds * 1000;
    pool_.for_each_connection([&](Connection& connection) {
        const command::ClientState& client = connection.client();
        // Like Redis, a client waiting for a deferred reply is not idle, and
        // replicas are never timed out here (--repl-timeout).
        if (client.blocked.load(std::memory_order_relaxed) || is_replica(client)) return;
        const auto last = client.last_interaction_ms.load(std::memory_order_relaxed);
        if (now_ms - last > limit) connection.request_close();
    });
}

}  // namespace bloomery::net
