// DeferredReply: the command layer's side of a reply given later. Which
// thread delivers and how the connection resumes is the network layer's
// business (ReplySink); here only "exactly once, even if never completed".

#include <atomic>
#include <utility>

#include "bloomery/command/context.hpp"
#include "bloomery/command/errors.hpp"

namespace bloomery::command {

struct DeferredReply::State {
    explicit State(std::shared_ptr<ReplySink> reply_sink) : sink(std::move(reply_sink)) {}
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    // The last copy of the handle is gone: a reply never given would leave the
    // client waiting for good, so it gets an error instead.
    ~State() {
        if (sink && !completed.load(std::memory_order_acquire)) {
            sink->deliver([](resp::Writer& out) { out.error(errors::kNoReply); });
        }
    }

    std::shared_ptr<ReplySink> sink;
    std::atomic<bool> completed{false};
};

DeferredReply::DeferredReply(std::shared_ptr<ReplySink> sink)
    : state_(sink ? std::make_shared<State>(std::move(sink)) : nullptr) {}

void DeferredReply::complete(ReplyWriter write_reply) const {
    if (!state_ || state_->completed.exchange(true, std::memory_order_acq_rel)) return;
    state_->sink->deliver(std::move(write_reply));
}

}  // namespace bloomery::command
