// The validating snapshot parser (format: proto/snapshot.md), shared by
// load_snapshot() and check_snapshot().
//
// Trust nothing: every length is checked against the bytes left in the file
// before anything is allocated for it, every range before it reaches the bloom
// code, and the data is only handed over once the whole-file checksum matched.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <exception>
#include <functional>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bloomery/bloom/age_header.hpp"
#include "bloomery/bloom/bounds.hpp"
#include "bloomery/core/config.hpp"
#include "bloomery/persist/snapshot.hpp"
#include "snapshot_format.hpp"
#include "snapshot_parse.hpp"

namespace bloomery::persist::snapshot_parse {
namespace {

// Thrown inside the parser only, caught at the API boundary: a parse has many
// nested reads, each of which can fail.
struct ParseFailure {
    std::string message;  // without the "PATH: " prefix
};

class FileSource {
public:
    FileSource(int fd, std::uint64_t file_size) : fd_(fd), file_size_(file_size) {
        // No bigger than the file (plus one byte to see the end in one read):
        // small files are checked often (tests, fuzzing) and a zero-filled
        // 1 MiB per open would dominate their cost.
        const std::uint64_t wanted = file_size + 1;
        buffer_.resize(wanted < format::kIoBufferBytes ? static_cast<std::size_t>(wanted)
                                                       : format::kIoBufferBytes);
    }

    std::uint64_t offset() const { return offset_; }
    // Bytes after the current offset, by the size the file had when opened.
    std::uint64_t remaining() const { return offset_ < file_size_ ? file_size_ - offset_ : 0; }

    // Fills `out` with the next `size` bytes, hashing them into both the record
    // and the file checksum. Returns false at end of file; throws on I/O errors.
    bool read(void* out, std::size_t size) {
        auto* dest = static_cast<unsigned char*>(out);
        std::size_t left = size;
        while (left > 0) {
            if (position_ == filled_ && !refill()) return false;
            const std::size_t available = filled_ - position_;
            const std::size_t take = left < available ? left : available;
            std::memcpy(dest, buffer_.data() + position_, take);
            position_ += take;
            dest += take;
            left -= take;
        }
        record_hash_.update(out, size);
        file_hash_.update(out, size);
        offset_ += size;
        return true;
    }

    // True if no byte follows the current offset.
    bool at_end() { return position_ == filled_ && !refill(); }

    void begin_record() { record_hash_.reset(); }
    std::uint64_t record_checksum() const { return record_hash_.digest(); }
    std::uint64_t file_checksum() const { return file_hash_.digest(); }

private:
    bool refill() {
        for (;;) {
            const ssize_t n = ::read(fd_, buffer_.data(), buffer_.size());
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                throw ParseFailure{"read error at offset " + std::to_string(offset_) + ": " +
                                   format::errno_text(errno)};
            }
            position_ = 0;
            filled_ = static_cast<std::size_t>(n);
            return n > 0;
        }
    }

    int fd_;
    std::uint64_t file_size_;
    std::uint64_t offset_ = 0;
    std::vector<unsigned char> buffer_;
    std::size_t position_ = 0;
    std::size_t filled_ = 0;
    format::Xxh64 record_hash_;
    format::Xxh64 file_hash_;
};

class Parser {
public:
    Parser(FileSource& source, const ParseHooks& hooks) : in_(source), hooks_(hooks) {}

    void parse() {
        parse_header();
        std::uint64_t records = 0;
        for (;;) {
            in_.begin_record();
            const std::uint64_t record_offset = in_.offset();
            context_ = Context{};
            const std::uint8_t type = read_u8();
            if (type == format::kRecordEnd) {
                parse_end(records);
                return;
            }
            ++records;
            context_.record = records;
            if (type == format::kRecordCuckoo && version_ >= 3) {
                parse_cuckoo_record(records, record_offset);
                continue;
            }
            if (type == format::kRecordAge && version_ >= 5) {
                parse_age_record(records, record_offset);
                continue;
            }
            if (type != format::kRecordFilter) {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02x", type);
                fail_at(record_offset, std::string("unknown record type ") + hex);
            }
            parse_filter_record(records, record_offset);
        }
    }

private:
    struct Context {
        std::uint64_t record = 0;  // 0: not inside a filter record
        const std::string* key = nullptr;
        bool in_end_record = false;
    };

