// The replica's side of the stream: decoding what its primary sends (the
// answers to the handshake, the snapshot, then the records), and the files a
// full synchronization receives into.

#include "bloomery/net/replication.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <limits>
#include <system_error>

#include "bloomery/core/parse_int64.hpp"
#include "bloomery/core/printable.hpp"

namespace bloomery::net {

namespace asio = boost::asio;
using boost::system::error_code;

// ---- What a replica receives ----

std::string sync_file_path(const std::string& dir) {
    return dir + "/replica-sync-" + std::to_string(::getpid()) + ".tmp";
}

std::size_t remove_stale_sync_files(const std::string& dir, const std::string& keep) {
    namespace fs = std::filesystem;
    std::size_t removed = 0;
    std::error_code error;
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
        const std::string name = it->path().filename().string();
        if (!name.starts_with("replica-sync-") || !name.ends_with(".tmp")) continue;
        if (!keep.empty() && name == fs::path(keep).filename().string()) continue;
        std::error_code size_error;
        const std::uintmax_t bytes = it->file_size(size_error);
        std::error_code remove_error;
        if (fs::remove(it->path(), remove_error)) {
            ++removed;
            spdlog::info(
                "replication: removed {} ({} bytes), left by a replica stopped during a full "
                "synchronization",
                it->path().string(), size_error ? 0 : bytes);
        } else if (remove_error) {
            spdlog::warn("replication: cannot remove {}: {}", it->path().string(),
                         remove_error.message());
        }
    }
    return removed;
}

