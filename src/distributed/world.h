// The process's communication state between init() and release().
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "distributed/environment.h"
#include "distributed/group.h"
#include "distributed/store.h"

namespace gloo::transport {
class Device;
}

namespace zenith::distributed {

struct World {
  Config config;
  std::unique_ptr<Store> store;                     // null for a world of one
  std::shared_ptr<gloo::transport::Device> device;  // Gloo's TCP device (listener + loop)
  std::shared_ptr<communication::detail::GroupImpl> world;
  std::vector<std::weak_ptr<communication::detail::GroupImpl>> groups;
  int next_group = 1;
};

// The world group, or `group`'s own; throws when not initialized or not a member.
std::shared_ptr<communication::detail::GroupImpl> resolve_group(const communication::Group& group,
                                                                const char* op);

}  // namespace zenith::distributed
