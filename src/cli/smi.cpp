// `zenith smi`: devices, which job holds each, utilisation and memory (like npu-smi).
#include "cli/client.h"
#include "cli/command.h"
#include "platform/jobs/device_inventory.h"
#include "platform/jobs/quantity.h"

namespace zenith::cli {
namespace {

std::string cores_text(const nlohmann::json& cores) {
  std::string s;
  for (const auto& c : cores) s += (s.empty() ? "" : ",") + std::to_string(c.get<int>());
  return s;
}

int run_smi(int argc, char** argv) {
  CLI::App app{"Show devices and their use", "zenith smi"};
  ClientConfig config;
  bool as_json = false;
  app.add_flag("--json", as_json, "print the API's JSON");
  add_client_options(app, config);
  if (auto exit_code = parse_args(app, argc, argv)) return *exit_code;
  auto client = make_client(config);
  auto r = client.get("/api/v1/devices");
  nlohmann::json devices;
  bool live = r.status == 200;
  if (live) {
    devices = expect(r);
  } else {
    // No server: show what this host would offer.
    devices = nlohmann::json::array();
    for (const auto& d : platform::detect_devices({}))
      devices.push_back({{"index", d.index},
                         {"kind", d.kind},
                         {"name", d.name},
                         {"cores", d.cores},
                         {"memory_total", d.memory_bytes},
                         {"job_id", 0},
                         {"rank", -1},
                         {"utilization", 0.0},
                         {"memory_used", 0}});
  }
  if (as_json) {
    std::printf("%s\n", devices.dump(2).c_str());
    return 0;
  }
  std::printf("+----------------------------------------------------------------------------+\n");
  std::printf("| zenith-smi   %-62s|\n",
              live ? "(live, from the server)" : "(no server reachable: this host's inventory)");
  std::printf("+-------+--------+----------+--------+------+--------+-----------------------+\n");
  std::printf("| %-5s | %-6s | %-8s | %-6s | %-4s | %-6s | %-21s |\n", "DEV", "KIND", "CORES",
              "JOB", "RANK", "UTIL", "MEMORY USED / SHARE");
  std::printf("+-------+--------+----------+--------+------+--------+-----------------------+\n");
  for (const auto& d : devices) {
    long long job = d["job_id"];
    std::string mem =
        platform::format_size(d["memory_used"]) + " / " + platform::format_size(d["memory_total"]);
    char util[16];
    std::snprintf(util, sizeof util, "%3.0f%%", d["utilization"].get<double>() * 100);
    std::printf("| %-5d | %-6s | %-8s | %-6s | %-4s | %-6s | %-21s |\n", d["index"].get<int>(),
                d["kind"].get<std::string>().c_str(), cores_text(d["cores"]).c_str(),
                job ? std::to_string(job).c_str() : "-",
                job ? std::to_string(d["rank"].get<int>()).c_str() : "-", util, mem.c_str());
  }
  std::printf("+-------+--------+----------+--------+------+--------+-----------------------+\n");
  return 0;
}

}  // namespace
}  // namespace zenith::cli

ZENITH_COMMAND("smi", "Show devices: which job holds each, utilisation, memory",
               zenith::cli::run_smi);
