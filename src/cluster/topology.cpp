#include "bloomery/cluster/topology.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "bloomery/core/ascii.hpp"
#include "bloomery/core/parse_int64.hpp"

namespace bloomery::cluster {
namespace {

std::string_view trim(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
        text.remove_prefix(1);
    }
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
        text.remove_suffix(1);
    }
    return text;
}

// Only digits, no sign, no spaces: "0x10" or "+5" in a map is a typo.
std::optional<std::uint32_t> parse_number(std::string_view text) {
    std::uint64_t value = 0;
    if (!core::parse_digits(text, 5, value)) return std::nullopt;
    return static_cast<std::uint32_t>(value);
}

std::string slots_text(std::uint32_t first, std::uint32_t last) {
    return first == last ? std::to_string(first)
                         : std::to_string(first) + "-" + std::to_string(last);
}

struct Endpoint {
    std::string host;  // as written, unbracketed
    std::uint16_t port = 0;
    std::string key() const { return core::ascii_lower(host) + ":" + std::to_string(port); }
    std::string text() const {
        const bool v6 = host.find(':') != std::string::npos;
        return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
    }
};

// host:port or [v6]:port. Host names and addresses: letters, digits, '.',
// '-', '_' (and ':' inside brackets); at most 253 bytes, DNS's limit, which
// also bounds a MOVED reply.
core::Result<Endpoint> parse_endpoint(std::string_view text) {
    // Built piece by piece: GCC 12 reports a false -Wrestrict on
    // "literal" + std::string once inlined (GCC bug 105329).
    std::string quoted = "'";
    quoted += text;
    quoted += '\'';
    std::string_view host, port;
    if (!text.empty() && text.front() == '[') {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
            return core::Error{quoted + " is not [ipv6-address]:port"};
        }
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
    } else {
        const std::size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) return core::Error{quoted + " is not host:port"};
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos) {
            return core::Error{quoted + ": write an IPv6 address in brackets, [addr]:port"};
        }
    }
    if (host.empty() || host.size() > 253) {
        return core::Error{quoted + " needs a host of 1 to 253 characters"};
    }
    for (const char c : host) {
        const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                        c == '_' || c == ':';
        if (!ok) {
            return core::Error{quoted + " has a host with a character other than letters, " +
                               "digits, '.', '-', '_'"};
        }
    }
    const std::optional<std::uint32_t> number = parse_number(port);
    if (!number || *number == 0 || *number > 65535) {
        return core::Error{quoted + " needs a port from 1 to 65535"};
    }
    return Endpoint{std::string(host), static_cast<std::uint16_t>(*number)};
}

struct Entry {
    std::string text;  // as written, for messages
    std::uint32_t first = 0, last = 0;
    std::vector<Endpoint> nodes;  // [0]: primary
};

core::Result<Entry> parse_entry(std::string_view text) {
    Entry entry;
    entry.text = std::string(text);
    const std::string named = "entry '" + entry.text + "'";
    const std::size_t equals = text.find('=');
    if (equals == std::string_view::npos) return core::Error{named + " is not RANGE=host:port"};
    const std::string_view range = trim(text.substr(0, equals));
    const std::size_t dash = range.find('-');
    const std::string_view first_text = trim(range.substr(0, dash));
    const std::optional<std::uint32_t> first = parse_number(first_text);
    const std::optional<std::uint32_t> last =
        dash == std::string_view::npos ? first : parse_number(trim(range.substr(dash + 1)));
    if (!first || !last) {
        return core::Error{named + ": '" + std::string(range) +
                           "' is not a slot or FIRST-LAST range"};
    }
    entry.first = *first;
    entry.last = *last;
    if (entry.first >= kSlotCount || entry.last >= kSlotCount) {
        return core::Error{named + ": slots go from 0 to 16383"};
    }
    if (entry.first > entry.last) {
        return core::Error{named + ": range " + std::string(range) + " is backwards"};
    }
    std::string_view nodes = text.substr(equals + 1);
    std::set<std::string> seen;
    for (;;) {
        const std::size_t bar = nodes.find('|');
        core::Result<Endpoint> endpoint = parse_endpoint(trim(nodes.substr(0, bar)));
        if (!endpoint) return core::Error{named + ": " + endpoint.error()};
        if (!seen.insert(endpoint->key()).second) {
            return core::Error{named + " lists " + endpoint->text() + " twice"};
        }
        entry.nodes.push_back(std::move(endpoint).value());
        if (bar == std::string_view::npos) break;
        nodes.remove_prefix(bar + 1);
    }
    return entry;
}

