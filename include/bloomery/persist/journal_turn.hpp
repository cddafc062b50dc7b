#pragma once
// A thread that ends each turn of its work with Journal::write_through(): a
// server worker, whose replies of a turn wait for that write. It registers
// itself with Journal::set_thread_turn() for as long as it runs; the journal
// then tells it, on that thread, when it appended a record.

namespace bloomery::persist {

class JournalTurn {
public:
    virtual ~JournalTurn() = default;

    // Called on the registered thread after it appended a record, with
    // --appendfsync everysec and no, instead of waking the journal's writer
    // thread (waking it for every batch of commands costs more CPU than the
    // write itself). Must bring about this thread's write_through() soon.
    virtual void schedule_write_through() = 0;

    // Whether this thread appended a record since clear_appended() (any
    // --appendfsync). The network layer clears it before each batch of
    // commands, so that while the journal fails it holds only the replies
    // of batches that themselves wrote.
    bool appended() const { return appended_; }
    void clear_appended() { appended_ = false; }

private:
    friend class JournalAppender;  // marks appended_ on the registered thread
    bool appended_ = false;
};

}  // namespace bloomery::persist
