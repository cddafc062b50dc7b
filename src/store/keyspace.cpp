#include "bloomery/store/keyspace.hpp"

#include <chrono>

namespace bloomery::store {

std::int64_t now_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Keyspace::Keyspace(std::size_t num_shards) : shards_(num_shards == 0 ? 1 : num_shards) {}

std::size_t Keyspace::shard_of(std::string_view key) const {
    // The map inside a shard hashes the key again; a different mix here keeps
    // the shard choice independent of the bucket choice.
    const std::size_t h = std::hash<std::string_view>{}(key);
    const std::uint64_t mixed = (static_cast<std::uint64_t>(h) ^ (h >> 29)) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>((mixed >> 32) % shards_.size());
}

const std::pair<const std::string, Entry>* Keyspace::find_live(
    const Shard& shard, std::shared_lock<std::shared_mutex>& lock, std::string_view key) const {
    auto it = shard.map.find(key);
    if (it == shard.map.end()) return nullptr;
    if (it->second.expired(now_ms())) {
        lock.unlock();
        reap(key);
        return nullptr;
    }
    return &*it;
}

void Keyspace::reap(std::string_view key) const {
    Shard& shard = shards_[shard_of(key)];
    FilterPtr doomed;  // freed after the lock is released
    std::unique_lock lock(shard.mutex);
    auto it = shard.map.find(key);
    if (it == shard.map.end() || !it->second.expired(now_ms())) return;
    doomed = std::move(it->second.filter);
    shard.map.erase(it);
    expired_keys_.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
}

bool Keyspace::store(std::string_view key, FilterPtr filter, std::int64_t expire_at_ms,
                     bool replace_live) {
    Shard& shard = shard_for(key);
    FilterPtr doomed;  // declared before the lock: freed after it is released
    std::unique_lock lock(shard.mutex);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) {
        shard.map.emplace(std::string(key), Entry{std::move(filter), expire_at_ms});
        return true;
    }
    const bool expired = it->second.expired(now_ms());
    if (!expired && !replace_live) return false;
    if (expired) expired_keys_.fetch_add(1, std::memory_order_relaxed);
    doomed = std::move(it->second.filter);
    it->second = Entry{std::move(filter), expire_at_ms};
    return true;
}

bool Keyspace::insert_new(std::string_view key, FilterPtr filter, std::int64_t expire_at_ms) {
    return store(key, std::move(filter), expire_at_ms, false);
}

void Keyspace::put(std::string_view key, FilterPtr filter, std::int64_t expire_at_ms) {
    store(key, std::move(filter), expire_at_ms, true);
}

bool Keyspace::erase(std::string_view key) {
    Shard& shard = shard_for(key);
    FilterPtr doomed;  // freed after the lock is released: a large filter takes a while
    std::unique_lock lock(shard.mutex);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) return false;
    const bool live = !it->second.expired(now_ms());
    doomed = std::move(it->second.filter);
    shard.map.erase(it);
    lock.unlock();
    return live;
}

bool Keyspace::contains(std::string_view key) const {
    const Shard& shard = shard_for(key);
    std::shared_lock lock(shard.mutex);
    return find_live(shard, lock, key) != nullptr;
}

std::optional<KeySnapshot> Keyspace::get(std::string_view key) const {
    const Shard& shard = shard_for(key);
    std::shared_lock lock(shard.mutex);
    const auto* found = find_live(shard, lock, key);
    if (found == nullptr) return std::nullopt;
    return KeySnapshot{found->first, found->second.filter, found->second.expire_at_ms};
}

std::optional<bool> Keyspace::update_expiry(
    std::string_view key, const std::function<std::optional<std::int64_t>(std::int64_t)>& decide) {
    Shard& shard = shard_for(key);
    FilterPtr doomed;  // declared before the lock: freed after it is released
    std::unique_lock lock(shard.mutex);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) return std::nullopt;
    const std::int64_t now = now_ms();
    if (it->second.expired(now)) {
        doomed = std::move(it->second.filter);
        shard.map.erase(it);
        expired_keys_.fetch_add(1, std::memory_order_relaxed);
        return std::nullopt;
    }
    const std::optional<std::int64_t> deadline = decide(it->second.expire_at_ms);
    if (!deadline) return false;
    if (*deadline != 0 && *deadline <= now) {
        doomed = std::move(it->second.filter);
        shard.map.erase(it);
        return true;
    }
    it->second.expire_at_ms = *deadline;
    return true;
}

