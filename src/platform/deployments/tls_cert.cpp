#include "platform/deployments/tls_cert.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <stdexcept>

#include "core/atomic_file.h"

namespace zenith::platform {

namespace fs = std::filesystem;

namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("[tls] cannot create a self-signed certificate: " + what);
}

// Writes PEM text produced by `write` (into a memory BIO) to `path` with `mode`, atomically.
template <typename WriteFn>
void write_pem(const std::string& path, unsigned mode, WriteFn write) {
  std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>> bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) fail("cannot encode " + path);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  core::write_file_atomic(path, std::string_view(data, size_t(n)), mode);
}

}  // namespace

bool is_ca_cert(const std::string& cert_pem) {
  std::unique_ptr<FILE, decltype(&fclose)> f(fopen(cert_pem.c_str(), "r"), &fclose);
  if (!f) return false;
  X509Ptr cert(PEM_read_X509(f.get(), nullptr, nullptr, nullptr));
  return cert && X509_check_ca(cert.get()) > 0;
}

TlsFiles ensure_self_signed_cert(const std::string& dir) {
  fs::create_directories(dir);
  TlsFiles files{dir + "/cert.pem", dir + "/key.pem"};
  int lock = open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) fail("cannot open " + dir + "/.lock");
  flock(lock, LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() { close(fd); }  // closing releases the flock
  } unlock{lock};
  if (fs::exists(files.cert) && fs::exists(files.key) && !is_ca_cert(files.cert)) return files;

  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) fail("EC key generation");
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  {
    std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> bn(BN_new());
    BN_rand(bn.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
    BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get()));
  }
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("zenith"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const std::string san = std::string("DNS:localhost,IP:127.0.0.1,IP:::1,DNS:") + host;
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_subject_alt_name, san.c_str()},
                            std::pair{NID_basic_constraints, "critical,CA:FALSE"},
                            std::pair{NID_key_usage, "critical,digitalSignature"},
                            std::pair{NID_ext_key_usage, "serverAuth"}}) {
    ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
    if (!ext || X509_add_ext(cert.get(), ext.get(), -1) != 1)
      fail("extension " + std::string(value));
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) fail("signing");
  write_pem(files.key, 0600, [&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  write_pem(files.cert, 0644, [&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
  return files;
}

}  // namespace zenith::platform
