#include "platform/jobs/job_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "platform/jobs/quantity.h"

namespace zenith::platform {

namespace fs = std::filesystem;

namespace {

std::string join_issues(const std::string& source, const std::vector<SpecIssue>& issues) {
  std::string out;
  for (const auto& i : issues) {
    if (!out.empty()) out += '\n';
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "lit" + std::string here.
    out.append("[job_spec] ").append(source);
    if (i.line > 0)
      out.append(":").append(std::to_string(i.line)).append(":").append(std::to_string(i.column));
    out.append(": ").append(i.message);
  }
  return out;
}

// Collects issues while walking the YAML tree.
class Validator {
 public:
  void add(const YAML::Node& node, const std::string& message) {
    const YAML::Mark m = node.Mark();
    if (m.is_null())
      issues_.push_back({0, 0, message});
    else
      issues_.push_back({m.line + 1, m.column + 1, message});
  }
  void add_at(const YAML::Mark& m, const std::string& message) {
    issues_.push_back({m.line + 1, m.column + 1, message});
  }
  std::vector<SpecIssue>& issues() { return issues_; }

  // Flags keys that are not in `known`, suggesting the nearest one.
  void check_keys(const YAML::Node& map, const std::vector<std::string>& known,
                  const std::string& where) {
    for (const auto& kv : map) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string best;
      int best_d = std::numeric_limits<int>::max();
      for (const auto& k : known) {
        int d = edit_distance(key, k);
        if (d < best_d) best_d = d, best = k;
      }
      std::string msg = "unknown key '" + key + "' in " + where;
      if (best_d <= std::max<int>(2, static_cast<int>(key.size()) / 3))
        msg += " (did you mean '" + best + "'?)";
      else {
        msg += " (known keys:";
        for (const auto& k : known) msg += " " + k;
        msg += ")";
      }
      add(kv.first, msg);
    }
  }

  bool scalar(const YAML::Node& n, const std::string& field, std::string* out) {
    if (!n.IsScalar()) {
      add(n, "'" + field + "' must be a single value");
      return false;
    }
    *out = n.Scalar();
    return true;
  }

