// callbacks::Profile: a profiler::Profiler over a window of training steps, its files, and the
// merge of the ranks' traces.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/atomic_file.h"
#include "zenith/communication.h"
#include "zenith/profiler.h"
#include "zenith/train.h"

namespace zenith::callbacks {
namespace {

using nlohmann::json;

json read_json(const std::string& path) { return json::parse(core::read_file(path, "Profile")); }

class ProfileImpl final : public Callback {
 public:
  explicit ProfileImpl(ProfileOptions options) : o_(std::move(options)) {
    ZENITH_CHECK(!o_.dir.empty(), "[Profile] needs an output directory");
    ZENITH_CHECK(o_.steps > 0 && o_.skip_steps >= 0, "[Profile] steps must be positive and ",
                 "skip_steps not negative, got ", o_.steps, " and ", o_.skip_steps);
  }

  void on_train_begin(RunContext&) override {
    if (o_.skip_steps == 0) start();
  }
  void on_train_step_end(RunContext&) override {
    ++steps_seen_;
    if (!profiler_ && !summary_ && steps_seen_ == o_.skip_steps) start();
    if (profiler_ && steps_seen_ == o_.skip_steps + o_.steps) finish();
  }
  void on_train_end(RunContext&) override {
    if (profiler_) finish();  // the run ended first: what was recorded
    if (!o_.print || o_.rank != 0) return;
    if (summary_)
      std::printf("%s(trace: %s/trace.json)\n", summary_->table().c_str(), o_.dir.c_str());
    else
      std::printf("profile: the run ended after %lld steps, before profiling began (after %lld)\n",
                  (long long)steps_seen_, (long long)o_.skip_steps);
    std::fflush(stdout);
  }

 private:
  void start() {
    profiler::Options options;
    options.rank = o_.rank;
    profiler_ = std::make_unique<profiler::Profiler>(options);
  }

  void finish() {
    profiler_->stop();
    summary_ = profiler_->summary();
    if (o_.world == 1) {
      profiler_->write(o_.dir);
    } else {
      profiler_->write(o_.dir, ".rank" + std::to_string(o_.rank));
      communication::barrier();  // every rank's files are written
      if (o_.rank == 0) merge_ranks();
    }
    profiler_.reset();
    if (o_.rank != 0) return;
    for (const std::string& dir : o_.copy_to) {
      std::filesystem::create_directories(dir);
      for (const char* f : {"trace.json", "summary.json", "summary.txt"})
        std::filesystem::copy_file(o_.dir + "/" + f, dir + "/" + f,
                                   std::filesystem::copy_options::overwrite_existing);
    }
  }

  // DIR/trace.json with every rank's events; DIR/summary.json is rank 0's with "ranks": each
  // rank's summary. A rank whose files are missing (another node's disk) is left out.
  void merge_ranks() {
    std::vector<json> traces;
    json ranks = json::array();
    for (int r = 0; r < o_.world; ++r) {
      const std::string suffix = ".rank" + std::to_string(r);
      if (!std::filesystem::exists(o_.dir + "/trace" + suffix + ".json")) continue;
      traces.push_back(read_json(o_.dir + "/trace" + suffix + ".json"));
      ranks.push_back(read_json(o_.dir + "/summary" + suffix + ".json"));
    }
    json summary = summary_->to_json();
    summary["ranks"] = std::move(ranks);
    core::write_file_atomic(o_.dir + "/trace.json", profiler::merge_chrome_traces(traces).dump());
    core::write_file_atomic(o_.dir + "/summary.json", summary.dump(2) + "\n");
    core::write_file_atomic(o_.dir + "/summary.txt", summary_->table(40));
  }

  ProfileOptions o_;
  int64_t steps_seen_ = 0;
  std::unique_ptr<profiler::Profiler> profiler_;
  std::optional<profiler::Summary> summary_;
};

}  // namespace

CallbackPtr Profile(ProfileOptions options) {
  return std::make_shared<ProfileImpl>(std::move(options));
}

}  // namespace zenith::callbacks
