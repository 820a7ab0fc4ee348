// Service tokens in the store: 256-bit secrets kept only as SHA-256, scoped to one service,
// expiry and revocation (src/platform/deployments/deployment_store.cpp).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "platform/deployments/deployment_store.h"
#include "serve_test_util.h"
#include "support/temp_dir.h"

namespace zenith::platform {
namespace {

using zenith::testing::TempDir;

TEST(ServiceTokens, SecretIs256BitsAndOnlyItsHashIsStored) {
  TempDir dir("tokens_hash");
  const std::string db = dir.str() + "/zenith.db";
  std::string secret;
  {
    DeploymentStore store(db);
    auto [record, s] = store.create_token("fmnist-api");
    secret = s;
    ASSERT_EQ(secret.size(), 3u + 64u);  // "zt_" + 32 bytes in hex
    EXPECT_EQ(secret.rfind("zt_", 0), 0u);
    EXPECT_EQ(record.hash, sha256_hex(secret));
    EXPECT_NE(store.create_token("fmnist-api").second, secret);  // fresh randomness each time
  }
  // Nothing in the database files holds the secret's random part.
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_EQ(s.str().find(secret.substr(3)), std::string::npos) << e.path();
  }
}

TEST(ServiceTokens, ScopedToOneServiceRevocableAndExpiring) {
  TempDir dir("tokens_scope");
  const std::string db = dir.str() + "/zenith.db";
  DeploymentStore store(db);
  auto [a, secret_a] = store.create_token("svc-a");
  auto [b, secret_b] = store.create_token("svc-b");
  auto [e, secret_e] = store.create_token("svc-a", /*expires_in_s=*/0.3);
  TokenVerifier verifier(db, "svc-a", /*refresh_s=*/0);
  EXPECT_EQ(verifier.check(secret_a), TokenCheck::kOk);
  EXPECT_EQ(verifier.check(secret_e), TokenCheck::kOk);
  EXPECT_EQ(verifier.check(secret_b), TokenCheck::kForbidden);
  EXPECT_EQ(verifier.check(""), TokenCheck::kUnauthorized);
  EXPECT_EQ(verifier.check(secret_a + "0"), TokenCheck::kUnauthorized);
  std::string wrong = secret_a;
  wrong[10] = wrong[10] == 'a' ? 'b' : 'a';
  EXPECT_EQ(verifier.check(wrong), TokenCheck::kUnauthorized);

  EXPECT_TRUE(store.revoke_token(a.id));
  EXPECT_FALSE(store.revoke_token(9999));
  EXPECT_EQ(verifier.check(secret_a), TokenCheck::kUnauthorized);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(verifier.check(secret_e), TokenCheck::kUnauthorized);  // expired
  auto tokens = store.list_tokens("svc-a");
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_TRUE(tokens[0].revoked);
  EXPECT_EQ(store.live_tokens().size(), 1u);  // only svc-b's
}

TEST(ServiceTokens, VerifierSeesRevocationAfterItsRefreshInterval) {
  TempDir dir("tokens_refresh");
  const std::string db = dir.str() + "/zenith.db";
  DeploymentStore store(db);
  auto [t, secret] = store.create_token("svc");
  TokenVerifier verifier(db, "svc", /*refresh_s=*/0.2);
  EXPECT_EQ(verifier.check(secret), TokenCheck::kOk);
  store.revoke_token(t.id);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(verifier.check(secret), TokenCheck::kUnauthorized);
}

TEST(ModelRegistry, VersionsCountFromOnePerName) {
  TempDir dir("registry");
  DeploymentStore store(dir.str() + "/zenith.db");
  EXPECT_EQ(store.add_model_version("a", "/p/a1", "h1").version, 1);
  EXPECT_EQ(store.add_model_version("a", "/p/a2", "h2").version, 2);
  EXPECT_EQ(store.add_model_version("b", "/p/b1", "h3").version, 1);
  EXPECT_EQ(store.next_model_version("a"), 3);
  auto versions = store.model_versions("a");
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[0].version, 2);  // newest first
  EXPECT_EQ(store.model_version("a", 1)->package_dir, "/p/a1");
  EXPECT_FALSE(store.model_version("a", 3));
}

}  // namespace
}  // namespace zenith::platform