    [[noreturn]] void fail_at(std::uint64_t offset, const std::string& reason) const {
        std::string where;
        if (context_.record != 0) {
            where = "record " + std::to_string(context_.record);
            if (context_.key) where += " (key " + format::printable_key(*context_.key) + ")";
            where += " at offset ";
        } else if (context_.in_end_record) {
            where = "end of file record at offset ";
        } else {
            where = "header at offset ";
        }
        throw ParseFailure{where + std::to_string(offset) + ": " + reason};
    }

    void read_exact(void* out, std::size_t size) {
        const std::uint64_t at = in_.offset();
        if (!in_.read(out, size)) {
            fail_at(at, "unexpected end of file (truncated)");
        }
    }
    std::uint8_t read_u8() {
        unsigned char b;
        read_exact(&b, 1);
        return b;
    }
    std::uint32_t read_u32() {
        unsigned char b[4];
        read_exact(b, 4);
        return format::get_u32(b);
    }
    std::uint64_t read_u64() {
        unsigned char b[8];
        read_exact(b, 8);
        return format::get_u64(b);
    }
    double read_f64() { return std::bit_cast<double>(read_u64()); }

    void parse_header() {
        unsigned char magic[format::kMagicBytes];
        if (!in_.read(magic, sizeof magic)) {
            throw ParseFailure{"not a bloomery snapshot (shorter than its magic)"};
        }
        if (std::memcmp(magic, kSnapshotMagic, format::kMagicBytes) != 0) {
            throw ParseFailure{"not a bloomery snapshot (bad magic)"};
        }
        FileHeader header;
        header.version = read_u32();
        if (header.version < kOldestSnapshotFormatVersion ||
            header.version > kSnapshotFormatVersion) {
            fail_at(8, "unsupported snapshot format version " + std::to_string(header.version) +
                           " (this build reads versions " +
                           std::to_string(kOldestSnapshotFormatVersion) + " to " +
                           std::to_string(kSnapshotFormatVersion) + ")");
        }
        version_ = header.version;
        header.created_at_ms = static_cast<std::int64_t>(read_u64());
        if (version_ >= 3) {
            header.journal_id = read_u64();
            header.journal_offset = read_u64();
        }
        if (hooks_.on_header) hooks_.on_header(header);
    }

    void parse_end(std::uint64_t records) {
        context_.in_end_record = true;
        const std::uint64_t count_offset = in_.offset();
        const std::uint64_t count = read_u64();
        if (count != records) {
            fail_at(count_offset, "record count " + std::to_string(count) + " does not match the " +
                                      std::to_string(records) + " records read");
        }
        const std::uint64_t computed = in_.file_checksum();
        const std::uint64_t checksum_offset = in_.offset();
        const std::uint64_t stored = read_u64();
        if (stored != computed) fail_at(checksum_offset, "file checksum mismatch");
        if (!in_.at_end()) fail_at(in_.offset(), "trailing garbage after the end of file record");
    }