// What the map says of one node while it is being read.
struct NodeFacts {
    Endpoint endpoint;
    std::size_t first_seen = 0;                // order of first appearance
    std::optional<std::size_t> primary_entry;  // an entry where it is the primary
    std::optional<std::size_t> replica_entry;  // an entry where it is a replica
    std::string primary_of_replica;            // key of its primary, for a replica
    std::vector<std::string> replicas;         // keys, for a primary (from its first entry)
    std::uint32_t lowest_slot = kSlotCount;
};

// The first label of a host name ("bloomery-2" of "bloomery-2.bloomery.ns"),
// then the digits after its last '-'; nothing if it has none.
std::optional<std::size_t> hostname_ordinal(std::string_view hostname) {
    const std::string_view label = hostname.substr(0, hostname.find('.'));
    const std::size_t dash = label.rfind('-');
    if (dash == std::string_view::npos) return std::nullopt;
    const std::string_view digits = label.substr(dash + 1);
    std::uint64_t value = 0;
    if (!core::parse_digits(digits, 6, value)) return std::nullopt;
    return static_cast<std::size_t>(value);
}

}  // namespace

core::Result<NodeAddress> parse_node_address(std::string_view text) {
    core::Result<Endpoint> endpoint = parse_endpoint(text);
    if (!endpoint) return endpoint.failure();
    return NodeAddress{std::move(endpoint->host), endpoint->port};
}

std::string node_id(std::string_view host, std::uint16_t port) {
    const std::string text = core::ascii_lower(host) + ":" + std::to_string(port);
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id;
    for (std::size_t i = 0; i < 20; ++i) {
        id.push_back(kHex[digest[i] >> 4]);
        id.push_back(kHex[digest[i] & 0xf]);
    }
    return id;
}

std::string Topology::describe() const {
    std::string out;
    // Appended piece by piece: GCC 12 reports a false -Wrestrict on
    // "literal" + std::string once inlined (GCC bug 105329).
    const auto append_node = [&out](const Node& node) {
        const bool v6 = node.host.find(':') != std::string::npos;
        if (v6) out += '[';
        out += node.host;
        if (v6) out += ']';
        out += ':';
        out += std::to_string(node.port);
    };
    for (const SlotRange& range : ranges_) {
        if (!out.empty()) out += ',';
        out += slots_text(range.first, range.last);
        out += '=';
        const Node& primary = nodes_[range.primary];
        append_node(primary);
        for (const std::size_t replica : primary.replicas) {
            out += '|';
            append_node(nodes_[replica]);
        }
    }
    return out;
}

