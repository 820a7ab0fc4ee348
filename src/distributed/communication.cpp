// init / release / groups / stats: the process-wide part of the communication API.
#include "zenith/communication.h"

#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <set>

#include "distributed/stats.h"
#include "distributed/world.h"
#include "zenith/error.h"

namespace zenith::distributed {

namespace {

using communication::detail::GroupImpl;

std::mutex g_mutex;
// Each init() in a process gets its own key namespace, so init/release/init in one job never
// reads the keys of the previous round (every rank counts its init() calls the same way).
int g_init_round = 0;

// Closes without a final barrier when the program exits without release().
struct WorldHolder {
  std::unique_ptr<World> world;
  ~WorldHolder() {
    if (!world) return;
    for (auto& weak : world->groups)
      if (auto g = weak.lock()) g->close();
    world->world->close();
  }
};
WorldHolder g_holder;

std::shared_ptr<GroupImpl> connect_group(World& w, const std::string& name,
                                         const std::vector<int>& ranks) {
  auto g = std::make_shared<GroupImpl>();
  g->name = name;
  g->ranks = ranks;
  g->timeout = w.config.timeout;
  g->check_inputs = w.config.check_inputs;
  auto me = std::find(ranks.begin(), ranks.end(), w.config.rank);
  if (me == ranks.end()) return g;  // not a member: nothing to connect
  g->rank = int(me - ranks.begin());
  if (ranks.size() == 1) {
    g->context = std::make_shared<gloo::Context>(0, 1);  // never sends
    return g;
  }
  g->store = w.store->child(name);
  auto context = std::make_shared<gloo::rendezvous::Context>(g->rank, int(ranks.size()));
  context->setTimeout(w.config.timeout);
  try {
    context->connectFullMesh(*g->store, w.device);
  } catch (const Error&) {
    throw;  // our store's rendezvous timeout already says what is missing
  } catch (const std::exception& e) {
    ZENITH_FAIL("[communication] connecting ", name, " (", ranks.size(), " ranks) through ",
                w.store->describe(), " failed: ", e.what());
  }
  g->context = std::move(context);
  return g;
}

World& world_or_throw() {
  ZENITH_CHECK(g_holder.world != nullptr,
               "[communication] not initialized; call communication::init() first");
  return *g_holder.world;
}

}  // namespace

std::shared_ptr<GroupImpl> resolve_group(const communication::Group& group, const char* op) {
  std::shared_ptr<GroupImpl> g;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    World& w = world_or_throw();
    g = group.is_world() ? w.world : group.impl();
  }
  ZENITH_CHECK(g->rank >= 0, "[communication] ", op, ": this rank is not a member of ", g->name);
  return g;
}

}  // namespace zenith::distributed

namespace zenith::communication {

using distributed::g_holder;
using distributed::g_mutex;

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
      return "SUM";
    case ReduceOp::AVG:
      return "AVG";
    case ReduceOp::MAX:
      return "MAX";
    case ReduceOp::MIN:
      return "MIN";
  }
  return "?";
}

void init() { init(Options{}); }

void init(const Options& options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  ZENITH_CHECK(g_holder.world == nullptr,
               "[communication] init() called twice; call release() first");
  auto w = std::make_unique<distributed::World>();
  w->config = distributed::resolve_config(options);
  const auto& c = w->config;
  // A peer that dies mid-send must give this rank an error, not kill it with SIGPIPE
  // (Gloo writes with writev). A handler someone else installed stays.
  struct sigaction old {};
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
    std::signal(SIGPIPE, SIG_IGN);
  const int round = distributed::g_init_round++;
  if (c.size > 1) {
    w->store = distributed::make_store(c.store_url, c.prefix + "/init" + std::to_string(round),
                                       c.rank == 0, c.timeout);
    gloo::transport::tcp::attr attr;
    attr.hostname = c.address;
    try {
      w->device = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      ZENITH_FAIL("[communication] rank ", c.rank, " cannot listen on ", c.address, ": ", e.what(),
                  " (set ZENITH_COMM_ADDR to an address of this host)");
    }
  }
  std::vector<int> all(size_t(c.size));
  for (int i = 0; i < c.size; ++i) all[size_t(i)] = i;
  w->world = distributed::connect_group(*w, "world", all);
  g_holder.world = std::move(w);
  std::fprintf(stderr, "[INFO] comm initialized with %d devices (backend gloo)\n", c.size);
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_holder.world != nullptr;
}

void release() {
  std::unique_ptr<distributed::World> w;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    w = std::move(g_holder.world);
  }
  if (!w) return;
  // Wait for every rank to finish its collectives before closing: the TCP store on rank 0 and
  // each rank's connections must outlive the others' last use. A failed group skips this.
  if (w->world->context && w->world->size() > 1 && !w->world->failed) {
    try {
      auto work = w->world->submit("barrier", detail::make_signature("barrier", nullptr), {},
                                   [](distributed::PeerIo& io) { distributed::barrier(io); });
      work.wait();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[WARNING] communication release: final barrier failed: %s\n", e.what());
    }
  }
  for (auto& weak : w->groups)
    if (auto g = weak.lock()) g->close();
  w->world->close();
}

int get_rank() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return distributed::world_or_throw().config.rank;
}

int get_group_size() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return distributed::world_or_throw().config.size;
}

Group new_group(const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& w = distributed::world_or_throw();
  ZENITH_CHECK(!ranks.empty(), "[communication] new_group: empty rank list");
  std::set<int> seen;
  for (int r : ranks) {
    ZENITH_CHECK(r >= 0 && r < w.config.size, "[communication] new_group: rank ", r,
                 " out of range for ", w.config.size, " ranks");
    ZENITH_CHECK(seen.insert(r).second, "[communication] new_group: rank ", r, " listed twice");
  }
  // Every rank numbers groups the same way (all ranks call new_group in the same order).
  const std::string name = "group" + std::to_string(w.next_group++);
  auto g = distributed::connect_group(w, name, ranks);
  std::erase_if(w.groups, [](const auto& weak) { return weak.expired(); });
  w.groups.push_back(g);
  return Group(g);
}

namespace {
const detail::GroupImpl& group_impl(const Group& g) {
  if (!g.is_world()) return *g.impl();
  std::lock_guard<std::mutex> lock(g_mutex);
  return *distributed::world_or_throw().world;
}
}  // namespace

bool Group::is_member() const { return group_impl(*this).rank >= 0; }
int Group::rank() const { return group_impl(*this).rank; }
int Group::size() const { return group_impl(*this).size(); }
const std::vector<int>& Group::ranks() const { return group_impl(*this).ranks; }

Stats stats() { return distributed::stats_snapshot(); }
void reset_stats() { distributed::reset_stats(); }

}  // namespace zenith::communication
