// The changes EtcdMapBackend commits: each one try, as one etcd transaction
// that compares the revisions of every key it read (etcd_map_backend.hpp).

#include <netdb.h>
#include <sys/socket.h>

#include <set>
#include <utility>
#include <vector>

#include "bloomery/cluster/cluster_membership.hpp"
#include "bloomery/cluster/etcd_map_backend.hpp"
#include "bloomery/cluster/map_codec.hpp"
#include "bloomery/core/ascii.hpp"

namespace bloomery::cluster {
namespace {

const std::string kNotMember =
    "ERR this node is not a member of the cluster yet: CLUSTER MEET one of its nodes first";

// The numeric addresses `host` resolves to (itself when it is one).
std::set<std::string> addresses_of(const std::string& host) {
    std::set<std::string> found;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &list) != 0) return found;
    for (const addrinfo* at = list; at != nullptr; at = at->ai_next) {
        char text[NI_MAXHOST];
        if (getnameinfo(at->ai_addr, at->ai_addrlen, text, sizeof text, nullptr, 0,
                        NI_NUMERICHOST) == 0) {
            found.insert(text);
        }
    }
    freeaddrinfo(list);
    return found;
}

bool same_host(const std::string& a, const std::string& b) {
    if (core::ascii_lower(a) == core::ascii_lower(b)) return true;
    const std::set<std::string> first = addresses_of(a);
    for (const std::string& address : addresses_of(b)) {
        if (first.contains(address)) return true;
    }
    return false;
}

}  // namespace

std::string EtcdMapBackend::registration_key(std::string_view id) const {
    return nodes_prefix_ + std::string(id);
}

core::Result<ClusterMap> EtcdMapBackend::lone_view(std::string_view registration) const {
    if (registration.empty()) return ClusterMap::lone(self_);
    core::Result<ClusterMap> view = decode_map(registration, self_.id);
    if (!view)
        return core::Error{"ERR this node's registration in etcd is not one: " + view.error()};
    if (view->nodes().size() != 1) {
        return core::Error{"ERR this node's registration in etcd names other nodes"};
    }
    return with_self_address(*view, self_.host, self_.port);
}

core::Result<std::vector<EtcdMapBackend::Stored>> EtcdMapBackend::read_keys(
    const std::vector<std::string>& keys) {
    EtcdTxn read;  // no compares: every get at one revision
    for (const std::string& key : keys) read.success.push_back(EtcdOp::get(key));
    core::Result<EtcdTxnResult> result = client_->txn(read);
    if (!result) return store_error(result.error());
    if (result->ranges.size() != keys.size())
        return store_error("a read answered without its keys");
    std::vector<Stored> stored;
    for (const EtcdRange& range : result->ranges) {
        stored.push_back(range.kvs.empty()
                             ? Stored{}
                             : Stored{range.kvs.front().value, range.kvs.front().mod_revision});
    }
    return stored;
}

core::Result<bool> EtcdMapBackend::commit_txn(
    const std::vector<std::pair<std::string, Stored>>& reads, std::vector<EtcdOp> writes) {
    EtcdTxn txn;
    for (const auto& [key, stored] : reads) {
        EtcdCompare unchanged;
        unchanged.key = key;
        // Absent: nobody made it meanwhile; else: nobody changed it.
        unchanged.target = stored.revision == 0 ? EtcdCompare::Target::create_revision
                                                : EtcdCompare::Target::mod_revision;
        unchanged.number = stored.revision;
        txn.compares.push_back(std::move(unchanged));
    }
    txn.success = std::move(writes);
    core::Result<EtcdTxnResult> result = client_->txn(txn);
    if (!result) return store_error(result.error());
    if (!result->succeeded) return false;
    for (const EtcdOp& op : txn.success) {
        const std::string value = op.kind == EtcdOp::Kind::put ? op.value : std::string();
        if (op.key == key_) publish(value, result->revision);
        if (op.key == own_key_) publish_registration(value, result->revision);
    }
    return true;
}

core::Result<bool> EtcdMapBackend::try_edit(const MapEdit& edit) {
    auto read = read_keys({key_, own_key_});
    if (!read) return read.failure();
    const Stored& map = (*read)[0];
    const Stored& own = (*read)[1];
    const bool member = !map.document.empty() && names_node(map.document, self_.id);
    core::Result<ClusterMap> view =
        member ? decode_map(map.document, self_.id) : lone_view(own.document);
    if (!view) return core::Error{"ERR the cluster map in etcd is not one: " + view.error()};
    core::Result<ClusterMap> next = edit(*view);
    if (!next) return next.failure();
    if (!member && next->nodes().size() != 1) return core::Error{kNotMember};
    const std::string& key = member ? key_ : own_key_;
    std::string document = encode_map(*next);
    // Nothing changes (SETSLOT NODE that redis-cli sends to every primary
    // after the first has it): no write, as it was read.
    if (document == (member ? map.document : own.document)) {
        if (member) publish(map.document, map.revision);  // seen here at least as read
        return true;
    }
    return commit_txn({{key_, map}, {own_key_, own}}, {EtcdOp::put(key, std::move(document))});
}

core::Result<bool> EtcdMapBackend::try_enroll() {
    auto read = read_keys({key_, own_key_});
    if (!read) return read.failure();
    const Stored& map = (*read)[0];
    const Stored& own = (*read)[1];
    std::vector<EtcdOp> writes;
    core::Result<ClusterMap> registered = lone_view(own.document);
    if (!registered) return registered.failure();
    const std::string document = encode_map(*registered);
    if (document != own.document) writes.push_back(EtcdOp::put(own_key_, document));
    if (!map.document.empty() && names_node(map.document, self_.id)) {
        core::Result<ClusterMap> view = decode_map(map.document, self_.id);
        if (!view) return core::Error{"the cluster map in etcd is not one: " + view.error()};
        if (view->self().host != self_.host || view->self().port != self_.port) {
            writes.push_back(
                EtcdOp::put(key_, encode_map(with_self_address(*view, self_.host, self_.port))));
        }
    }
    if (writes.empty()) return true;
    return commit_txn({{key_, map}, {own_key_, own}}, std::move(writes));
}