    // The key, its deadline and (version 3) its filter id.
    void parse_key_fields(Record& record, std::uint64_t record_offset) {
        const std::uint64_t at = in_.offset();
        const std::uint32_t key_length = read_u32();
        if (key_length > in_.remaining()) {
            fail_at(at, "key length " + std::to_string(key_length) + " exceeds the " +
                            std::to_string(in_.remaining()) +
                            " bytes left in the file (truncated or corrupt)");
        }
        record.key.resize(key_length);
        read_exact(record.key.data(), key_length);
        context_.key = &record.key;
        if (!seen_keys_.insert(record.key).second) fail_at(record_offset, "duplicate key");

        record.expire_at_ms = static_cast<std::int64_t>(read_u64());
        if (record.expire_at_ms < 0) {
            fail_at(in_.offset() - 8,
                    "negative expiry " + std::to_string(record.expire_at_ms) + " ms");
        }
        if (version_ >= 3) {
            record.filter_id = read_u64();
            if (record.filter_id > bloom::ScalableFilter::kMaxFilterId) {
                fail_at(in_.offset() - 8,
                        "filter id " + std::to_string(record.filter_id) + " is above 2^48 - 1");
            }
        }
    }

    void parse_cuckoo_record(std::uint64_t index, std::uint64_t record_offset) {
        Record record;
        record.index = index;
        record.offset = record_offset;
        parse_key_fields(record, record_offset);
        const std::uint64_t seq = read_u64();
        std::uint64_t at = in_.offset();
        std::string header(cuckoo::kHeaderBytes, '\0');
        read_exact(header.data(), header.size());
        // Allocates no more than the file still holds.
        core::Result<cuckoo::CuckooFilter> filter = cuckoo::CuckooFilter::load_header(
            header, in_.remaining() + cuckoo::kMaxBookkeepingBytes);
        if (!filter) fail_at(at, "Cuckoo filter header refused: " + filter.error());
        std::vector<char> piece;
        std::int64_t end = 1;
        for (std::uint16_t i = 0; i < filter->num_filters(); ++i) {
            std::uint64_t left = filter->filter_data(i).size();
            while (left > 0) {
                const std::uint64_t take = std::min<std::uint64_t>(left, format::kIoBufferBytes);
                piece.resize(take);
                read_exact(piece.data(), take);
                end += static_cast<std::int64_t>(take);
                filter->load_chunk(end, std::string_view(piece.data(), take));
                left -= take;
            }
        }
        const std::uint64_t computed = in_.record_checksum();
        at = in_.offset();
        if (read_u64() != computed) fail_at(at, "record checksum mismatch");
        record.bytes = in_.offset() - record_offset;
        record.cuckoo = cuckoo::CuckooObject::make(std::move(*filter), seq);
        context_.key = nullptr;  // `record` is about to move
        if (hooks_.on_record) hooks_.on_record(std::move(record));
    }

    // An expiring filter: header, counts, words as runs (proto/snapshot.md).
    void parse_age_record(std::uint64_t index, std::uint64_t record_offset) {
        Record record;
        record.index = index;
        record.offset = record_offset;
        parse_key_fields(record, record_offset);
        std::uint64_t at = in_.offset();
        std::string bytes(bloom::kAgeHeaderBytes, '\0');
        read_exact(bytes.data(), bytes.size());
        const core::Result<bloom::AgeHeader> header = bloom::decode_age_header(bytes);
        if (!header) fail_at(at, header.error());
        const bloom::AgeGeometry& g = header->geometry;
        runs_layer_bytes_ += g.slices() * (g.slice_bits / 8);
        if (runs_layer_bytes_ > core::memory_available()) {
            fail_at(at, "bit arrays of " + std::to_string(runs_layer_bytes_) +
                            " bytes in all exceed the memory this process may use");
        }
        record.age = bloom::AgeFilter::create(g, header->generation, header->shifted_ms);
        at = in_.offset();
        if (read_u32() != g.slices()) fail_at(at, "generation counts other than one per slice");
        std::vector<std::uint64_t> counts(g.slices());
        for (std::uint64_t& count : counts) count = read_u64();
        record.age->set_counts(counts.data(), counts.size());
        read_runs("", record.age->num_words(), record.age.get());
        const std::uint64_t computed = in_.record_checksum();
        at = in_.offset();
        if (read_u64() != computed) fail_at(at, "record checksum mismatch");
        record.bytes = in_.offset() - record_offset;
        context_.key = nullptr;  // `record` is about to move
        if (hooks_.on_record) hooks_.on_record(std::move(record));
    }

