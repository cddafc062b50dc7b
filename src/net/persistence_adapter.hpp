#pragma once
// The command layer's Persistence (SAVE, BGSAVE, INFO persistence, the
// checks before every write) over the persistence manager, which sits below
// the command layer and so cannot implement it itself.

#include <functional>
#include <utility>

#include "bloomery/command/server.hpp"
#include "bloomery/persist/manager.hpp"

namespace bloomery::net {

class PersistenceAdapter final : public command::Persistence {
public:
    explicit PersistenceAdapter(persist::Manager& manager) : manager_(manager) {}

    void save_async(std::function<void(persist::SaveResult)> done) override {
        manager_.save_async(std::move(done));
    }
    persist::SaveResult bgsave() override { return manager_.bgsave(); }
    persist::PersistenceInfo persistence() override { return manager_.info(); }
    bool snapshot_failing() override { return manager_.snapshot_failing(); }
    persist::Journal* journal() override { return manager_.journal(); }

private:
    persist::Manager& manager_;
};

}  // namespace bloomery::net