namespace {

// How much of a primary's answer a reason quotes (INFO's
// master_link_last_error and the log): more than an error reply quotes, so
// that a refusal's own words fit.
constexpr std::size_t kQuotedAnswerBytes = 128;

// Replication ids and snapshot marks: 40 lowercase hex digits, as this
// server (and Redis) makes them.
bool is_hex_id(std::string_view text) {
    return text.size() == 40 && std::all_of(text.begin(), text.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

// A stream offset: decimal digits only, at most INT64_MAX (the replica
// sends it back in PSYNC, which the primary reads as a signed integer).
bool parse_offset(std::string_view text, std::uint64_t& offset) {
    return core::parse_digits(text, 19, offset) &&
           offset <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
}

}  // namespace

void PrimaryStreamDecoder::start(Handshake handshake, SyncRequest request) {
    phase_ = handshake == Handshake::auth_first ? Phase::auth : Phase::replconf;
    request_ = request;
    input_.clear();
    handed_ = seen_ = 0;
    data_ = {};
    mark_.clear();
    replid_.clear();
    offset_ = 0;
    resume_offset_.reset();
    error_.clear();
}

void PrimaryStreamDecoder::append(std::string_view bytes) {
    if (phase_ == Phase::failed) return;
    // What the last snapshot_data handed out is gone once more comes.
    input_.erase(0, handed_);
    handed_ = 0;
    data_ = {};
    input_.append(bytes);
}

void PrimaryStreamDecoder::consume(std::size_t bytes) {
    bytes = std::min(bytes, seen_);
    input_.erase(0, bytes);
    seen_ -= bytes;
    data_ = {};
}

PrimaryStreamDecoder::Event PrimaryStreamDecoder::fail(std::string why) {
    phase_ = Phase::failed;
    error_ = std::move(why);
    input_.clear();
    handed_ = seen_ = 0;
    data_ = {};
    return Event::failed;
}

bool PrimaryStreamDecoder::take_line(std::string& line) {
    const auto end = input_.find("\r\n");
    if (end == std::string::npos) {
        if (input_.size() > kMaxLineBytes) {
            fail("the primary sent a line longer than " + std::to_string(kMaxLineBytes) + " bytes");
        }
        return false;
    }
    if (end > kMaxLineBytes) {
        fail("the primary sent a line longer than " + std::to_string(kMaxLineBytes) + " bytes");
        return false;
    }
    line.assign(input_, 0, end);
    input_.erase(0, end + 2);
    return true;
}

PrimaryStreamDecoder::Event PrimaryStreamDecoder::next() {
    input_.erase(0, handed_);
    handed_ = 0;
    data_ = {};
    for (;;) {
        switch (phase_) {
            case Phase::failed:
                return Event::failed;
            case Phase::snapshot:
                return snapshot_bytes();
            case Phase::stream:
                if (input_.size() == seen_) return Event::need_more;
                seen_ = input_.size();
                data_ = input_;
                return Event::stream;
            default: {
                std::string line;
                if (!take_line(line))
                    return phase_ == Phase::failed ? Event::failed : Event::need_more;
                const Event event = on_line(line);
                if (event != Event::need_more) return event;
                // The snapshot's header: its bytes may follow in this read.
            }
        }
    }
}

PrimaryStreamDecoder::Event PrimaryStreamDecoder::on_line(const std::string& line) {
    switch (phase_) {
        case Phase::auth:
            if (line != "+OK") {
                return fail("AUTH refused by the primary: " +
                            core::printable(line, kQuotedAnswerBytes));
            }
            phase_ = Phase::replconf;
            return Event::auth_ok;
        case Phase::replconf:
            if (line != "+OK") {
                return fail("the primary refused REPLCONF: " +
                            core::printable(line, kQuotedAnswerBytes));
            }
            phase_ = Phase::psync;
            return Event::replconf_ok;
        case Phase::psync:
            return on_psync_answer(line);
        case Phase::snapshot_header: {
            constexpr std::string_view kEof = "$EOF:";
            if (line.starts_with('-')) {
                return fail("the primary could not send its snapshot: " +
                            core::printable(line, kQuotedAnswerBytes));
            }
            const std::string_view mark =
                std::string_view(line).substr(line.starts_with(kEof) ? kEof.size() : line.size());
            if (!line.starts_with(kEof) || !is_hex_id(mark)) {
                return fail(
                    "bad snapshot header from the primary (expected $EOF:<40 hex "
                    "digits>): " +
                    core::printable(line, kQuotedAnswerBytes));
            }
            mark_.assign(mark);
            phase_ = Phase::snapshot;
            return Event::need_more;  // next() goes on with the snapshot's bytes
        }
        default:
            return fail("internal: a line in the wrong phase");
    }
}

PrimaryStreamDecoder::Event PrimaryStreamDecoder::on_psync_answer(const std::string& line) {
    constexpr std::string_view kContinue = "+CONTINUE";
    constexpr std::string_view kFull = "+FULLRESYNC ";
    if (line == kContinue || line.starts_with(std::string(kContinue) + " ")) {
        if (!resuming()) {
            return fail("the primary answered +CONTINUE to PSYNC ? -1 (a request for a full copy)");
        }
        // Redis sends its id, which may be new (a promoted replica that kept
        // the history); an answer without one keeps the id asked for. A
        // bloomery primary resuming its second id adds where its stream
        // continues (its offsets are its own journal's).
        resume_offset_.reset();
        if (line.size() > kContinue.size()) {
            const std::string_view rest = std::string_view(line).substr(kContinue.size() + 1);
            const auto space = rest.find(' ');
            const std::string_view id = rest.substr(0, space);
            if (!is_hex_id(id)) {
                return fail("bad replication id in the primary's +CONTINUE: " +
                            core::printable(line, kQuotedAnswerBytes));
            }
            if (space != std::string_view::npos) {
                std::uint64_t from = 0;
                if (!parse_offset(rest.substr(space + 1), from)) {
                    return fail("bad offset in the primary's +CONTINUE (digits, at most 2^63-1): " +
                                core::printable(line, kQuotedAnswerBytes));
                }
                resume_offset_ = from;
            }
            replid_.assign(id);
        }
        phase_ = Phase::stream;
        return Event::resume;
    }
    if (line.starts_with(kFull)) {
        const std::string_view rest = std::string_view(line).substr(kFull.size());
        const auto space = rest.find(' ');
        const std::string_view id = rest.substr(0, space);
        if (space == std::string_view::npos || !is_hex_id(id)) {
            return fail("bad replication id in the primary's +FULLRESYNC: " +
                        core::printable(line, kQuotedAnswerBytes));
        }
        if (!parse_offset(rest.substr(space + 1), offset_)) {
            return fail("bad offset in the primary's +FULLRESYNC (digits, at most 2^63-1): " +
                        core::printable(line, kQuotedAnswerBytes));
        }
        replid_.assign(id);
        phase_ = Phase::snapshot_header;
        return Event::full_sync;
    }
    if (line.starts_with('-'))
        return fail("the primary refused PSYNC: " + core::printable(line, kQuotedAnswerBytes));
    return fail("bad answer to PSYNC from the primary: " +
                core::printable(line, kQuotedAnswerBytes));
}

// The snapshot ends with the mark; a read may hold its end and the stream's
// first records, or a part of the mark: the last mark-1 bytes wait for more.
PrimaryStreamDecoder::Event PrimaryStreamDecoder::snapshot_bytes() {
    const auto at = input_.find(mark_);
    if (at == 0) {
        input_.erase(0, mark_.size());
        phase_ = Phase::stream;
        return Event::snapshot_end;
    }
    const std::size_t hold = mark_.size() - 1;
    const std::size_t safe = at != std::string::npos ? at
                             : input_.size() > hold  ? input_.size() - hold
                                                     : 0;
    if (safe == 0) return Event::need_more;
    handed_ = safe;
    data_ = std::string_view(input_).substr(0, safe);
    return Event::snapshot_data;
}

}  // namespace bloomery::net