namespace {

// The map's entries, in the order written. Empty entries (a trailing comma, a
// line break in a config file) are skipped rather than refused.
core::Result<std::vector<Entry>> read_entries(std::string_view slots_spec) {
    std::vector<Entry> entries;
    std::string_view rest = slots_spec;
    for (;;) {
        const std::size_t comma = rest.find(',');
        if (const std::string_view text = trim(rest.substr(0, comma)); !text.empty()) {
            core::Result<Entry> entry = parse_entry(text);
            if (!entry) return entry.failure();
            entries.push_back(std::move(entry).value());
        }
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    if (entries.empty()) {
        return core::Error{"the map is empty: give RANGE=host:port entries covering slots 0-16383"};
    }
    return entries;
}

// Every slot exactly once: the entry of each slot.
core::Result<std::vector<int>> assign_slots(const std::vector<Entry>& entries) {
    std::vector<int> entry_of_slot(kSlotCount, -1);
    for (std::size_t e = 0; e < entries.size(); ++e) {
        for (std::uint32_t slot = entries[e].first; slot <= entries[e].last; ++slot) {
            if (entry_of_slot[slot] >= 0) {
                return core::Error{"slot " + std::to_string(slot) + " is assigned twice ('" +
                                   entries[static_cast<std::size_t>(entry_of_slot[slot])].text +
                                   "' and '" + entries[e].text + "')"};
            }
            entry_of_slot[slot] = static_cast<int>(e);
        }
    }
    for (std::uint32_t slot = 0; slot < kSlotCount; ++slot) {
        if (entry_of_slot[slot] >= 0) continue;
        std::uint32_t last = slot;
        while (last + 1 < kSlotCount && entry_of_slot[last + 1] < 0) ++last;
        return core::Error{"slots " + slots_text(slot, last) +
                           " are not assigned (every slot 0-16383 needs exactly one entry)"};
    }
    return entry_of_slot;
}

// Roles: a node is a primary or the replica of one primary; a primary's
// replicas are the same in each of its entries.
core::Result<std::map<std::string, NodeFacts>> learn_roles(const std::vector<Entry>& entries) {
    std::map<std::string, NodeFacts> facts;
    std::size_t order = 0;
    auto fact = [&](const Endpoint& endpoint) -> NodeFacts& {
        auto [it, fresh] = facts.try_emplace(endpoint.key());
        if (fresh) {
            it->second.endpoint = endpoint;
            it->second.first_seen = order++;
        }
        return it->second;
    };
    for (std::size_t e = 0; e < entries.size(); ++e) {
        const Entry& entry = entries[e];
        NodeFacts& primary = fact(entry.nodes[0]);
        std::vector<std::string> replicas;
        for (std::size_t r = 1; r < entry.nodes.size(); ++r)
            replicas.push_back(entry.nodes[r].key());
        if (primary.primary_entry) {
            if (primary.replicas != replicas) {
                return core::Error{"primary " + entry.nodes[0].text() +
                                   " has different replicas in '" +
                                   entries[*primary.primary_entry].text + "' and '" + entry.text +
                                   "': list the same replicas in each of its ranges"};
            }
        } else {
            primary.primary_entry = e;
            primary.replicas = replicas;
        }
        primary.lowest_slot = std::min(primary.lowest_slot, entry.first);
        for (std::size_t r = 1; r < entry.nodes.size(); ++r) {
            NodeFacts& replica = fact(entry.nodes[r]);
            if (replica.replica_entry && replica.primary_of_replica != entry.nodes[0].key()) {
                return core::Error{
                    "replica " + entry.nodes[r].text() + " is listed under two primaries ('" +
                    entries[*replica.replica_entry].text + "' and '" + entry.text + "')"};
            }
            replica.replica_entry = e;
            replica.primary_of_replica = entry.nodes[0].key();
        }
    }
    for (const auto& [key, node] : facts) {
        if (node.primary_entry && node.replica_entry) {
            return core::Error{node.endpoint.text() + " is a primary in '" +
                               entries[*node.primary_entry].text + "' and a replica in '" +
                               entries[*node.replica_entry].text + "': a node is one or the other"};
        }
    }
    if (facts.size() > 65535) return core::Error{"more than 65535 nodes"};
    return facts;
}

}  // namespace

// parse_topology's steps that fill the Topology itself.
class TopologyBuilder {
public:
    using Index = std::map<std::string, std::size_t>;  // endpoint key -> index in nodes_

    // The nodes, primaries by their lowest slot, then replicas in the order
    // they first appear; returns where each endpoint went.
    static Index place_nodes(Topology& topology, const std::map<std::string, NodeFacts>& facts) {
        std::vector<const NodeFacts*> ordered;
        ordered.reserve(facts.size());
        for (const auto& [key, node] : facts) ordered.push_back(&node);
        std::sort(ordered.begin(), ordered.end(), [](const NodeFacts* a, const NodeFacts* b) {
            const bool a_primary = a->primary_entry.has_value();
            const bool b_primary = b->primary_entry.has_value();
            if (a_primary != b_primary) return a_primary;
            return a_primary ? a->lowest_slot < b->lowest_slot : a->first_seen < b->first_seen;
        });
        Index index_of;
        for (const NodeFacts* f : ordered) {
            Node node;
            node.host = f->endpoint.host;
            node.port = f->endpoint.port;
            node.address = node.host + ":" + std::to_string(node.port);
            node.id = node_id(node.host, node.port);
            node.primary = f->primary_entry.has_value();
            if (node.primary) {
                ++topology.primary_count_;
                node.config_epoch = topology.primary_count_;
            }
            index_of[f->endpoint.key()] = topology.nodes_.size();
            node.primary_index = topology.nodes_.size();
            topology.nodes_.push_back(std::move(node));
        }
        for (const NodeFacts* f : ordered) {
            Node& node = topology.nodes_[index_of[f->endpoint.key()]];
            if (node.primary) {
                for (const std::string& replica : f->replicas)
                    node.replicas.push_back(index_of[replica]);
            } else {
                node.primary_index = index_of[f->primary_of_replica];
                node.config_epoch = topology.nodes_[node.primary_index].config_epoch;
            }
        }
        return index_of;
    }

