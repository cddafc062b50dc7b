#include "bloomery/cluster/map_codec.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <utility>
#include <vector>

namespace bloomery::cluster {
namespace {

using nlohmann::json;

std::string id_or_empty(const ClusterMap& map, std::uint16_t index) {
    return index == kNoNode ? std::string() : map.node(index).id;
}

// Reading a document: every field checked, the first fault named.
class Reader {
public:
    explicit Reader(const json& document) : document_(document) {}

    core::Result<std::vector<MapNode>> nodes() {
        const json* list = array("nodes");
        if (list == nullptr) return fault();
        if (list->size() > kMaxClusterNodes) return core::Error{"the map names too many nodes"};
        std::vector<MapNode> nodes;
        for (const json& entry : *list) {
            MapNode node;
            if (!entry.is_object() || !text(entry, "id", node.id) || !is_node_id(node.id) ||
                !text(entry, "host", node.host) || node.host.empty() || node.host.size() > 253 ||
                !text(entry, "primary", node.primary_id) ||
                (!node.primary_id.empty() && !is_node_id(node.primary_id))) {
                return core::Error{"a node of the map is malformed"};
            }
            const json& port = entry.value("port", json());
            const json& epoch = entry.value("config_epoch", json());
            if (!port.is_number_unsigned() || port.get<std::uint64_t>() == 0 ||
                port.get<std::uint64_t>() > 65535 || !epoch.is_number_unsigned()) {
                return core::Error{"node " + node.id + " of the map has a bad port or epoch"};
            }
            node.port = static_cast<std::uint16_t>(port.get<std::uint64_t>());
            node.config_epoch = epoch.get<std::uint64_t>();
            node.address = node.host + ":" + std::to_string(node.port);  // as MOVED writes it
            if (!index_.emplace(node.id, nodes.size()).second) {
                return core::Error{"node " + node.id + " is named twice in the map"};
            }
            nodes.push_back(std::move(node));
        }
        return nodes;
    }

    // The node index of `id` ("" -> kNoNode); false if unknown.
    bool node_index(const std::string& id, std::uint16_t& index) const {
        if (id.empty()) {
            index = kNoNode;
            return true;
        }
        const auto found = index_.find(id);
        if (found == index_.end()) return false;
        index = static_cast<std::uint16_t>(found->second);
        return true;
    }

    core::Status slots(ClusterMap& map) {
        const json* list = array("slots");
        if (list == nullptr) return fault();
        for (const json& range : *list) {
            std::uint16_t owner = kNoNode;
            if (!range.is_array() || range.size() != 3 || !range[0].is_number_unsigned() ||
                !range[1].is_number_unsigned() || !range[2].is_string() ||
                range[0].get<std::uint64_t>() > range[1].get<std::uint64_t>() ||
                range[1].get<std::uint64_t>() >= kSlotCount ||
                !node_index(range[2].get<std::string>(), owner) || owner == kNoNode) {
                return core::Error{"a slot range of the map is malformed"};
            }
            for (auto slot = range[0].get<std::uint64_t>(); slot <= range[1].get<std::uint64_t>();
                 ++slot) {
                map.set_owner(static_cast<std::uint16_t>(slot), owner);
            }
        }
        return {};
    }

    core::Status open(ClusterMap& map) {
        const json* list = array("open");
        if (list == nullptr) return fault();
        for (const json& entry : *list) {
            std::string to, importer, from;
            std::uint16_t to_index = kNoNode, importer_index = kNoNode, from_index = kNoNode;
            const json& slot = entry.is_object() ? entry.value("slot", json()) : json();
            if (!slot.is_number_unsigned() || slot.get<std::uint64_t>() >= kSlotCount ||
                !text(entry, "migrating_to", to) || !text(entry, "importer", importer) ||
                !text(entry, "importing_from", from) || !node_index(to, to_index) ||
                !node_index(importer, importer_index) || !node_index(from, from_index)) {
                return core::Error{"an open slot of the map is malformed"};
            }
            const auto number = static_cast<std::uint16_t>(slot.get<std::uint64_t>());
            if (to_index != kNoNode) map.set_migrating(number, to_index);
            if (importer_index != kNoNode) map.set_importing(number, importer_index, from_index);
        }
        return {};
    }

