#include "platform/deployments/deployment_store.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "platform/db/sqlite_statement.h"

namespace zenith::platform {

namespace {

// A prepared statement of this store.
class Stmt : public SqliteStatement {
 public:
  Stmt(sqlite3* db, const char* sql) : SqliteStatement(db, sql, "deployment_store") {}
};

const char* kServiceColumns =
    "name, version, state, url, port, bound_port, replicas, pid, reason, options, updated_at";
const char* kTokenColumns = "id, service, hash, prefix, created_at, expires_at, revoked, role";

DeploymentRecord read_service(Stmt& s) {
  DeploymentRecord r;
  r.name = s.text(0);
  r.version = static_cast<int>(s.integer(1));
  r.state = s.text(2);
  r.url = s.text(3);
  r.port = static_cast<int>(s.integer(4));
  r.bound_port = static_cast<int>(s.integer(5));
  r.replicas = static_cast<int>(s.integer(6));
  r.pid = static_cast<int>(s.integer(7));
  r.reason = s.text(8);
  r.options = s.text(9);
  r.updated_at = s.real(10);
  return r;
}

TokenRecord read_token(Stmt& s) {
  return {s.integer(0), s.text(1), s.text(7), s.text(2),
          s.text(3),    s.real(4), s.real(5), s.integer(6) != 0};
}

ModelVersion read_version(Stmt& s) {
  return {s.text(0), static_cast<int>(s.integer(1)), s.text(2), s.text(3), s.real(4)};
}

}  // namespace

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("[token] SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) out += hex[digest[i] >> 4], out += hex[digest[i] & 15];
  return out;
}

std::string new_token_secret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("[token] RAND_bytes failed");
  static const char* hex = "0123456789abcdef";
  std::string out = "zt_";
  for (unsigned char b : bytes) out += hex[b >> 4], out += hex[b & 15];
  return out;
}

std::string package_model_file(const nlohmann::json& manifest) {
  const std::string file = manifest.is_object() && manifest.contains("model_file")
                               ? manifest["model_file"].get<std::string>()
                               : "weights.safetensors";
  if (file != "weights.safetensors" && file != "model.onnx")
    throw std::runtime_error("[package] unknown model_file '" + file + "'");
  return file;
}

std::vector<std::string> package_files(const nlohmann::json& manifest) {
  if (!manifest.is_object() || !manifest.contains("files")) return {package_model_file(manifest)};
  const auto& files = manifest["files"];
  if (!files.is_array() || files.empty())
    throw std::runtime_error("[package] \"files\" must be a non-empty list of paths");
  std::vector<std::string> out;
  for (const auto& f : files) {
    const std::string path = f.is_string() ? f.get<std::string>() : "";
    // Paths stay inside the package: relative, no "..", not package.json itself.
    if (path.empty() || path.front() == '/' || path == "package.json" ||
        ("/" + path + "/").find("/../") != std::string::npos ||
        ("/" + path + "/").find("/./") != std::string::npos)
      throw std::runtime_error("[package] bad path in \"files\": " + f.dump());
    out.push_back(path);
  }
  return out;
}

std::string package_content_hash(const std::string& dir) {
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("[package] cannot read " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  };
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read(dir + "/package.json"));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("[package] " + dir + "/package.json: " + e.what());
  }
  const auto files = package_files(manifest);
  if (manifest.is_object()) manifest.erase("sha256");
  // SHA-256 over the files' bytes in order, then the manifest, read a piece at a time.
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("[package] SHA-256 failed");
  std::vector<char> piece(1 << 20);
  for (const auto& file : files) {
    std::ifstream in(dir + "/" + file, std::ios::binary);
    if (!in) throw std::runtime_error("[package] cannot read " + dir + "/" + file);
    while (in.read(piece.data(), std::streamsize(piece.size())) || in.gcount() > 0)
      EVP_DigestUpdate(ctx.get(), piece.data(), size_t(in.gcount()));
  }
  const std::string text = manifest.dump();
  EVP_DigestUpdate(ctx.get(), text.data(), text.size());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &n) != 1)
    throw std::runtime_error("[package] SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

DeploymentStore::DeploymentStore(const std::string& path) : path_(path) {
  db_ = open_sqlite(path, "deployment_store");
  exec(
      "CREATE TABLE IF NOT EXISTS model_versions ("
      " name TEXT NOT NULL, version INTEGER NOT NULL, package_dir TEXT NOT NULL,"
      " sha256 TEXT NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (name, version))");
  exec(
      "CREATE TABLE IF NOT EXISTS services ("
      " name TEXT PRIMARY KEY, version INTEGER NOT NULL, state TEXT NOT NULL, url TEXT NOT NULL,"
      " port INTEGER NOT NULL, bound_port INTEGER NOT NULL, replicas INTEGER NOT NULL,"
      " pid INTEGER NOT NULL, reason TEXT NOT NULL, options TEXT NOT NULL,"
      " updated_at REAL NOT NULL)");
  exec(
      "CREATE TABLE IF NOT EXISTS service_tokens ("
      " id INTEGER PRIMARY KEY AUTOINCREMENT, service TEXT NOT NULL, hash TEXT NOT NULL,"
      " prefix TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL,"
      " revoked INTEGER NOT NULL)");
  // Platform tokens (roles) came after the first stores were written.
  if (!has_column("service_tokens", "role"))
    exec("ALTER TABLE service_tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'service'");
}

bool DeploymentStore::has_column(const char* table, const char* column) {
  Stmt s(db_.get(), (std::string("PRAGMA table_info(") + table + ")").c_str());
  while (s.step())
    if (s.text(1) == column) return true;
  return false;
}

DeploymentStore::~DeploymentStore() = default;

void DeploymentStore::exec(const char* sql) {
  sqlite_exec(db_.get(), sql, "deployment_store", path_);
}

int DeploymentStore::next_model_version(const std::string& name) {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(), "SELECT COALESCE(MAX(version), 0) FROM model_versions WHERE name=?");
  s.bind(1, name);
  s.step();
  return static_cast<int>(s.integer(0)) + 1;
}