    // Each slot's owner, and the ranges of consecutive slots one primary serves.
    static void assign_owners(Topology& topology, const std::vector<Entry>& entries,
                              const std::vector<int>& entry_of_slot, Index& index_of) {
        topology.slot_owner_.resize(kSlotCount);
        for (std::uint32_t slot = 0; slot < kSlotCount; ++slot) {
            const Entry& entry = entries[static_cast<std::size_t>(entry_of_slot[slot])];
            const std::size_t owner = index_of[entry.nodes[0].key()];
            topology.slot_owner_[slot] = static_cast<std::uint16_t>(owner);
            if (!topology.ranges_.empty() && topology.ranges_.back().primary == owner) {
                topology.ranges_.back().last = static_cast<std::uint16_t>(slot);
            } else {
                topology.ranges_.push_back({static_cast<std::uint16_t>(slot),
                                            static_cast<std::uint16_t>(slot),
                                            static_cast<std::uint16_t>(owner)});
            }
        }
    }

    // This node: "host:port" in the map, or "auto" (the ordinal of the host name).
    static core::Status find_self(Topology& topology, std::string_view self_spec,
                                  std::string_view hostname, const Index& index_of) {
        const std::string_view self = trim(self_spec);
        if (self.empty()) {
            return core::Error{
                "--cluster-self is needed: this node's host:port in the map, or auto"};
        }
        if (self == "auto") return find_self_by_ordinal(topology, hostname);
        const core::Result<Endpoint> endpoint = parse_endpoint(self);
        if (!endpoint) return core::Error{"--cluster-self: " + endpoint.error()};
        const auto it = index_of.find(endpoint->key());
        if (it == index_of.end()) {
            std::string known;
            for (const Node& node : topology.nodes_) {
                known += (known.empty() ? "" : ", ") + node.address;
            }
            return core::Error{"--cluster-self " + endpoint->text() +
                               " is not in the map (its nodes: " + known + ")"};
        }
        topology.self_ = it->second;
        return {};
    }

private:
    static core::Status find_self_by_ordinal(Topology& topology, std::string_view hostname) {
        const std::optional<std::size_t> ordinal = hostname_ordinal(hostname);
        if (!ordinal) {
            return core::Error{"--cluster-self auto: the host name '" + std::string(hostname) +
                               "' does not end in -N (a StatefulSet pod such as bloomery-2)"};
        }
        if (*ordinal >= topology.nodes_.size()) {
            return core::Error{"--cluster-self auto: host name '" + std::string(hostname) +
                               "' is ordinal " + std::to_string(*ordinal) + " but the map has " +
                               std::to_string(topology.nodes_.size()) + " nodes (0-" +
                               std::to_string(topology.nodes_.size() - 1) + ")"};
        }
        topology.self_ = *ordinal;
        return {};
    }
};

core::Result<Topology> parse_topology(std::string_view slots_spec, std::string_view self_spec,
                                      std::string_view hostname) {
    const core::Result<std::vector<Entry>> entries = read_entries(slots_spec);
    if (!entries) return entries.failure();
    const core::Result<std::vector<int>> entry_of_slot = assign_slots(*entries);
    if (!entry_of_slot) return entry_of_slot.failure();
    const core::Result<std::map<std::string, NodeFacts>> facts = learn_roles(*entries);
    if (!facts) return facts.failure();
    Topology topology;
    TopologyBuilder::Index index_of = TopologyBuilder::place_nodes(topology, *facts);
    TopologyBuilder::assign_owners(topology, *entries, *entry_of_slot, index_of);
    if (core::Status self = TopologyBuilder::find_self(topology, self_spec, hostname, index_of);
        !self) {
        return self.failure();
    }
    return topology;
}

}  // namespace bloomery::cluster
