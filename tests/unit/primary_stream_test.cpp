// What a replica accepts from its primary (net::PrimaryStreamDecoder, no
// sockets): a well-formed session decodes event by event in any split, and
// every malformed answer fails the session with a reason instead of
// aborting or crashing the replica.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bloomery/net/replication.hpp"

namespace bloomery::net {
namespace {

using Event = PrimaryStreamDecoder::Event;
using Handshake = PrimaryStreamDecoder::Handshake;
using SyncRequest = PrimaryStreamDecoder::SyncRequest;

const std::string kReplid = std::string(40, 'a');
const std::string kMark = std::string(40, 'b');

// Feeds `input` `piece` bytes at a time and collects every event but
// need_more, with the snapshot and stream bytes handed out.
struct Decoded {
    std::vector<Event> events;
    std::string snapshot;
    std::string stream;
    std::string error;
    std::string replid;
    std::uint64_t offset = 0;
};

Decoded decode(Handshake handshake, SyncRequest request, const std::string& input,
               std::size_t piece) {
    PrimaryStreamDecoder decoder;
    decoder.start(handshake, request);
    Decoded out;
    for (std::size_t at = 0; at <= input.size(); at += piece) {
        if (at < input.size()) decoder.append(std::string_view(input).substr(at, piece));
        for (;;) {
            const Event event = decoder.next();
            if (event == Event::need_more) break;
            out.events.push_back(event);
            if (event == Event::snapshot_data) out.snapshot += decoder.data();
            if (event == Event::stream) {
                out.stream += decoder.data();
                decoder.consume(decoder.data().size());
            }
            if (event == Event::full_sync || event == Event::resume) {
                out.replid = decoder.replid();
                out.offset = decoder.offset();
            }
            if (event == Event::failed) {
                out.error = decoder.error();
                return out;
            }
            if (event == Event::stream) break;  // wait for more, as the link does
        }
    }
    return out;
}

TEST(PrimaryStream, AFullCopyDecodesInAnySplit) {
    const std::string snapshot = "SNAPSHOT-BYTES\r\n$EOF: inside";
    const std::string input = "+OK\r\n+OK\r\n+FULLRESYNC " + kReplid + " 1234\r\n$EOF:" + kMark +
                              "\r\n" + snapshot + kMark + "records";
    for (const std::size_t piece : {std::size_t{1}, std::size_t{3}, std::size_t{4096}}) {
        SCOPED_TRACE("pieces of " + std::to_string(piece));
        const Decoded d = decode(Handshake::auth_first, SyncRequest::full_copy, input, piece);
        ASSERT_TRUE(d.error.empty()) << d.error;
        ASSERT_GE(d.events.size(), 5u);
        EXPECT_EQ(d.events[0], Event::auth_ok);
        EXPECT_EQ(d.events[1], Event::replconf_ok);
        EXPECT_EQ(d.events[2], Event::full_sync);
        EXPECT_EQ(d.replid, kReplid);
        EXPECT_EQ(d.offset, 1234u);
        EXPECT_EQ(d.snapshot, snapshot);
        EXPECT_EQ(d.stream, "records");
    }
}

TEST(PrimaryStream, AResumedStreamFollowsContinue) {
    const Decoded d = decode(Handshake::replconf_first, SyncRequest::resume,
                             "+OK\r\n+CONTINUE " + kReplid + "\r\nabc", 2);
    ASSERT_TRUE(d.error.empty()) << d.error;
    EXPECT_EQ(d.events[0], Event::replconf_ok);
    EXPECT_EQ(d.events[1], Event::resume);
    EXPECT_EQ(d.stream, "abc");
}

TEST(PrimaryStream, AContinueNamingAnOffsetMovesTheReplicaThere) {
    // A primary promoted from the history the replica asked to resume
    // continues it in its own stream, at another offset.
    PrimaryStreamDecoder decoder;
    decoder.start(Handshake::replconf_first, SyncRequest::resume);
    decoder.append("+OK\r\n+CONTINUE " + kReplid + " 987654\r\nabc");
    EXPECT_EQ(decoder.next(), Event::replconf_ok);
    EXPECT_EQ(decoder.next(), Event::resume);
    EXPECT_EQ(decoder.replid(), kReplid);
    ASSERT_TRUE(decoder.resume_offset().has_value());
    EXPECT_EQ(*decoder.resume_offset(), 987654u);
    // Without an offset the stream continues where the replica asked.
    decoder.start(Handshake::replconf_first, SyncRequest::resume);
    decoder.append("+OK\r\n+CONTINUE " + kReplid + "\r\n");
    EXPECT_EQ(decoder.next(), Event::replconf_ok);
    EXPECT_EQ(decoder.next(), Event::resume);
    EXPECT_FALSE(decoder.resume_offset().has_value());
}

TEST(PrimaryStream, MalformedAnswersFailTheSessionWithAReason) {
    const std::string ok = "+OK\r\n";
    const std::vector<std::pair<std::string, SyncRequest>> bad = {
        // An offset past 2^63 - 1, and one that is not a number.
        {ok + "+FULLRESYNC " + kReplid + " 99999999999999999999\r\n", SyncRequest::full_copy},
        {ok + "+FULLRESYNC " + kReplid + " 12x\r\n", SyncRequest::full_copy},
        {ok + "+FULLRESYNC " + kReplid + " -1\r\n", SyncRequest::full_copy},
        // A replication id that is not 40 hex digits.
        {ok + "+FULLRESYNC shortid 5\r\n", SyncRequest::full_copy},
        // +CONTINUE to a PSYNC that asked for a full copy.
        {ok + "+CONTINUE " + kReplid + "\r\n", SyncRequest::full_copy},
        // +CONTINUE with an offset that is not one.
        {ok + "+CONTINUE " + kReplid + " 12x\r\n", SyncRequest::resume},
        {ok + "+CONTINUE " + kReplid + " \r\n", SyncRequest::resume},
        {ok + "+CONTINUE " + kReplid + " 99999999999999999999\r\n", SyncRequest::resume},
        // An error, or anything else, where +OK was due.
        {"-ERR nope\r\n", SyncRequest::full_copy},
        // A snapshot header that is neither $EOF:<40> nor $<length>.
        {ok + "+FULLRESYNC " + kReplid + " 5\r\n$EOF:short\r\n", SyncRequest::full_copy},
        {ok + "+FULLRESYNC " + kReplid + " 5\r\n*3\r\n", SyncRequest::full_copy},
        // A line longer than any answer.
        {std::string(PrimaryStreamDecoder::kMaxLineBytes + 10, 'x'), SyncRequest::full_copy},
    };
    for (const auto& [input, request] : bad) {
        SCOPED_TRACE(input.substr(0, 80));
        const Decoded d = decode(Handshake::replconf_first, request, input, 7);
        ASSERT_FALSE(d.events.empty());
        EXPECT_EQ(d.events.back(), Event::failed);
        EXPECT_FALSE(d.error.empty());
        EXPECT_LE(d.error.size(), 1024u);  // reported in INFO: bounded
    }
}

}  // namespace
}  // namespace bloomery::net
