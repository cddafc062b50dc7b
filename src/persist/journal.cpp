// The journal's facade: what the keyspace, the network layer and the
// manager call, handed to its parts (the appender, the writer and the
// handoff between them), and the fsync policy's names.

#include "bloomery/persist/journal.hpp"

#include <random>

#include "journal_appender.hpp"
#include "journal_cuckoo.hpp"
#include "journal_encode.hpp"
#include "journal_handoff.hpp"
#include "journal_writer.hpp"

namespace bloomery::persist {

std::optional<FsyncPolicy> parse_fsync_policy(std::string_view text) {
    if (text == "always") return FsyncPolicy::always;
    if (text == "everysec") return FsyncPolicy::everysec;
    if (text == "no") return FsyncPolicy::no;
    return std::nullopt;
}

const char* fsync_policy_name(FsyncPolicy policy) {
    switch (policy) {
        case FsyncPolicy::always:
            return "always";
        case FsyncPolicy::everysec:
            return "everysec";
        default:
            return "no";
    }
}

std::uint64_t new_journal_id() {
    std::random_device device;
    std::uint64_t id = 0;
    while (id == 0) id = (std::uint64_t{device()} << 32) ^ device();
    return id;
}

struct Journal::Parts {
    Parts(std::string dir, std::string basename, FsyncPolicy policy, std::uint64_t buffer_limit,
          std::atomic<bool>& failing)
        : handoff(buffer_limit, failing),
          appender(policy, handoff),
          writer(std::move(dir), std::move(basename), policy, handoff, appender, failing) {}
    // Destroyed in reverse: the writer stops before the appender's buffers
    // go.
    JournalHandoff handoff;
    JournalAppender appender;
    JournalWriter writer;
};

Journal::Journal(std::string dir, std::string basename, FsyncPolicy policy,
                 std::uint64_t buffer_limit)
    : policy_(policy),
      parts_(std::make_unique<Parts>(std::move(dir), std::move(basename), policy, buffer_limit,
                                     failing_flag())) {}

Journal::~Journal() {
    close();
}

core::Status Journal::open(std::uint64_t id, std::uint64_t offset, const std::string& existing) {
    return parts_->writer.start(id, offset, existing);
}

void Journal::close() {
    if (!parts_->writer.stop()) return;
    // The threads' buffers and the stream are empty now (the writer wrote
    // them, or could not and said so); their memory goes back.
    parts_->appender.release_buffers();
}

// ---- store::MutationLog: the keyspace's records ----

store::EncodedRecord Journal::encode_created(std::string_view key,
                                             const bloom::ScalableFilter& filter,
                                             std::int64_t expire_at_ms) {
    return journal_encode::created(key, filter, expire_at_ms);
}

store::EncodedRecord Journal::encode_deleted(std::string_view key) {
    return journal_encode::deleted(key);
}

store::EncodedRecord Journal::encode_renamed(std::string_view from, std::string_view to) {
    return journal_encode::renamed(from, to);
}

store::EncodedRecord Journal::encode_expiry(std::string_view key, std::int64_t expire_at_ms) {
    return journal_encode::expiry(key, expire_at_ms);
}

store::EncodedRecord Journal::encode_cleared() {
    return journal_encode::cleared();
}

store::EncodedRecord Journal::encode_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                                           std::string_view data) {
    return journal_encode::chunk(filter, iter, data);
}

store::EncodedRecord Journal::encode_cuckoo_created(std::string_view key,
                                                    const cuckoo::CuckooFilter& filter,
                                                    std::uint64_t id, std::uint64_t seq,
                                                    std::int64_t expire_at_ms) {
    return journal_cuckoo::created(key, filter, id, seq, expire_at_ms);
}

store::EncodedRecord Journal::reserve_cuckoo_change(std::size_t max_moves, std::size_t data_bytes) {
    return journal_cuckoo::reserve(max_moves, data_bytes);
}

void Journal::seal_cuckoo_change(store::RecordBlock& record, std::uint64_t id, std::uint64_t seq,
                                 const store::CuckooChange& change) noexcept {
    journal_cuckoo::seal(record, id, seq, change);
}

// The data path (begin_adds, end_data) forwards with a tail call: an add
// costs the one virtual call it always did.
void Journal::append(store::EncodedRecord record) noexcept {
    parts_->appender.append(std::move(record));
}

