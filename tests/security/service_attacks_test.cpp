// The attack suite against a real `zenith serve` over HTTPS (issue 13): bounded bodies in every
// transfer form, deep JSON, a PNG bomb; each asserts the answer and the service's peak memory
// growth.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <zlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "serve/serve_test_util.h"
#include "support/files.h"
#include "support/processes.h"
#include "support/raw_http.h"
#include "support/temp_dir.h"

namespace zt = zenith::testing;
using nlohmann::json;
using zt::RawConnection;
using zt::read_all;

namespace {

constexpr double kMaxGrowthMiB = 100;
// A 64 MiB body read whole grows the server by 64 MiB or more; bounded reading measured 8-17.
constexpr double kMaxBodyGrowthMiB = 32;

// zlib-compresses `rows` rows of `row_bytes` zero bytes each, as produced by `row` calls.
std::string zlib_zero_rows(std::size_t rows, std::size_t row_bytes) {
  z_stream z{};
  deflateInit(&z, 9);
  const std::string row(row_bytes, '\0');
  std::string out;
  char buf[1 << 16];
  for (std::size_t i = 0; i < rows; ++i) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(row.data()));
    z.avail_in = uInt(row.size());
    const int flush = i + 1 == rows ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      deflate(&z, flush);
      out.append(buf, sizeof buf - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  return out;
}

std::string png_chunk(const std::string& type, const std::string& data) {
  auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  };
  const std::string body = type + data;
  return be32(uint32_t(data.size())) + body +
         be32(uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
}

// A valid grayscale PNG of `side` x `side` black pixels: a few hundred kB that decode to side².
std::string png_bomb(uint32_t side) {
  auto be32 = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  };
  const std::string ihdr = be32(side) + be32(side) + std::string("\x08\x00\x00\x00\x00", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) +
         png_chunk("IDAT", zlib_zero_rows(side, side + 1)) + png_chunk("IEND", "");
}

std::string match(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? m[1].str() : "";
}

// `zenith serve CHECKPOINT` (HTTPS, self-signed certificate in DATA/tls) as a child process.
class ServiceAttacks : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string w = dir_.str(), z = ZENITH_BINARY;
    const std::string ckpt = zenith::serve::test::write_seedcnn_checkpoint(w);
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = w + "/serve.log";
      freopen(log.c_str(), "w", stdout);
      dup2(fileno(stdout), 2);
      execl(z.c_str(), "zenith", "serve", ckpt.c_str(), "--name", "sec", "--port", "0",
            "--port-file", (w + "/port").c_str(), "--data", (w + "/data").c_str(), "--max-batch",
            "4", nullptr);
      _exit(127);
    }
    zt::wait_for([&] { return std::atoi(read_all(w + "/port").c_str()) > 0; }, 60);
    port_ = std::atoi(read_all(w + "/port").c_str());
    ASSERT_GT(port_, 0) << read_all(w + "/serve.log");
    token_ = match(read_all(w + "/serve.log"), R"(token \(shown once\): (zt_[0-9a-f]{64}))");
    ASSERT_FALSE(token_.empty()) << read_all(w + "/serve.log");
    ca_ = w + "/data/tls/cert.pem";
  }
  void TearDown() override {
    if (pid_ > 0) kill(pid_, SIGKILL), waitpid(pid_, nullptr, 0);
  }
  std::string head(const std::string& path, const std::string& extra,
                   const std::string& type = "application/json") const {
    return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + token_ +
           "\r\nContent-Type: " + type + "\r\n" + extra + "\r\n";
  }
  zt::TempDir dir_{"service_attacks"};
  pid_t pid_ = 0;
  int port_ = 0;
  std::string token_, ca_;
};

}  // namespace