bool Keyspace::set_expiry(std::string_view key, std::int64_t expire_at_ms) {
    return update_expiry(key, [&](std::int64_t) { return expire_at_ms; }).has_value();
}

std::optional<std::int64_t> Keyspace::expiry(std::string_view key) const {
    const Shard& shard = shard_for(key);
    std::shared_lock lock(shard.mutex);
    const auto* found = find_live(shard, lock, key);
    if (found == nullptr) return std::nullopt;
    return found->second.expire_at_ms;
}

bool Keyspace::rename(std::string_view from, std::string_view to) {
    const std::size_t a = shard_of(from);
    const std::size_t b = shard_of(to);
    FilterPtr doomed;
    // Lock both shards in index order so two opposite renames cannot deadlock.
    std::unique_lock<std::shared_mutex> first(shards_[std::min(a, b)].mutex);
    std::unique_lock<std::shared_mutex> second;
    if (a != b) second = std::unique_lock(shards_[std::max(a, b)].mutex);
    auto& source = shards_[a].map;
    auto it = source.find(from);
    if (it == source.end()) return false;
    if (it->second.expired(now_ms())) {
        doomed = std::move(it->second.filter);
        source.erase(it);
        return false;
    }
    if (from == to) return true;
    Entry moved = std::move(it->second);
    source.erase(it);
    auto& target = shards_[b].map;
    auto existing = target.find(to);
    if (existing != target.end()) {
        doomed = std::move(existing->second.filter);
        existing->second = std::move(moved);
    } else {
        target.emplace(std::string(to), std::move(moved));
    }
    return true;
}

Keyspace::Counts Keyspace::counts() const {
    // Keys past their deadline are already invisible to every lookup, so they
    // must not be counted either, even before the expiry cycle erases them.
    Counts counts;
    const std::int64_t now = now_ms();
    for (const Shard& shard : shards_) {
        std::shared_lock lock(shard.mutex);
        for (const auto& [key, entry] : shard.map) {
            if (entry.expired(now)) continue;
            ++counts.keys;
            if (entry.expire_at_ms != 0) ++counts.with_expiry;
        }
    }
    return counts;
}

void Keyspace::clear() {
    for (Shard& shard : shards_) {
        decltype(shard.map) doomed;
        {
            std::unique_lock lock(shard.mutex);
            doomed.swap(shard.map);
        }
    }
}

std::vector<KeySnapshot> Keyspace::shard_entries(std::size_t index) const {
    std::vector<KeySnapshot> out;
    const Shard& shard = shards_.at(index);
    std::shared_lock lock(shard.mutex);
    out.reserve(shard.map.size());
    const std::int64_t now = now_ms();
    for (const auto& [key, entry] : shard.map) {
        if (!entry.expired(now)) out.push_back(KeySnapshot{key, entry.filter, entry.expire_at_ms});
    }
    return out;
}

std::size_t Keyspace::active_expire_cycle() {
    std::size_t removed = 0;
    for (Shard& shard : shards_) {
        std::vector<FilterPtr> doomed;
        {
            const std::int64_t now = now_ms();
            // Look under the shared lock first: most cycles find nothing to do.
            bool any = false;
            {
                std::shared_lock lock(shard.mutex);
                for (const auto& [key, entry] : shard.map) {
                    if (entry.expired(now)) {
                        any = true;
                        break;
                    }
                }
            }
            if (!any) continue;
            std::unique_lock lock(shard.mutex);
            for (auto it = shard.map.begin(); it != shard.map.end();) {
                if (it->second.expired(now)) {
                    doomed.push_back(std::move(it->second.filter));
                    it = shard.map.erase(it);
                    ++removed;
                    expired_keys_.fetch_add(1, std::memory_order_relaxed);
                } else {
                    ++it;
                }
            }
        }
    }
    return removed;
}

std::uint64_t Keyspace::memory_bytes() const {
    std::uint64_t total = 0;
    for (const Shard& shard : shards_) {
        std::shared_lock lock(shard.mutex);
        for (const auto& [key, entry] : shard.map) {
            total += key.size() + sizeof(Entry) + entry.filter->byte_size();
        }
    }
    return total;
}

}  // namespace bloomery::store
