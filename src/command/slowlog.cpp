#include "bloomery/command/slowlog.hpp"

#include <algorithm>

#include "bloomery/command/registry.hpp"
#include "bloomery/core/ascii.hpp"
#include "bloomery/store/keyspace.hpp"

namespace bloomery::command {

namespace {

// Roughly what an entry holds on the heap, for used_memory: the strings'
// bytes plus their and the entry's bookkeeping.
std::size_t entry_bytes(const SlowlogEntry& entry) {
    std::size_t bytes = sizeof(SlowlogEntry) + entry.client_address.size() +
                        entry.client_name.size() + entry.argv.size() * sizeof(std::string);
    for (const std::string& arg : entry.argv) bytes += arg.size();
    return bytes;
}

}  // namespace

void Slowlog::trim() {
    std::lock_guard lock(mutex_);
    trim_locked();
}

std::size_t Slowlog::redact_from(const CommandSpec* spec, Args argv) {
    if (spec == nullptr) return argv.size();
    // AUTH [user] password: everything after the name (Redis redacts both).
    if (spec->name == "auth") return std::min<std::size_t>(1, argv.size());
    // HELLO [protover [AUTH user password] [SETNAME name]]: from AUTH's
    // user on.
    if (spec->name == "hello") {
        for (std::size_t i = 1; i < argv.size(); ++i) {
            if (core::iequals(argv[i], "AUTH")) return i + 1;
        }
    }
    // MIGRATE ... [AUTH password] [AUTH2 username password] ...: from the
    // first one's value on (the keys after it go too).
    if (spec->name == "migrate") {
        for (std::size_t i = 6; i < argv.size(); ++i) {
            if (core::iequals(argv[i], "AUTH") || core::iequals(argv[i], "AUTH2")) return i + 1;
            if (core::iequals(argv[i], "KEYS")) break;
        }
    }
    return argv.size();
}

std::vector<std::string> Slowlog::capture(Args argv, std::size_t redact_from) {
    const std::size_t kept = std::min(argv.size(), kMaxArgs);
    std::vector<std::string> out;
    out.reserve(kept);
    for (std::size_t i = 0; i < kept; ++i) {
        if (kept != argv.size() && i == kept - 1) {
            out.push_back("... (" + std::to_string(argv.size() - kept + 1) + " more arguments)");
        } else if (i >= redact_from) {
            out.emplace_back("(redacted)");
        } else if (argv[i].size() > kMaxArgBytes) {
            std::string arg(argv[i].substr(0, kMaxArgBytes));
            arg += "... (" + std::to_string(argv[i].size() - kMaxArgBytes) + " more bytes)";
            out.push_back(std::move(arg));
        } else {
            out.emplace_back(argv[i]);
        }
    }
    return out;
}

void Slowlog::record(const CommandSpec* spec, Args argv, std::uint64_t nanoseconds,
                     const ClientState& client) {
    // Built before taking the lock: copying arguments is the slow part.
    SlowlogEntry entry;
    entry.unix_time = store::now_ms() / 1000;
    entry.duration_us = static_cast<std::int64_t>(nanoseconds / 1000);
    entry.argv = capture(argv, redact_from(spec, argv));
    entry.client_address = client.address;
    entry.client_name = client.name();
    const std::size_t bytes = entry_bytes(entry);
    std::lock_guard lock(mutex_);
    if (settings_.slowlog_max_len() == 0) {
        ++next_id_;  // Redis counts it, and keeps nothing
        return;
    }
    entry.id = next_id_++;
    entries_.push_front(std::move(entry));
    bytes_ += bytes;
    trim_locked();
}

void Slowlog::trim_locked() {
    const std::size_t limit = settings_.slowlog_max_len();
    while (entries_.size() > limit) {
        bytes_ -= std::min(bytes_, entry_bytes(entries_.back()));
        entries_.pop_back();
    }
    if (entries_.empty()) {
        entries_.shrink_to_fit();
        bytes_ = 0;
    }
    charge_.set(bytes_);
}

std::vector<SlowlogEntry> Slowlog::newest(std::size_t count) const {
    std::lock_guard lock(mutex_);
    const std::size_t n = std::min(count, entries_.size());
    return {entries_.begin(), entries_.begin() + static_cast<long>(n)};
}

std::size_t Slowlog::length() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

void Slowlog::reset() {
    std::lock_guard lock(mutex_);
    entries_.clear();
    trim_locked();
}

}  // namespace bloomery::command