TEST_F(ServiceAttacks, BodiesAreBoundedInEveryTransferForm) {
  zt::RawReply r;
  double growth = zt::peak_rss_growth_mib(pid_, [&] {
    RawConnection c(port_, ca_);
    ASSERT_TRUE(c.connected());
    r = c.send_streamed(head("/v2/models/sec/infer", "Transfer-Encoding: chunked\r\n"), 64u << 20,
                        true);
  });
  EXPECT_EQ(r.status, 413) << r.head << r.body;
  EXPECT_LT(growth, kMaxBodyGrowthMiB);
  std::printf("[ probe    ] service, 64 MiB chunked body: HTTP %d, peak RSS growth %.1f MiB\n",
              r.status, growth);

  growth = zt::peak_rss_growth_mib(pid_, [&] {
    RawConnection c(port_, ca_);
    r = c.send_streamed(head("/v2/models/sec/infer", ""), 64u << 20, false);
  });
  EXPECT_EQ(r.status, 411) << r.head << r.body;
  EXPECT_LT(growth, kMaxBodyGrowthMiB);

  // 1 GiB of zeros, gzip-compressed, as the infer body.
  std::string zeros_gz;
  {
    z_stream z{};
    deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY);
    const std::string zeros(1 << 20, '0');
    char buf[1 << 16];
    for (int i = 0; i < 1024; ++i) {
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
      z.avail_in = uInt(zeros.size());
      do {
        z.next_out = reinterpret_cast<Bytef*>(buf);
        z.avail_out = sizeof buf;
        deflate(&z, i == 1023 ? Z_FINISH : Z_NO_FLUSH);
        zeros_gz.append(buf, sizeof buf - z.avail_out);
      } while (z.avail_out == 0);
    }
    deflateEnd(&z);
  }
  growth = zt::peak_rss_growth_mib(pid_, [&] {
    RawConnection c(port_, ca_);
    c.send(head("/v2/models/sec/infer", "Content-Encoding: gzip\r\nContent-Length: " +
                                            std::to_string(zeros_gz.size()) + "\r\n"));
    c.send(zeros_gz);
    r = c.read_reply(60);
  });
  EXPECT_EQ(r.status, 415) << r.head << r.body;
  EXPECT_LT(growth, kMaxGrowthMiB);
  std::printf(
      "[ probe    ] service, gzip bomb (%zu bytes -> 1 GiB): HTTP %d, peak RSS growth "
      "%.1f MiB\n",
      zeros_gz.size(), r.status, growth);
}

TEST_F(ServiceAttacks, DeepJsonIsRefused) {
  const std::string deep = std::string(100000, '[') + "0" + std::string(100000, ']');
  const std::string body =
      R"({"inputs": [{"name": "input", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": )" +
      deep + "}]}";
  RawConnection c(port_, ca_);
  c.send(head("/v2/models/sec/infer", "Content-Length: " + std::to_string(body.size()) + "\r\n") +
         body);
  auto r = c.read_reply(30);
  EXPECT_EQ(r.status, 400) << r.head << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("nested"), std::string::npos) << r.body.substr(0, 300);
  RawConnection again(port_, ca_);
  again.send("GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_EQ(again.read_reply(10).status, 200);
}

// A 400 kB PNG that decodes to 20000 x 20000 pixels is refused from its header.
TEST_F(ServiceAttacks, PngBombIsRefusedBeforeDecoding) {
  const std::string bomb = png_bomb(20000);
  ASSERT_LT(bomb.size(), 8u << 20);
  zt::RawReply r;
  const double growth = zt::peak_rss_growth_mib(pid_, [&] {
    RawConnection c(port_, ca_);
    c.send(head("/v2/models/sec/classify",
                "Content-Length: " + std::to_string(bomb.size()) + "\r\n", "image/png") +
           bomb);
    r = c.read_reply(120);
  });
  EXPECT_EQ(r.status, 413) << r.head << r.body;
  EXPECT_NE(r.body.find("20000x20000"), std::string::npos) << r.body;
  EXPECT_LT(growth, kMaxGrowthMiB);
  std::printf(
      "[ probe    ] service, PNG bomb (%zu bytes, 20000x20000): HTTP %d, peak RSS growth "
      "%.1f MiB\n",
      bomb.size(), r.status, growth);
}