    void parse_filter_record(std::uint64_t index, std::uint64_t record_offset) {
        Record record;
        record.index = index;
        record.offset = record_offset;
        parse_key_fields(record, record_offset);
        parse_options(record);

        std::uint64_t at = in_.offset();
        const std::uint32_t num_layers = read_u32();
        if (num_layers == 0 || num_layers > bloom::kMaxLayers) {
            fail_at(at, "layer count " + std::to_string(num_layers) + " not in [1, " +
                            std::to_string(bloom::kMaxLayers) + "]");
        }
        if (record.options.nonscaling && num_layers != 1) {
            fail_at(at, "nonscaling filter with " + std::to_string(num_layers) + " layers");
        }

        const Build build = hooks_.build ? hooks_.build(record) : Build::description;
        // The filter is built with its first layer and grows layer by layer
        // as their headers are read (each layer's words follow its header).
        bloom::FilterRef filter;
        record.layers.reserve(num_layers);
        for (std::uint32_t i = 0; i < num_layers; ++i) {
            parse_layer(record, i, build, filter);
        }

        const std::uint64_t computed = in_.record_checksum();
        at = in_.offset();
        const std::uint64_t stored = read_u64();
        if (stored != computed) fail_at(at, "record checksum mismatch");

        record.bytes = in_.offset() - record_offset;
        record.filter = std::move(filter);
        context_.key = nullptr;  // `record` is about to move
        if (hooks_.on_record) hooks_.on_record(std::move(record));
    }

    // A filter record's options (error rate through the hash scheme),
    // checked against the bounds of stored filters.
    void parse_options(Record& record) {
        const std::uint64_t options_offset = in_.offset();
        record.options.error_rate = read_f64();
        record.options.capacity = read_u64();
        record.options.expansion = read_u32();
        std::uint64_t at = in_.offset();
        // NONSCALING; from version 4 on also whether a tightening ratio follows.
        const std::uint8_t option_bits = read_u8();
        const std::uint8_t known_bits = version_ >= 4
                                            ? format::kOptionNonscaling | format::kOptionTightening
                                            : format::kOptionNonscaling;
        if ((option_bits & ~known_bits) != 0) {
            fail_at(at, "option bits " + std::to_string(option_bits) + " not understood");
        }
        record.options.nonscaling = (option_bits & format::kOptionNonscaling) != 0;
        if (version_ >= 2) {  // version 1 filters are all classic
            at = in_.offset();
            const std::uint8_t layout = read_u8();
            // The filter's policy may also be automatic; a layer's is not
            // (check_stored_options refuses a policy that is not one).
            if (layout > static_cast<std::uint8_t>(bloom::Layout::automatic_blocks)) {
                fail_at(at, "unknown layout " + std::to_string(layout));
            }
            record.options.layout = static_cast<bloom::Layout>(layout);
        }
        if (version_ >= 4) {  // earlier files hold bloomery's scheme only
            at = in_.offset();
            const std::uint8_t scheme = read_u8();
            if (scheme > static_cast<std::uint8_t>(bloom::HashScheme::redisbloom)) {
                fail_at(at, "unknown hash scheme " + std::to_string(scheme));
            }
            record.options.scheme = static_cast<bloom::HashScheme>(scheme);
            if (record.options.scheme == bloom::HashScheme::redisbloom) {
                record.options.redisbloom_options = read_u32();
            }
        }
        if ((option_bits & format::kOptionTightening) != 0) {
            at = in_.offset();
            record.options.tightening = read_f64();
            // Written only when not the default: one encoding per filter.
            if (record.options.tightening == bloom::kDefaultTightening) {
                fail_at(at, "tightening ratio 0.5 written out though it is the default");
            }
        }
        // The bounds every path shares (bloom/bounds.hpp), in the form for
        // stored filters: what the server could have created loads.
        if (const bloom::BoundsError e = bloom::check_stored_options(record.options);
            e != bloom::BoundsError::none) {
            fail_at(options_offset, "filter options: " + bloom::describe(e) + " (error rate " +
                                        std::to_string(record.options.error_rate) + ", capacity " +
                                        std::to_string(record.options.capacity) + ", expansion " +
                                        std::to_string(record.options.expansion) + ", scheme " +
                                        std::string(bloom::scheme_name(record.options.scheme)) +
                                        ", RedisBloom options " +
                                        std::to_string(record.options.redisbloom_options) +
                                        ", tightening " +
                                        std::to_string(record.options.tightening) + ")");
        }
    }