  // An integer in [min, max]; messages name the field.
  bool integer(const YAML::Node& n, const std::string& field, long min, long max, int* out) {
    std::string s;
    if (!scalar(n, field, &s)) return false;
    std::size_t used = 0;
    long v = 0;
    try {
      v = std::stol(s, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != s.size()) {
      add(n, "'" + field + "' must be an integer, got '" + s + "'");
      return false;
    }
    if (v < min) {
      add(n, "'" + field + "' must be " + (min == 1 ? "positive" : ">= " + std::to_string(min)) +
                 ", got " + s);
      return false;
    }
    if (v > max) {
      add(n, "'" + field + "' must be <= " + std::to_string(max) + ", got " + s);
      return false;
    }
    *out = static_cast<int>(v);
    return true;
  }

  bool size(const YAML::Node& n, const std::string& field, std::int64_t* out) {
    std::string s;
    if (!scalar(n, field, &s)) return false;
    auto v = parse_size(s);
    if (!v) {
      add(n, "bad quantity '" + s + "' for '" + field +
                 "' (expected a number with an optional unit: 512Mi, 64Gi, 100G)");
      return false;
    }
    if (*v <= 0) {
      add(n, "'" + field + "' must be positive, got '" + s + "'");
      return false;
    }
    *out = *v;
    return true;
  }

  bool duration(const YAML::Node& n, const std::string& field, double* out) {
    std::string s;
    if (!scalar(n, field, &s)) return false;
    auto v = parse_duration(s);
    if (!v) {
      add(n, "bad duration '" + s + "' for '" + field + "' (expected 90s, 10m, 2h, 1h30m)");
      return false;
    }
    if (*v <= 0) {
      add(n, "'" + field + "' must be positive, got '" + s + "'");
      return false;
    }
    *out = *v;
    return true;
  }

  bool choice(const YAML::Node& n, const std::string& field, const std::vector<std::string>& ok,
              std::string* out) {
    std::string s;
    if (!scalar(n, field, &s)) return false;
    if (std::find(ok.begin(), ok.end(), s) == ok.end()) {
      std::string list;
      for (const auto& o : ok) list += (list.empty() ? "" : ", ") + o;
      add(n, "'" + field + "' must be one of " + list + ", got '" + s + "'");
      return false;
    }
    *out = s;
    return true;
  }

 private:
  std::vector<SpecIssue> issues_;
};

void parse_resources(Validator& v, const YAML::Node& res, JobSpec& spec) {
  if (!res.IsMap()) {
    v.add(res, "'job.resources' must be a mapping like { npu: 8, memory: 64Gi }");
    return;
  }
  v.check_keys(res, {"npu", "gpu", "devices", "nodes", "memory", "storage"}, "job.resources");
  int count_keys = 0;
  for (const char* key : {"npu", "gpu", "devices"}) {
    if (const YAML::Node n = res[key]) {
      if (++count_keys > 1) {
        v.add(n, std::string("'resources.") + key +
                     "' repeats the device count; give one of npu, gpu, devices");
        continue;
      }
      v.integer(n, std::string("resources.") + key, 1, 100000, &spec.devices);
    }
  }
  if (const YAML::Node n = res["nodes"]) v.integer(n, "resources.nodes", 1, 10000, &spec.nodes);
  if (const YAML::Node n = res["memory"]) v.size(n, "resources.memory", &spec.memory_bytes);
  if (const YAML::Node n = res["storage"]) v.size(n, "resources.storage", &spec.storage_bytes);
}

}  // namespace

SpecError::SpecError(std::string source, std::vector<SpecIssue> issues)
    : std::runtime_error(join_issues(source, issues)), issues_(std::move(issues)) {}

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

JobSpec parse_job_spec(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's own message carries "yaml-cpp: error at line ..."; keep only the reason.
    throw SpecError(source, {{e.mark.line + 1, e.mark.column + 1, "invalid YAML: " + e.msg}});
  }
  Validator v;
  JobSpec spec;
  if (!root || root.IsNull()) throw SpecError(source, {{0, 0, "empty job spec"}});
  if (!root.IsMap())
    throw SpecError(source, {{1, 1, "the spec must be a mapping with a 'job' key"}});
  v.check_keys(root, {"job"}, "the top level");
  const YAML::Node job = root["job"];
  if (!job) {
    v.add_at(root.Mark(), "missing 'job' section");
    throw SpecError(source, v.issues());
  }
  if (!job.IsMap()) {
    v.add(job, "'job' must be a mapping");
    throw SpecError(source, v.issues());
  }
  v.check_keys(job,
               {"name", "framework", "resources", "device", "nodes", "env", "working_dir", "entry",
                "max_restarts", "timeout", "hang_timeout", "priority", "backend"},
               "job");
  if (const YAML::Node n = job["name"]) {
    if (v.scalar(n, "job.name", &spec.name) && spec.name.empty()) v.add(n, "'job.name' is empty");
  }
  if (const YAML::Node n = job["framework"]) v.scalar(n, "job.framework", &spec.framework);
  if (const YAML::Node n = job["resources"]) parse_resources(v, n, spec);
  if (const YAML::Node n = job["device"]) {
    v.choice(n, "job.device", {"cpu", "cuda", "auto"}, &spec.device_kind);
    if (spec.device_kind == "auto") spec.device_kind.clear();
  }
  if (const YAML::Node n = job["nodes"])
    v.add(n,
          "'nodes' belongs in job.resources, where npu counts the devices of each node "
          "(resources: { nodes: 2, npu: 4 } is 8 ranks)");
  if (const YAML::Node n = job["env"]) {
    if (!n.IsMap()) {
      v.add(n, "'job.env' must be a mapping of NAME: value");
    } else {
      for (const auto& kv : n) {
        std::string key = kv.first.Scalar();
        bool valid = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0]));
        for (char c : key)
          valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
        if (!valid) {
          v.add(kv.first, "'" + key + "' is not a valid environment variable name");
          continue;
        }
        std::string value;
        if (v.scalar(kv.second, "job.env." + key, &value)) spec.env[key] = value;
      }
    }
  }
  if (const YAML::Node n = job["working_dir"]) v.scalar(n, "job.working_dir", &spec.working_dir);
  if (const YAML::Node n = job["entry"]) {
    if (v.scalar(n, "job.entry", &spec.entry) &&
        spec.entry.find_first_not_of(" \t\n") == std::string::npos)
      v.add(n, "'job.entry' is empty: give the command that starts one rank");
  } else {
    // Point at the `job:` key itself, where the entry belongs.
    YAML::Mark at = job.Mark();
    for (const auto& kv : root)
      if (kv.first.IsScalar() && kv.first.Scalar() == "job") at = kv.first.Mark();
    v.add_at(at, "missing 'job.entry' (the command each rank runs, e.g. python train.py)");
  }
  if (const YAML::Node n = job["max_restarts"])
    v.integer(n, "job.max_restarts", 0, 1000, &spec.max_restarts);
  if (const YAML::Node n = job["timeout"]) v.duration(n, "job.timeout", &spec.timeout_s);
  if (const YAML::Node n = job["hang_timeout"])
    v.duration(n, "job.hang_timeout", &spec.hang_timeout_s);
  if (const YAML::Node n = job["priority"])
    v.integer(n, "job.priority", -1000000, 1000000, &spec.priority);
  if (const YAML::Node n = job["backend"])
    v.choice(n, "job.backend", {"local", "slurm"}, &spec.backend);

  if (!v.issues().empty()) {
    auto& issues = v.issues();
    std::stable_sort(issues.begin(), issues.end(), [](const SpecIssue& a, const SpecIssue& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    });
    throw SpecError(source, issues);
  }
  return spec;
}