core::Result<bool> EtcdMapBackend::try_leave() {
    auto read = read_keys({key_, own_key_});
    if (!read) return read.failure();
    const Stored& map = (*read)[0];
    const Stored& own = (*read)[1];
    std::vector<EtcdOp> writes;
    if (!map.document.empty() && names_node(map.document, self_.id)) {
        core::Result<ClusterMap> view = decode_map(map.document, self_.id);
        if (!view) return core::Error{"ERR the cluster map in etcd is not one: " + view.error()};
        if (view->nodes().size() == 1) {
            writes.push_back(EtcdOp::erase(key_));
        } else {
            writes.push_back(
                EtcdOp::put(key_, encode_map(without_node(*view, view->self_index()))));
        }
    }
    writes.push_back(EtcdOp::put(own_key_, encode_map(ClusterMap::lone(self_))));
    return commit_txn({{key_, map}, {own_key_, own}}, std::move(writes));
}

// The id of the node registered at host:port: the host as written first,
// then as resolved (a name for an address); empty if none.
core::Result<std::string> EtcdMapBackend::registered_at(const std::string& host,
                                                        std::uint16_t port) {
    core::Result<EtcdRange> registered = client_->get_prefix(nodes_prefix_);
    if (!registered) return store_error(registered.error());
    for (const bool resolve : {false, true}) {
        for (const EtcdKeyValue& kv : registered->kvs) {
            const std::string id = kv.key.substr(nodes_prefix_.size());
            const core::Result<ClusterMap> view = decode_map(kv.value, id);
            if (!view || view->nodes().size() != 1 || view->self().port != port) continue;
            const std::string& at = view->self().host;
            if (resolve ? same_host(at, host) : core::ascii_lower(at) == core::ascii_lower(host)) {
                return id;
            }
        }
    }
    return std::string();
}

core::Result<bool> EtcdMapBackend::try_meet(const std::string& host, std::uint16_t port) {
    core::Result<std::string> other_id = registered_at(host, port);
    if (!other_id) return other_id.failure();
    if (other_id->empty()) {
        return core::Error{"ERR no node of this cluster is registered at " + host + ":" +
                           std::to_string(port) +
                           " (is it started with the same --cluster-etcd and --cluster-name?)"};
    }
    const std::string other_key = registration_key(*other_id);
    auto read = read_keys({key_, own_key_, other_key});
    if (!read) return read.failure();
    const Stored& map = (*read)[0];
    const Stored& own = (*read)[1];
    const Stored& other = (*read)[2];
    core::Result<ClusterMap> mine = lone_view(own.document);
    if (!mine) return mine.failure();
    const bool member = !map.document.empty() && names_node(map.document, self_.id);
    // The map from this node: as stored, or founded by this node, or
    // joined with what this node brings.
    core::Result<ClusterMap> base =
        member ? decode_map(map.document, self_.id) : core::Result<ClusterMap>(*mine);
    if (!base) return core::Error{"ERR the cluster map in etcd is not one: " + base.error()};
    if (!member && !map.document.empty()) {
        const core::Result<ClusterMap> joined = join_map(map.document, self_);
        if (!joined)
            return core::Error{"ERR the cluster map in etcd is not one: " + joined.error()};
        base = admit(*joined, *mine);
        if (!base) return base.failure();
    }
    core::Result<ClusterMap> theirs = decode_map(other.document, *other_id);
    if (!theirs) return core::Error{"ERR the node met has no registration: " + theirs.error()};
    core::Result<ClusterMap> next = *other_id == self_.id ? std::move(base) : admit(*base, *theirs);
    if (!next) return next.failure();
    std::vector<EtcdOp> writes{EtcdOp::put(key_, encode_map(*next))};
    // What each brought is in the map now: their registrations keep only
    // where they are.
    writes.push_back(EtcdOp::put(own_key_, encode_map(ClusterMap::lone(self_))));
    if (*other_id != self_.id) {
        MapNode bare = theirs->self();
        bare.config_epoch = 0;
        writes.push_back(EtcdOp::put(other_key, encode_map(ClusterMap::lone(std::move(bare)))));
    }
    return commit_txn({{key_, map}, {own_key_, own}, {other_key, other}}, std::move(writes));
}

core::Result<bool> EtcdMapBackend::try_take_over(const std::string& primary, bool forced) {
    const std::string alive = alive_prefix_ + primary;
    auto read = read_keys({key_, own_key_, alive});
    if (!read) return read.failure();
    const Stored& map = (*read)[0];
    if (map.document.empty() || !names_node(map.document, self_.id)) return core::Error{kNotMember};
    if (!forced && (*read)[2].revision != 0) {
        return core::Error{"ERR the primary " + primary + " is up"};
    }
    core::Result<ClusterMap> view = decode_map(map.document, self_.id);
    if (!view) return core::Error{"ERR the cluster map in etcd is not one: " + view.error()};
    core::Result<ClusterMap> next = cluster::take_over(*view, primary);
    if (!next) return next.failure();
    std::vector<std::pair<std::string, Stored>> reads{{key_, map}, {own_key_, (*read)[1]}};
    // The primary's liveness key still absent: compared as one that was
    // never made (revision 0).
    if (!forced) reads.emplace_back(alive, Stored{});
    return commit_txn(reads, {EtcdOp::put(key_, encode_map(*next))});
}

}  // namespace bloomery::cluster