    void parse_layer(Record& record, std::uint32_t index, Build build, bloom::FilterRef& filter) {
        const std::string which = "layer " + std::to_string(index) + ": ";
        LayerInfo layer{};
        const std::uint64_t layer_offset = in_.offset();
        layer.geometry.capacity = read_u64();
        layer.geometry.error_rate = read_f64();
        const std::uint64_t bits_offset = in_.offset();
        layer.geometry.bits = read_u64();
        layer.geometry.hashes = read_u32();
        if (version_ >= 2) {
            const std::uint64_t layout_offset = in_.offset();
            const std::uint8_t layout = read_u8();
            if (!bloom::layer_layout_fits(record.options.layout, layout)) {
                fail_at(layout_offset, which + "layout " + std::to_string(layout) +
                                           " does not fit the filter's " +
                                           std::string(bloom::layout_name(record.options.layout)));
            }
            layer.geometry.layout = static_cast<bloom::Layout>(layout);
        }
        layer.geometry.scheme = record.options.scheme;
        if (record.options.scheme == bloom::HashScheme::redisbloom) {
            layer.geometry.redisbloom_bpe = read_f64();
            layer.geometry.redisbloom_n2 = read_u8();
        }
        layer.items = read_u64();
        const bloom::LayerGeometry& g = layer.geometry;
        if (const bloom::BoundsError e = bloom::check_layer(g, layer.items);
            e != bloom::BoundsError::none) {
            fail_at(layer_offset,
                    which + bloom::describe(e) + " (capacity " + std::to_string(g.capacity) +
                        ", error rate " + std::to_string(g.error_rate) + ", bits " +
                        std::to_string(g.bits) + ", hashes " + std::to_string(g.hashes) +
                        ", items " + std::to_string(layer.items) +
                        (g.scheme == bloom::HashScheme::redisbloom
                             ? ", bpe " + std::to_string(g.redisbloom_bpe) + ", n2 " +
                                   std::to_string(g.redisbloom_n2)
                             : std::string()) +
                        ")");
        }
        // The check that bounds allocation by the file's own size. Runs
        // (version 5) leave zero words out, so an empty layer of any size
        // is 16 bytes: its layers are bounded, all together, by the memory
        // the process may use instead (a layer's pages are committed only
        // where a run gives words, each checked against the bytes left).
        if (version_ >= 5) {
            runs_layer_bytes_ += g.bits / 8;
            if (runs_layer_bytes_ > core::memory_available()) {
                fail_at(bits_offset, which + "bit arrays of " + std::to_string(runs_layer_bytes_) +
                                         " bytes in all exceed the " +
                                         std::to_string(core::memory_available()) +
                                         " bytes of memory this process may use");
            }
        } else if (g.bits / 8 > in_.remaining()) {
            fail_at(bits_offset, which + "bit array of " + std::to_string(g.bits / 8) +
                                     " bytes exceeds the " + std::to_string(in_.remaining()) +
                                     " bytes left in the file (truncated or corrupt)");
        }

        bloom::BloomLayer* target = nullptr;
        if (build == Build::filter) {
            if (index == 0) {
                filter = bloom::ScalableFilter::create(record.options, std::span(&g, 1));
                target = &filter->layer(0);
            } else {
                target = &filter->append_layer_for_load(g);
            }
            target->set_items(layer.items);
        }
        const std::uint64_t num_words = g.bits / 64;
        if (version_ >= 5) {
            read_runs(which, num_words, target);
        } else {
            read_words(0, num_words, target);
        }
        record.layers.push_back(layer);
    }