    // Optional: a map written before any FORGET may lack it.
    core::Status forgotten(ClusterMap& map) {
        const auto list = document_.find("forgotten");
        if (list == document_.end()) return {};
        if (!list->is_array() || list->size() > ClusterMap::kForgottenKept) {
            return core::Error{"the map's forgotten list is malformed"};
        }
        for (const json& id : *list) {
            if (!id.is_string() || !is_node_id(id.get<std::string>())) {
                return core::Error{"the map's forgotten list is malformed"};
            }
            map.remember_forgotten(id.get<std::string>());
        }
        return {};
    }

private:
    const json* array(const char* name) {
        const auto found = document_.find(name);
        if (found == document_.end() || !found->is_array()) {
            missing_ = name;
            return nullptr;
        }
        return &*found;
    }
    core::Error fault() const { return core::Error{"the map has no '" + missing_ + "' list"}; }
    static bool text(const json& object, const char* name, std::string& out) {
        const auto found = object.find(name);
        if (found == object.end() || !found->is_string()) return false;
        out = found->get<std::string>();
        return true;
    }

    const json& document_;
    std::map<std::string, std::size_t> index_;
    std::string missing_;
};

}  // namespace

bool is_node_id(std::string_view text) {
    if (text.size() != 40) return false;
    for (const char c : text) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
}

std::string encode_map(const ClusterMap& map) {
    json nodes = json::array();
    for (const MapNode& node : map.nodes()) {
        nodes.push_back({{"id", node.id},
                         {"host", node.host},
                         {"port", node.port},
                         {"primary", node.primary_id},
                         {"config_epoch", node.config_epoch}});
    }
    json slots = json::array();
    for (const SlotRange& range : map.ranges()) {
        slots.push_back({range.first, range.last, map.node(range.primary).id});
    }
    json open = json::array();
    for (const ClusterMap::OpenSlot& slot : map.open_slots()) {
        open.push_back({{"slot", slot.slot},
                        {"migrating_to", id_or_empty(map, slot.migrating_to)},
                        {"importer", id_or_empty(map, slot.importer)},
                        {"importing_from", id_or_empty(map, slot.importing_from)}});
    }
    const json document = {{"current_epoch", map.current_epoch()},
                           {"nodes", std::move(nodes)},
                           {"slots", std::move(slots)},
                           {"open", std::move(open)},
                           {"forgotten", map.forgotten()}};
    return document.dump();
}

namespace {

// The view from `self_id`; `joining`, when set, is added first if the
// document does not name it.
core::Result<ClusterMap> decode(std::string_view text, std::string_view self_id,
                                const MapNode* joining) {
    const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!document.is_object()) return core::Error{"the cluster map is not a JSON object"};
    const json& epoch = document.value("current_epoch", json());
    if (!epoch.is_number_unsigned()) return core::Error{"the map has no current_epoch"};
    Reader reader(document);
    core::Result<std::vector<MapNode>> nodes = reader.nodes();
    if (!nodes) return nodes.failure();
    std::uint16_t self = kNoNode;
    if (!reader.node_index(std::string(self_id), self) || self == kNoNode) {
        if (joining == nullptr) {
            return core::Error{"this node (" + std::string(self_id) +
                               ") is not a member of the cluster"};
        }
        if (nodes->size() >= kMaxClusterNodes) return core::Error{"the map names too many nodes"};
        self = static_cast<std::uint16_t>(nodes->size());
        nodes->push_back(*joining);
    }
    ClusterMap map = ClusterMap::of_nodes(std::move(nodes).value(), self);
    map.set_current_epoch(epoch.get<std::uint64_t>());
    if (core::Status slots = reader.slots(map); !slots) return slots.failure();
    if (core::Status open = reader.open(map); !open) return open.failure();
    if (core::Status forgotten = reader.forgotten(map); !forgotten) return forgotten.failure();
    map.finish();
    return map;
}

}  // namespace

core::Result<ClusterMap> decode_map(std::string_view text, std::string_view self_id) {
    return decode(text, self_id, nullptr);
}

core::Result<ClusterMap> join_map(std::string_view text, const MapNode& self) {
    return decode(text, self.id, &self);
}

bool names_node(std::string_view text, std::string_view id) {
    const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!document.is_object()) return false;
    const auto nodes = document.find("nodes");
    if (nodes == document.end() || !nodes->is_array()) return false;
    for (const json& node : *nodes) {
        if (node.is_object() && node.value("id", json()) == json(std::string(id))) return true;
    }
    return false;
}

}  // namespace bloomery::cluster
