#include "cli/profile_flags.h"

#include <cstdlib>

namespace zenith::cli {

void ProfileFlags::add(CLI::App& app) {
  app.add_option("--profile", steps,
                 "profile N optimizer steps: Chrome trace, summary table (OUT/profile/)");
  app.add_option("--profile-skip", skip, "warm-up steps before profiling")->capture_default_str();
}

void ProfileFlags::check() const {
  ZENITH_CHECK(steps >= 0 && skip >= 0, "[profile] --profile and --profile-skip must not be ",
               "negative, got ", steps, " and ", skip);
}

callbacks::CallbackPtr ProfileFlags::callback(const std::string& out, int rank, int world) const {
  if (steps == 0) return nullptr;
  callbacks::ProfileOptions o;
  o.dir = out + "/profile";
  o.steps = steps;
  o.skip_steps = skip;
  o.rank = rank;
  o.world = world;
  if (const char* job = std::getenv("ZENITH_JOB_DIR"); job && *job)
    o.copy_to.push_back(std::string(job) + "/profile");
  return callbacks::Profile(std::move(o));
}

}  // namespace zenith::cli
