#include "cli/profile_flags.h"

#include <cstdlib>

namespace zenith::cli {

void ProfileFlags::add(CLI::App& app) {
  app.add_option("--profile", steps,
                 "profile N optimizer steps: Chrome trace, summary table (OUT/profile/)");
  app.add_option("--profile-skip", skip,
                 "warm-up steps before profiling (default 1; 3 in graph mode: the capture and "
                 "the first two replays)");
}

void ProfileFlags::check() const {
  ZENITH_CHECK(steps >= 0 && skip >= -1, "[profile] --profile and --profile-skip must not be ",
               "negative, got ", steps, " and ", skip);
}

int64_t ProfileFlags::warmup_steps(bool graph_mode) const {
  return skip >= 0 ? skip : graph_mode ? 3 : 1;
}

callbacks::CallbackPtr ProfileFlags::callback(const std::string& out, int rank, int world,
                                              bool graph_mode) const {
  if (steps == 0) return nullptr;
  callbacks::ProfileOptions o;
  o.dir = out + "/profile";
  o.steps = steps;
  o.skip_steps = warmup_steps(graph_mode);
  o.rank = rank;
  o.world = world;
  if (const char* job = std::getenv("ZENITH_JOB_DIR"); job && *job)
    o.copy_to.push_back(std::string(job) + "/profile");
  return callbacks::Profile(std::move(o));
}

}  // namespace zenith::cli