JobSpec load_job_spec_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("[job_spec] cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  JobSpec spec = parse_job_spec(ss.str(), path);
  fs::path dir = fs::absolute(fs::path(path)).parent_path();
  if (spec.working_dir.empty())
    spec.working_dir = dir.string();
  else if (fs::path(spec.working_dir).is_relative())
    spec.working_dir = (dir / spec.working_dir).lexically_normal().string();
  return spec;
}

nlohmann::json spec_to_json(const JobSpec& s) {
  return {{"name", s.name},
          {"framework", s.framework},
          {"devices", s.devices},
          {"device_kind", s.device_kind},
          {"memory_bytes", s.memory_bytes},
          {"storage_bytes", s.storage_bytes},
          {"nodes", s.nodes},
          {"env", s.env},
          {"working_dir", s.working_dir},
          {"entry", s.entry},
          {"max_restarts", s.max_restarts},
          {"timeout_s", s.timeout_s},
          {"hang_timeout_s", s.hang_timeout_s},
          {"priority", s.priority},
          {"backend", s.backend}};
}

JobSpec spec_from_json(const nlohmann::json& j) {
  JobSpec s;
  s.name = j.value("name", s.name);
  s.framework = j.value("framework", s.framework);
  s.devices = j.value("devices", s.devices);
  s.device_kind = j.value("device_kind", s.device_kind);
  s.memory_bytes = j.value("memory_bytes", s.memory_bytes);
  s.storage_bytes = j.value("storage_bytes", s.storage_bytes);
  s.nodes = j.value("nodes", s.nodes);
  if (j.contains("env")) s.env = j.at("env").get<std::map<std::string, std::string>>();
  s.working_dir = j.value("working_dir", s.working_dir);
  s.entry = j.value("entry", s.entry);
  s.max_restarts = j.value("max_restarts", s.max_restarts);
  s.timeout_s = j.value("timeout_s", s.timeout_s);
  s.hang_timeout_s = j.value("hang_timeout_s", s.hang_timeout_s);
  s.priority = j.value("priority", s.priority);
  s.backend = j.value("backend", s.backend);
  return s;
}

}  // namespace zenith::platform
