#include "cli/env_vars.h"

#include <array>

namespace zenith::cli {
namespace {

using G = EnvGroup;

// Grouped as `zenith env` prints them. The layered code keeps its own getenv calls; this is the
// one list a reader (and the docs) sees.
constexpr std::array kVars = {
    // Settings.
    EnvVar{"ZENITH_NUM_THREADS", G::settings, "all cores",
           "Threads for the CPU kernels (the OpenMP pool) of `zenith` and `import zenith`. The "
           "platform sets it, with `OMP_NUM_THREADS`, to the cores a rank was given."},
    EnvVar{"OMP_WAIT_POLICY", G::settings, "PASSIVE (set by `zenith` at start)",
           "How idle OpenMP threads wait. `zenith` runs with `PASSIVE` (they sleep) unless this "
           "or `GOMP_SPINCOUNT` is set: spinning threads (libgomp's default of 300000 spins) "
           "made short runs several times slower on a machine with other work. "
           "bench/omp_wait_policy.sh measures the policies."},
    EnvVar{"ZENITH_DATA", G::settings, "~/.zenith",
           "The server's data dir (jobs, database, token, `server.url`); the client commands "
           "read the server's URL and token from it."},
    EnvVar{"ZENITH_SERVER", G::settings, "DATA/server.url, else http://127.0.0.1:7070",
           "The server the client commands (`submit`, `jobs`, `logs`, ...) call; `--server` "
           "overrides it."},
    EnvVar{"ZENITH_TOKEN", G::settings, "DATA/token",
           "The API token the client commands send; `--token` overrides it."},
    EnvVar{"ZENITH_WEB_DIR", G::settings, "share/zenith/web beside the binary",
           "Where `zenith server` finds the dashboard's files (the `zenith_web` target builds "
           "them)."},
    EnvVar{"ZENITH_SERVE_BINARY", G::settings, "this zenith binary",
           "The program `zenith server` starts for an online service (`zenith serve ...`)."},
    EnvVar{"ZENITH_COMM_TIMEOUT", G::settings, "60",
           "How long a collective waits for a peer before failing: seconds, or `<n>ms`."},
    EnvVar{"ZENITH_COMM_CHECK", G::settings, "1",
           "`0` stops comparing each collective's call (op, shape, dtype) across ranks."},
    EnvVar{"ZENITH_STORE", G::settings,
           "tcp://MASTER_ADDR:MASTER_PORT, else the job dir's rendezvous",
           "The ranks' rendezvous store: `file:///dir`, `redis://host:port` or "
           "`tcp://host:port`."},
    EnvVar{"ZENITH_STORE_PREFIX", G::settings,
           "zenith/job<ZENITH_JOB_ID>/attempt<ZENITH_RESTART_COUNT>, else zenith",
           "Prefix of the rendezvous keys, so reruns never meet an earlier attempt's keys."},
    // Tuning.
    EnvVar{"ZENITH_SGEMM", G::tuning, "onednn",
           "`openblas`: float matrix products through OpenBLAS instead of oneDNN."},
    EnvVar{"ZENITH_CONV_ALGO", G::tuning, "auto",
           "oneDNN's convolution algorithm: `auto`, `direct` or `winograd`."},
    EnvVar{"ZENITH_AVX2_FAST_PATHS", G::tuning, "auto",
           "zenith's own AVX2 convolution and pooling kernels: `on`, `off`, or `auto` (on where "
           "oneDNN has no AVX-512)."},
    EnvVar{"ZENITH_BF16_COMPUTE", G::tuning, "1 where the CPU has AVX512_BF16",
           "`0`: bf16 tensors are computed in float32 even where the CPU has bf16 arithmetic."},
    EnvVar{"ZENITH_ALLOC_CACHE_MB", G::tuning, "2048",
           "MiB of freed tensor memory the allocator keeps for reuse."},
    EnvVar{"ZENITH_GRAPH_CONV_POOL", G::tuning, "1",
           "`0`: graph mode does not fuse the first convolution with its ReLU and max pooling."},
    EnvVar{"ZENITH_GRAPH_LINEAR_CROSS_ENTROPY", G::tuning, "1",
           "`0`: graph mode does not fuse the output layer with its cross-entropy loss."},
    EnvVar{"ZENITH_GRAPH_UPDATE_IN_BACKWARD", G::tuning, "1 with one micro-batch a step",
           "`0` or `1`: whether graph mode runs the optimizer's updates inside the backward."},
    EnvVar{"ZENITH_NO_NAMESPACES", G::tuning, "unset",
           "Set: `zenith server` runs ranks without PID and mount namespaces."},
    EnvVar{"ZENITH_NO_CGROUPS", G::tuning, "unset",
           "Set: `zenith server` limits a rank's memory with RLIMIT_AS, not a memory cgroup."},
    // Set by the platform.
    EnvVar{"ZENITH_JOB_ID", G::platform, "unset", "The job's id."},
    EnvVar{"ZENITH_JOB_DIR", G::platform, "unset",
           "The job's directory: `--profile` copies its trace there; the ranks' default "
           "rendezvous store."},
    EnvVar{"ZENITH_RESTART_COUNT", G::platform, "unset",
           "How often the job has restarted; above 0, `train` and `finetune` resume from the "
           "newest checkpoint in `--out`."},
    EnvVar{"ZENITH_HEARTBEAT_FILE", G::platform, "unset",
           "Touching this file counts as activity for the platform's hang detection."},
    EnvVar{"ZENITH_METRICS_FILE", G::platform, "unset",
           "`train`, `finetune` and Python's `Model.train` also append their metrics (JSON "
           "lines) here; the platform points it into the job's logs for the dashboard."},
    EnvVar{"ZENITH_COMM_ADDR", G::platform, "127.0.0.1, or the host name across hosts",
           "The address this rank's collectives listen on; set to the node's address in Slurm "
           "jobs."},
    // Development.
    EnvVar{"ZENITH_QUICK", G::development, "0", "`1`: scripts/test.sh leaves the slow tests out."},
    EnvVar{"ZENITH_ASAN", G::development, "0",
           "`1`: scripts/test.sh also runs the unit and security tests under ASan."},
    EnvVar{"ZENITH_INSTALL_PYTHONS", G::development, "python3 and python on PATH, Debian's",
           "The interpreters scripts/install-python.sh installs `zenith` for (space-separated)."},
    EnvVar{"ZENITH_ENGINE_TRACE", G::development, "unset",
           "A file the LLM engine appends one JSON line a step to (its times, decode and prefill "
           "tokens, each sampled token's time) while idle; bench/serving.py reads it."},
    EnvVar{"ZENITH_BINARY", G::development, "zenith on PATH",
           "The `zenith` binary the Python tests run (CTest sets it)."},
    EnvVar{"ZENITH_SOURCE_DIR", G::development, "the checkout above tests/python",
           "The source tree the Python tests read fixtures and examples from (CTest sets it)."},
    EnvVar{"ZENITH_ONNX_REFERENCE", G::development, "unset",
           "The onnx_reference helper tests/e2e/onnx_export.sh runs (CTest sets it)."},
    EnvVar{"ZENITH_BIN", G::development, "unset",
           "The `zenith` binary the dashboard's browser test deploys with (dashboard.sh sets it)."},
    EnvVar{"ZENITH_URL", G::development, "unset",
           "The server the dashboard's browser test opens (tests/e2e/dashboard.sh sets it)."},
};

// Not environment variables, though spelled like them: left out of the table on purpose.
constexpr std::array kNotVars = {
    NotEnvVar{"ZENITH_HAVE_NCCL", "compile definition: the NCCL backend is built"},
    NotEnvVar{"ZENITH_WITH_NCCL", "CMake option"},
    NotEnvVar{"ZENITH_FIXTURE_DIR", "compile definition of the C++ tests"},
};

const char* group_title(EnvGroup g) {
  switch (g) {
    case G::settings:
      return "Settings";
    case G::tuning:
      return "Kernel, graph and isolation switches";
    case G::platform:
      return "Set by the platform for each rank";
    case G::development:
      return "Build, install and test scripts";
  }
  return "";
}

const char* group_intro(EnvGroup g) {
  switch (g) {
    case G::settings:
      return "Read by `zenith`, the Python module and the ranks they start.";
    case G::tuning:
      return "For measuring and debugging; the defaults are what the benches measured best.";
    case G::platform:
      return "`zenith server` (and the Slurm backend) sets these in every rank's environment; "
             "they can be set by hand to run a rank outside the platform.";
    case G::development:
      return "Read by scripts/ and the tests, not by `zenith` itself.";
  }
  return "";
}

}  // namespace

std::span<const EnvVar> env_vars() { return kVars; }

std::span<const NotEnvVar> not_env_vars() { return kNotVars; }

std::string_view env_group_title(EnvGroup g) { return group_title(g); }

std::string env_markdown() {
  std::string md =
      "# Environment variables\n\n"
      "<!-- Generated by `zenith env --markdown > docs/environment.md` from src/cli/env_vars.cpp;"
      " edit that table, not this file (tests/cli/env_vars_test.cpp compares them). -->\n\n"
      "`zenith env` lists these with their values in the current environment.\n";
  for (EnvGroup g : {G::settings, G::tuning, G::platform, G::development}) {
    md += std::string("\n## ") + group_title(g) + "\n\n" + group_intro(g) + "\n\n";
    md += "| Variable | Default | Meaning |\n|---|---|---|\n";
    for (const EnvVar& v : kVars)
      if (v.group == g)
        md += "| `" + std::string(v.name) + "` | " + std::string(v.default_value) + " | " +
              std::string(v.meaning) + " |\n";
  }
  return md;
}

}  // namespace zenith::cli
