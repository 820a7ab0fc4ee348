// The model registry, online services and their access tokens, in the platform's SQLite file
// (DATA/zenith.db) next to the job tables. Both `zenith server` (which deploys services) and each
// `zenith serve` process (which checks tokens) open it; SQLite's WAL mode lets them share it.
//
// Tokens: 256 random bits, shown once ("zt_" + 64 hex digits); only their SHA-256 is stored. A
// service token opens one service; a platform token (no service) has a role: admin, or viewer
// (read-only, for dashboards and Prometheus).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "platform/db/sqlite_db.h"

namespace zenith::platform {

// One registered package: versions count from 1 per name.
struct ModelVersion {
  std::string name;
  int version = 0;
  std::string package_dir;
  std::string sha256;  // the package's content hash
  double created_at = 0;
};

// Desired and observed state of one online service.
struct DeploymentRecord {
  std::string name;
  int version = 0;    // the model version it serves
  std::string state;  // starting, running, failed, undeployed
  std::string url;    // https://host:port
  int port = 0;       // requested port (0: any)
  int bound_port = 0;
  int replicas = 1;
  int pid = 0;
  std::string reason;   // why it failed
  std::string options;  // JSON: batching and limits passed to `zenith serve`
  double updated_at = 0;
};

struct TokenRecord {
  std::int64_t id = 0;
  std::string service;  // "" for a platform token
  std::string role;     // "service", or a platform token's "admin" / "viewer"
  std::string hash;     // SHA-256 hex of the secret
  std::string prefix;   // the secret's first characters, to tell tokens apart in lists
  double created_at = 0;
  double expires_at = 0;  // 0: never
  bool revoked = false;
};

// A token's metadata as the API and the CLI show it (id, service, prefix, times, state:
// active, expired or revoked); never the hash.
nlohmann::json token_json(const TokenRecord& t);

enum class TokenCheck { kOk, kUnauthorized, kForbidden };

std::string sha256_hex(const std::string& data);
// A fresh secret: "zt_" + 64 hex digits of RAND_bytes.
std::string new_token_secret();
double unix_now();
// A model package's model file, named by package.json's "model_file": weights.safetensors (the
// default) or model.onnx; throws on any other name.
std::string package_model_file(const nlohmann::json& manifest);
// The files of a package besides package.json: its "files" list (an LLM package: weights,
// tokenizer, adapters; relative paths that stay inside it), else its model file.
std::vector<std::string> package_files(const nlohmann::json& manifest);
// A model package's content hash: SHA-256 of its files (package_files, in order) followed by
// DIR/package.json without its "sha256" field (compact JSON, keys sorted). Throws when a file
// is missing.
std::string package_content_hash(const std::string& dir);

class DeploymentStore {
 public:
  explicit DeploymentStore(const std::string& path);
  ~DeploymentStore();
  DeploymentStore(const DeploymentStore&) = delete;
  DeploymentStore& operator=(const DeploymentStore&) = delete;

  // Registers a new version of `name`; returns it with its number.
  ModelVersion add_model_version(const std::string& name, const std::string& package_dir,
                                 const std::string& sha256);
  // Newest version first; all names when `name` is empty.
  std::vector<ModelVersion> model_versions(const std::string& name = "");
  std::optional<ModelVersion> model_version(const std::string& name, int version);
  int next_model_version(const std::string& name);

  void put_service(const DeploymentRecord& service);  // insert or replace by name
  std::optional<DeploymentRecord> get_service(const std::string& name);
  std::vector<DeploymentRecord> list_services();

  // Returns the record and the secret, which is never stored. `role` is "service" for a
  // service's token (then `service` names it), "admin" or "viewer" for the platform API.
  std::pair<TokenRecord, std::string> create_token(const std::string& service,
                                                   double expires_in_s = 0,
                                                   const std::string& role = "service");
  std::vector<TokenRecord> list_tokens(const std::string& service = "");
  std::optional<TokenRecord> get_token(std::int64_t id);
  bool revoke_token(std::int64_t id);
  // Live tokens (not revoked, not expired) of every service.
  std::vector<TokenRecord> live_tokens();
  // Changes whenever another connection commits to the file (PRAGMA data_version).
  std::int64_t data_version();

 private:
  void exec(const char* sql);
  bool has_column(const char* table, const char* column);
  SqliteDb db_;
  std::string path_;
  std::mutex mutex_;
};

// Checks bearer tokens for one service against the store, comparing the SHA-256 of the offered
// secret with every live token's hash in constant time. The live set is re-read whenever the
// file changed (another process made or revoked a token) and at least every `refresh_s` seconds,
// so new tokens and revocations count from the next request.
class TokenVerifier {
 public:
  TokenVerifier(std::string db_path, std::string service, double refresh_s = 1.0);
  // kUnauthorized: missing, unknown, expired or revoked; kForbidden: another service's token.
  TokenCheck check(const std::string& secret);
  // The live token with this secret, of any service or role.
  std::optional<TokenRecord> find(const std::string& secret);

 private:
  std::string db_path_, service_;
  double refresh_s_;
  std::mutex mutex_;
  std::vector<TokenRecord> live_;
  double loaded_at_ = -1e18;
  std::int64_t data_version_ = -1;
  std::unique_ptr<DeploymentStore> store_;
};

}  // namespace zenith::platform