    // A layer's runs (version 5): pairs of u64 zeros, u64 count and count
    // words, accounting for exactly `num_words` words. Only the words held
    // are stored (the layer starts zeroed).
    template <class Target>
    void read_runs(const std::string& which, std::uint64_t num_words, Target* target) {
        for (std::uint64_t done = 0; done < num_words;) {
            const std::uint64_t at = in_.offset();
            const std::uint64_t zeros = read_u64();
            const std::uint64_t count = read_u64();
            if (zeros == 0 && count == 0) fail_at(at, which + "a run of no words");
            if (zeros > num_words - done || count > num_words - done - zeros) {
                fail_at(at, which + "runs past the layer's " + std::to_string(num_words) +
                                " words (" + std::to_string(done) + " before, then " +
                                std::to_string(zeros) + " zero and " + std::to_string(count) +
                                " held)");
            }
            if (count * 8 > in_.remaining()) {
                fail_at(at, which + "a run of " + std::to_string(count) + " words exceeds the " +
                                std::to_string(in_.remaining()) +
                                " bytes left in the file (truncated or corrupt)");
            }
            read_words(done + zeros, count, target);
            done += zeros + count;
        }
    }

    // `count` words from the file into `target` (if any) from word `first`,
    // a chunk at a time.
    template <class Target>
    void read_words(std::uint64_t first, std::uint64_t count, Target* target) {
        // Grown on demand (the size was checked against the file), at most
        // one chunk.
        if (words_.size() < format::kWordChunk && words_.size() < count) {
            words_.resize(count < format::kWordChunk ? static_cast<std::size_t>(count)
                                                     : format::kWordChunk);
        }
        for (std::uint64_t done = 0; done < count;) {
            const std::uint64_t left = count - done;
            const std::size_t n =
                left < format::kWordChunk ? static_cast<std::size_t>(left) : format::kWordChunk;
            read_exact(words_.data(), n * sizeof(std::uint64_t));
            if (target) {
                format::words_little_to_host(words_.data(), n);
                target->store_words(first + done, n, words_.data());
            }
            done += n;
        }
    }

    FileSource& in_;
    const ParseHooks& hooks_;
    std::uint32_t version_ = kSnapshotFormatVersion;  // of the file being read
    Context context_;
    std::vector<std::uint64_t> words_;
    std::uint64_t runs_layer_bytes_ = 0;  // of every layer read so far (version 5)
    std::unordered_set<std::string> seen_keys_;
};

}  // namespace

// Opens `path` and runs the parser over it. Fails with the reason prefixed
// by the path on any problem; never throws.
core::Result<std::uint64_t> parse_file(const std::string& path, const ParseHooks& hooks) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return core::Error{path + ": cannot open: " + format::errno_text(errno)};
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};

    struct stat info;
    if (::fstat(fd, &info) != 0) {
        return core::Error{path + ": cannot stat: " + format::errno_text(errno)};
    }
    // The size bounds every allocation, so it has to mean something.
    if (!S_ISREG(info.st_mode)) return core::Error{path + ": not a regular file"};
    const auto file_size = static_cast<std::uint64_t>(info.st_size);
    try {
        FileSource source(fd, file_size);
        Parser parser(source, hooks);
        parser.parse();
        return file_size;
    } catch (const ParseFailure& failure) {
        return core::Error{path + ": " + failure.message};
    } catch (const std::bad_alloc&) {
        return core::Error{path + ": out of memory while loading"};
    } catch (const std::exception& exception) {
        return core::Error{path + ": " + exception.what()};
    }
}

}  // namespace bloomery::persist::snapshot_parse
