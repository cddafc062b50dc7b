#include "bloomery/store/snapshot_counts.hpp"

#include <algorithm>
#include <new>

#include "bloomery/core/memory.hpp"

namespace bloomery::store {

namespace {
// What a saved entry costs, for used_memory: the vector's words and about
// what a node of the map takes.
constexpr std::uint64_t kSavedEntryBytes = 64;
}  // namespace

std::shared_ptr<SnapshotCounts::Session> SnapshotCounts::begin() {
    std::lock_guard lock(mutex_);
    const std::uint32_t epoch = newest_.load(std::memory_order_relaxed) + 1;
    std::shared_ptr<Session> session(new Session(*this, epoch));
    sessions_.push_back(session.get());
    newest_.store(epoch, std::memory_order_relaxed);
    return session;
}

std::uint16_t SnapshotCounts::current_stamp() const {
    return static_cast<std::uint16_t>(newest_.load(std::memory_order_relaxed));
}

std::vector<std::uint64_t> SnapshotCounts::live_counts(const bloom::ScalableFilter& filter) {
    const std::size_t layers = filter.num_layers();
    std::vector<std::uint64_t> counts(layers);
    for (std::size_t i = 0; i < layers; ++i) counts[i] = filter.layer(i).items();
    return counts;
}

SnapshotCounts::Session::AtCut SnapshotCounts::live_state(const bloom::ScalableFilter& filter) {
    Session::AtCut state{live_counts(filter), {}};
    if (filter.counting()) {
        state.copy = bloom::ScalableFilter::copy_of(filter, state.counts.size());
        if (!state.copy) throw std::bad_alloc();
    }
    return state;
}

SnapshotCounts::Session::AtCut SnapshotCounts::live_state(const bloom::AgeFilter& filter) {
    Session::AtCut state;
    state.generation = filter.generation();
    state.shifted_ms = filter.shifted_ms();
    state.counts.resize(filter.slices());
    for (std::uint64_t i = 0; i < state.counts.size() && i <= state.generation; ++i) {
        state.counts[i] = filter.generation_count(state.generation - i);
    }
    return state;
}

template <class Filter>
void SnapshotCounts::save_locked(const Filter& filter) {
    const auto newest = static_cast<std::uint16_t>(newest_.load(std::memory_order_relaxed));
    const std::uint16_t stamp = filter.count_stamp();
    if (stamp == newest) return;
    // Untouched since `stamp`: its live counts are those of every cut after
    // it. Saved for each session that has not had them yet; then the stamp
    // says every running session has.
    for (Session* session : sessions_) {
        const auto epoch = static_cast<std::uint16_t>(session->epoch_);
        if (!after(epoch, stamp)) continue;
        auto [it, inserted] = session->saved_.try_emplace(&filter, live_state(filter));
        if (inserted) {
            const std::uint64_t bytes = kSavedEntryBytes + it->second.counts.size() * 8;
            session->saved_bytes_ += bytes;
            core::memory_add(core::MemoryUse::other, static_cast<std::int64_t>(bytes));
        }
    }
    filter.set_count_stamp(newest);
}

template <class Filter>
bool SnapshotCounts::before_change(const Filter& filter) noexcept {
    // The scope's thread holds its journal buffer, which every cut takes
    // before it moves newest_: this load and the stamps are ordered with it.
    const auto newest = static_cast<std::uint16_t>(newest_.load(std::memory_order_relaxed));
    if (filter.count_stamp() == newest) return true;
    std::lock_guard lock(mutex_);
    try {
        save_locked(filter);
    } catch (const std::bad_alloc&) {
        // The stamp stays behind: a retry saves what is missing.
        return false;
    }
    return true;
}

bool SnapshotCounts::before_count_change(const bloom::ScalableFilter& filter) noexcept {
    return before_change(filter);
}

bool SnapshotCounts::before_count_change(const bloom::AgeFilter& filter) noexcept {
    return before_change(filter);
}

template <class Filter>
SnapshotCounts::Session::AtCut SnapshotCounts::Session::take(const Filter& filter) {
    std::lock_guard lock(owner_.mutex_);
    owner_.save_locked(filter);
    auto it = saved_.find(&filter);
    if (it == saved_.end()) return live_state(filter);  // not in this snapshot's view
    AtCut state = std::move(it->second);
    const std::uint64_t bytes = kSavedEntryBytes + state.counts.size() * 8;
    saved_bytes_ -= bytes;
    core::memory_add(core::MemoryUse::other, -static_cast<std::int64_t>(bytes));
    saved_.erase(it);
    return state;
}

SnapshotCounts::Session::AtCut SnapshotCounts::Session::at_cut(
    const bloom::ScalableFilter& filter) {
    return take(filter);
}

SnapshotCounts::Session::AtCut SnapshotCounts::Session::at_cut(const bloom::AgeFilter& filter) {
    return take(filter);
}

void SnapshotCounts::Session::end() {
    std::lock_guard lock(owner_.mutex_);
    end_locked();
}

void SnapshotCounts::Session::end_locked() {
    if (ended_) return;
    ended_ = true;
    auto& sessions = owner_.sessions_;
    sessions.erase(std::remove(sessions.begin(), sessions.end(), this), sessions.end());
    core::memory_add(core::MemoryUse::other, -static_cast<std::int64_t>(saved_bytes_));
    saved_bytes_ = 0;
    saved_.clear();
}

template <class Filter>
void SnapshotCounts::Session::settle_one(const Filter& filter) {
    std::lock_guard lock(owner_.mutex_);
    try {
        owner_.save_locked(filter);
    } catch (const std::bad_alloc&) {
        // Left behind; a stamp matters only once ~2^15 cuts behind.
    }
}

void SnapshotCounts::Session::settle(const bloom::ScalableFilter& filter) {
    settle_one(filter);
}

void SnapshotCounts::Session::settle(const bloom::AgeFilter& filter) {
    settle_one(filter);
}

SnapshotCounts::Session::~Session() {
    std::lock_guard lock(owner_.mutex_);
    end_locked();
}

}  // namespace bloomery::store