ModelVersion DeploymentStore::add_model_version(const std::string& name,
                                                const std::string& package_dir,
                                                const std::string& sha256) {
  std::lock_guard lock(mutex_);
  // One statement: the version number is taken and used atomically.
  Stmt s(db_.get(),
         "INSERT INTO model_versions (name, version, package_dir, sha256, created_at)"
         " SELECT ?1, COALESCE(MAX(version), 0) + 1, ?2, ?3, ?4 FROM model_versions"
         " WHERE name=?1 RETURNING version");
  ModelVersion v{name, 0, package_dir, sha256, unix_now()};
  s.bind(1, name);
  s.bind(2, package_dir);
  s.bind(3, sha256);
  s.bind(4, v.created_at);
  if (s.step()) v.version = static_cast<int>(s.integer(0));
  while (s.step()) {
  }
  return v;
}

std::vector<ModelVersion> DeploymentStore::model_versions(const std::string& name) {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(), name.empty() ? "SELECT name, version, package_dir, sha256, created_at FROM "
                                   "model_versions ORDER BY name, version DESC"
                                 : "SELECT name, version, package_dir, sha256, created_at FROM "
                                   "model_versions WHERE name=? ORDER BY version DESC");
  if (!name.empty()) s.bind(1, name);
  std::vector<ModelVersion> out;
  while (s.step()) out.push_back(read_version(s));
  return out;
}

std::optional<ModelVersion> DeploymentStore::model_version(const std::string& name, int version) {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(),
         "SELECT name, version, package_dir, sha256, created_at FROM model_versions"
         " WHERE name=? AND version=?");
  s.bind(1, name);
  s.bind(2, version);
  if (!s.step()) return std::nullopt;
  return read_version(s);
}

void DeploymentStore::put_service(const DeploymentRecord& r) {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(), (std::string("INSERT OR REPLACE INTO services (") + kServiceColumns +
                     ") VALUES (?,?,?,?,?,?,?,?,?,?,?)")
                        .c_str());
  s.bind(1, r.name);
  s.bind(2, r.version);
  s.bind(3, r.state);
  s.bind(4, r.url);
  s.bind(5, r.port);
  s.bind(6, r.bound_port);
  s.bind(7, r.replicas);
  s.bind(8, r.pid);
  s.bind(9, r.reason);
  s.bind(10, r.options);
  s.bind(11, unix_now());
  s.step();
}

std::optional<DeploymentRecord> DeploymentStore::get_service(const std::string& name) {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(),
         (std::string("SELECT ") + kServiceColumns + " FROM services WHERE name=?").c_str());
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return read_service(s);
}

std::vector<DeploymentRecord> DeploymentStore::list_services() {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(),
         (std::string("SELECT ") + kServiceColumns + " FROM services ORDER BY name").c_str());
  std::vector<DeploymentRecord> out;
  while (s.step()) out.push_back(read_service(s));
  return out;
}

