// libFuzzer target: arbitrary bytes as what a primary sends its replica, from
// the answers to the handshake through the snapshot's framing to the stream's
// records (proto/replication.md). net::PrimaryStreamDecoder decodes them and
// this target acts as ReplicaLink does: the snapshot's bytes go to a file that
// is loaded, the stream is applied. Nothing may crash, leak or allocate
// without bound, a failure must name its reason, and the decoder's events must
// come in the protocol's order.
//
// The first byte picks the session (bit 0: the replica sends AUTH first; bit
// 1: its PSYNC asks to resume, over an empty copy), the second how many bytes
// each read delivers (1 to 256), so that lines, marks and records are cut at
// every place. The snapshot goes into an in-memory file (memfd) read back
// through /proc/self/fd.
// Seeds: tests/fuzz/corpus/replica_stream_fuzz (make_replica_corpus.py).

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "bloomery/net/replication.hpp"
#include "bloomery/persist/journal_reader.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "bloomery/store/keyspace.hpp"

namespace {

using bloomery::net::PrimaryStreamDecoder;
using bloomery::persist::StreamApplier;
using Event = PrimaryStreamDecoder::Event;

// A replica with no journal of its own: its keyspace records nowhere.
std::unique_ptr<StreamApplier> make_applier(bloomery::store::Keyspace& keyspace) {
    return std::make_unique<StreamApplier>(keyspace);
}

void check(bool condition) {
    if (!condition) std::abort();
}

// The replica's side of one session.
class Replica {
public:
    Replica(bool auth, bool resume) : auth_(auth) {
        decoder_.start(auth ? PrimaryStreamDecoder::Handshake::auth_first
                            : PrimaryStreamDecoder::Handshake::replconf_first,
                       resume ? PrimaryStreamDecoder::SyncRequest::resume
                              : PrimaryStreamDecoder::SyncRequest::full_copy);
        if (resume) applier_ = make_applier(keyspace_);
    }
    ~Replica() {
        if (snapshot_fd_ >= 0) ::close(snapshot_fd_);
    }

    // False once the session has ended.
    bool receive(std::string_view bytes) {
        decoder_.append(bytes);
        for (;;) {
            const Event event = decoder_.next();
            switch (event) {
                case Event::need_more:
                    return true;
                case Event::auth_ok:
                    check(auth_ && step_ == Step::handshake);
                    step_ = Step::auth_answered;
                    break;
                case Event::replconf_ok:
                    check(step_ == (auth_ ? Step::auth_answered : Step::handshake));
                    step_ = Step::replconf_answered;
                    break;
                case Event::resume:
                    check(step_ == Step::replconf_answered && decoder_.resuming() && applier_);
                    step_ = Step::stream;
                    break;
                case Event::full_sync:
                    check(step_ == Step::replconf_answered && decoder_.replid().size() == 40);
                    check(decoder_.offset() <= static_cast<std::uint64_t>(INT64_MAX));
                    snapshot_fd_ = ::memfd_create("replica_stream_fuzz", MFD_CLOEXEC);
                    check(snapshot_fd_ >= 0);
                    step_ = Step::snapshot;
                    break;
                case Event::snapshot_data: {
                    check(step_ == Step::snapshot && !decoder_.data().empty());
                    const std::string_view data = decoder_.data();
                    check(::write(snapshot_fd_, data.data(), data.size()) ==
                          static_cast<ssize_t>(data.size()));
                    break;
                }
                case Event::snapshot_end:
                    check(step_ == Step::snapshot);
                    if (!load()) return false;
                    step_ = Step::stream;
                    break;
                case Event::stream: {
                    check(step_ == Step::stream && !decoder_.data().empty());
                    const StreamApplier::Applied applied = applier_->apply(decoder_.data());
                    check(applied.consumed <= decoder_.data().size());
                    decoder_.consume(applied.consumed);
                    if (!applied.status) {
                        check(!applied.status.error().empty());
                        return false;
                    }
                    break;
                }
                case Event::failed:
                    check(!decoder_.error().empty());
                    check(decoder_.next() == Event::failed);
                    return false;
            }
        }
    }

private:
    bool load() {
        const std::string path = "/proc/self/fd/" + std::to_string(snapshot_fd_);
        const bloomery::core::Result<bloomery::persist::LoadStats> loaded =
            bloomery::persist::load_snapshot(path, keyspace_);
        if (!loaded) {
            check(!loaded.error().empty());
            return false;
        }
        applier_ = make_applier(keyspace_);
        return true;
    }

    enum class Step { handshake, auth_answered, replconf_answered, snapshot, stream };
    const bool auth_;
    Step step_ = Step::handshake;
    PrimaryStreamDecoder decoder_;
    bloomery::store::Keyspace keyspace_{4};
    std::unique_ptr<StreamApplier> applier_;
    int snapshot_fd_ = -1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const bool auth = (data[0] & 1) != 0;
    const bool resume = (data[0] & 2) != 0;
    const std::size_t read_size = 1 + static_cast<std::size_t>(data[1]);
    const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
    Replica replica(auth, resume);
    for (std::size_t at = 0; at < bytes.size(); at += read_size) {
        if (!replica.receive(bytes.substr(at, read_size))) break;
    }
    return 0;
}