bloom::AddRecorder& Journal::begin_adds(const bloom::ScalableFilter& filter,
                                        std::size_t max_items) {
    return parts_->appender.begin_adds(filter, max_items);
}

store::EncodedRecord Journal::encode_age_created(std::string_view key,
                                                 const bloom::AgeFilter& filter,
                                                 std::int64_t expire_at_ms) {
    return journal_encode::age_created(key, filter, expire_at_ms);
}

bloom::AgeRecorder& Journal::begin_age_adds(const bloom::AgeFilter& filter, std::size_t max_items) {
    return parts_->appender.begin_age_adds(filter, max_items);
}

void Journal::begin_age_shift(const bloom::AgeFilter& filter, std::uint64_t generation,
                              std::uint64_t shifted_ms) {
    parts_->appender.begin_age_shift(filter, generation, shifted_ms);
}

store::EncodedRecord Journal::encode_age_words(const bloom::AgeFilter& filter,
                                               std::uint64_t generation, std::uint64_t first,
                                               std::string_view data) {
    return journal_encode::age_words(filter, generation, first, data);
}

void Journal::begin_age_words(const bloom::AgeFilter& filter, std::uint64_t generation,
                              std::uint64_t first, std::string_view data) {
    parts_->appender.begin_age_words(filter, generation, first, data);
}

void Journal::begin_chunk(const bloom::ScalableFilter& filter, std::int64_t iter,
                          std::string_view data) {
    parts_->appender.begin_chunk(filter, iter, data);
}

bloom::AddRecorder& Journal::begin_removes(const bloom::ScalableFilter& filter,
                                           std::size_t max_items) {
    return parts_->appender.begin_removes(filter, max_items);
}

void Journal::end_data() noexcept {
    parts_->appender.end_data();
}

void Journal::publish_thread() noexcept {
    parts_->appender.publish_thread();
}

void Journal::begin_transaction() {
    parts_->appender.begin_transaction();
}

void Journal::end_transaction() noexcept {
    parts_->appender.end_transaction();
}

std::uint64_t Journal::log_id() const {
    return parts_->writer.log_id();
}

std::uint64_t Journal::position() {
    return parts_->appender.position();
}

std::uint64_t Journal::cut(const std::function<void()>& at_cut) {
    return parts_->appender.cut(at_cut);
}

void Journal::ping() {
    parts_->appender.append_keepalive(journal_encode::ping());
}

std::uint64_t Journal::changes_end() const {
    return parts_->appender.changes_end();
}

// ---- Durability ----

std::uint64_t Journal::appended() const {
    return parts_->appender.appended();
}

std::uint64_t Journal::durable() const {
    return parts_->writer.durable();
}

std::uint64_t Journal::written() const {
    return parts_->writer.written();
}

void Journal::when_durable(std::uint64_t id, std::uint64_t offset, std::function<void()> fn) {
    parts_->writer.when_durable(id, offset, std::move(fn));
}

bool Journal::holds_unwritten() const {
    // Pairs with the appender's mark_open() as in position(): an add whose
    // bit the caller saw is open here, or counted in a buffer or in
    // appended().
    std::atomic_thread_fence(std::memory_order_acquire);
    return appended() != written() ||
           parts_->appender.threads_hold(JournalAppender::Count::records_and_open_scopes);
}

bool Journal::write_through() {
    return parts_->writer.write_through();
}

void Journal::set_thread_turn(JournalTurn* turn) {
    JournalAppender::set_thread_turn(turn);
}

std::string Journal::failure() const {
    return parts_->writer.failure();
}

// ---- Segments ----

std::uint64_t Journal::rotate() {
    return parts_->writer.rotate();
}

void Journal::drop_covered(std::uint64_t offset) {
    parts_->writer.drop_covered(offset);
}

std::vector<Journal::SegmentFile> Journal::segment_files() const {
    return parts_->writer.segment_files();
}

void Journal::set_write_listener(std::function<void(std::uint64_t)> listener) {
    parts_->writer.set_write_listener(std::move(listener));
}

persist::JournalInfo Journal::info() const {
    persist::JournalInfo info;
    info.enabled = true;
    info.fsync_policy = fsync_policy_name(policy_);
    parts_->writer.fill_info(info);
    info.buffer_length += parts_->appender.bytes_in_threads();
    info.appended_offset = appended();
    return info;
}

}  // namespace bloomery::persist