std::pair<TokenRecord, std::string> DeploymentStore::create_token(const std::string& service,
                                                                  double expires_in_s,
                                                                  const std::string& role) {
  if (role != "service" && role != "admin" && role != "viewer")
    throw std::runtime_error("[token] unknown role '" + role + "' (admin, viewer)");
  if ((role == "service") == service.empty())
    throw std::runtime_error("[token] a token is for one service or has a platform role");
  const std::string secret = new_token_secret();
  TokenRecord r;
  r.service = service;
  r.role = role;
  r.hash = sha256_hex(secret);
  r.prefix = secret.substr(0, 9);
  r.created_at = unix_now();
  r.expires_at = expires_in_s > 0 ? r.created_at + expires_in_s : 0;
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(),
         "INSERT INTO service_tokens (service, hash, prefix, created_at, expires_at, revoked, role)"
         " VALUES (?,?,?,?,?,0,?)");
  s.bind(1, r.service);
  s.bind(2, r.hash);
  s.bind(3, r.prefix);
  s.bind(4, r.created_at);
  s.bind(5, r.expires_at);
  s.bind(6, r.role);
  s.step();
  r.id = sqlite3_last_insert_rowid(db_.get());
  return {r, secret};
}

std::vector<TokenRecord> DeploymentStore::list_tokens(const std::string& service) {
  std::lock_guard lock(mutex_);
  std::string sql = std::string("SELECT ") + kTokenColumns + " FROM service_tokens";
  if (!service.empty()) sql += " WHERE service=?";
  sql += " ORDER BY id";
  Stmt s(db_.get(), sql.c_str());
  if (!service.empty()) s.bind(1, service);
  std::vector<TokenRecord> out;
  while (s.step()) out.push_back(read_token(s));
  return out;
}

std::optional<TokenRecord> DeploymentStore::get_token(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(),
         (std::string("SELECT ") + kTokenColumns + " FROM service_tokens WHERE id=?").c_str());
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_token(s);
}

bool DeploymentStore::revoke_token(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(), "UPDATE service_tokens SET revoked=1 WHERE id=?");
  s.bind(1, id);
  s.step();
  return sqlite3_changes(db_.get()) > 0;
}

std::int64_t DeploymentStore::data_version() {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(), "PRAGMA data_version");
  s.step();
  return s.integer(0);
}

std::vector<TokenRecord> DeploymentStore::live_tokens() {
  std::lock_guard lock(mutex_);
  Stmt s(db_.get(), (std::string("SELECT ") + kTokenColumns +
                     " FROM service_tokens WHERE revoked=0 AND (expires_at=0 OR expires_at>?)")
                        .c_str());
  s.bind(1, unix_now());
  std::vector<TokenRecord> out;
  while (s.step()) out.push_back(read_token(s));
  return out;
}

TokenVerifier::TokenVerifier(std::string db_path, std::string service, double refresh_s)
    : db_path_(std::move(db_path)), service_(std::move(service)), refresh_s_(refresh_s) {}

TokenCheck TokenVerifier::check(const std::string& secret) {
  auto match = find(secret);
  if (!match) return TokenCheck::kUnauthorized;
  return match->service == service_ ? TokenCheck::kOk : TokenCheck::kForbidden;
}

std::optional<TokenRecord> TokenVerifier::find(const std::string& secret) {
  if (secret.empty()) return std::nullopt;
  const std::string hash = sha256_hex(secret);
  std::lock_guard lock(mutex_);
  const double now = unix_now();
  auto reload = [&] {
    if (!store_) store_ = std::make_unique<DeploymentStore>(db_path_);
    live_ = store_->live_tokens();
    loaded_at_ = now;
  };
  // Every live hash is compared in full, so the time taken says nothing about which matched.
  auto lookup = [&]() -> const TokenRecord* {
    const TokenRecord* match = nullptr;
    for (const auto& t : live_) {
      bool equal = t.hash.size() == hash.size() &&
                   CRYPTO_memcmp(t.hash.data(), hash.data(), hash.size()) == 0;
      if (equal) match = &t;
    }
    return match;
  };
  // SQLite's data_version changes when another connection commits: a token made or revoked by
  // the server or the CLI counts from the next request on.
  if (!store_) store_ = std::make_unique<DeploymentStore>(db_path_);
  const std::int64_t version = store_->data_version();
  if (version != data_version_ || now - loaded_at_ >= refresh_s_) {
    reload();
    data_version_ = version;
  }
  const TokenRecord* match = lookup();
  if (!match || (match->expires_at > 0 && match->expires_at <= now)) return std::nullopt;
  return *match;
}

nlohmann::json token_json(const TokenRecord& t) {
  const bool expired = t.expires_at > 0 && t.expires_at <= unix_now();
  return {{"id", t.id},
          {"service", t.service},
          {"role", t.role},
          {"prefix", t.prefix},
          {"created_at", t.created_at},
          {"expires_at", t.expires_at},
          {"state", t.revoked ? "revoked"
                    : expired ? "expired"
                              : "active"}};
}

}  // namespace zenith::platform
