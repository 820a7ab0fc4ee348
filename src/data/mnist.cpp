// MNIST and Fashion-MNIST: IDX files (big-endian magic 0x0000080<ndim>, ndim big-endian u32
// sizes, then uint8 data), gzipped or not.
#include <cstdio>
#include <filesystem>

#include "data/file_reader.h"
#include "data/image_array.h"
#include "zenith/data.h"

namespace zenith::dataset {

namespace {

constexpr int64_t kNumClasses = 10;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

// Parses an IDX file of uint8 with `ndim` dimensions; returns the sizes and the data offset.
std::vector<int64_t> parse_idx_header(const std::string& bytes, const std::string& path,
                                      uint32_t ndim) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const uint32_t expected = 0x800u | ndim;
  ZENITH_CHECK(bytes.size() >= 4, "[idx] ", path, ": file is ", bytes.size(),
               " bytes, too short for the magic number at offset 0");
  uint32_t magic = detail::read_be32(p);
  ZENITH_CHECK(magic == expected, "[idx] ", path, ": bad magic ", hex32(magic),
               " at offset 0, expected ", hex32(expected));
  ZENITH_CHECK(bytes.size() >= 4 + 4 * size_t(ndim), "[idx] ", path,
               ": truncated header: ", bytes.size(), " bytes, the ", ndim, " sizes end at offset ",
               4 + 4 * ndim);
  std::vector<int64_t> dims;
  uint64_t total = 1;
  for (uint32_t d = 0; d < ndim; ++d) {
    dims.push_back(detail::read_be32(p + 4 + 4 * d));
    total *= uint64_t(dims.back());
  }
  uint64_t header = 4 + 4 * uint64_t(ndim);
  ZENITH_CHECK(bytes.size() >= header + total, "[idx] ", path, ": truncated at offset ",
               bytes.size(), ": the header promises ", total, " data bytes ending at offset ",
               header + total);
  ZENITH_CHECK(bytes.size() == header + total, "[idx] ", path, ": ", bytes.size() - header - total,
               " unexpected trailing bytes at offset ", header + total);
  return dims;
}

// The usual name, the gzipped one, and the "t10k-images.idx3-ubyte" spelling of some mirrors.
std::vector<std::string> split_names(const std::string& prefix, const char* kind) {
  std::string base = prefix + "-" + kind;
  std::string dotted = base;
  dotted[dotted.find("-idx")] = '.';
  return {base, base + ".gz", dotted, dotted + ".gz"};
}

std::string split_file(const std::string& dir, const std::string& prefix, const char* kind,
                       const char* component) {
  return detail::find_file(dir, split_names(prefix, kind), component);
}

bool has_split(const std::string& dir, const std::string& prefix) {
  for (const auto& n : split_names(prefix, "images-idx3-ubyte"))
    if (std::filesystem::is_regular_file(std::filesystem::path(dir) / n)) return true;
  return false;
}

struct Split {
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  int64_t rows = 0, cols = 0;
};

Split load_split(const std::string& dir, const std::string& prefix, const char* component) {
  std::string image_path = split_file(dir, prefix, "images-idx3-ubyte", component);
  std::string label_path = split_file(dir, prefix, "labels-idx1-ubyte", component);
  std::string image_bytes = detail::read_maybe_gzip(image_path, "idx");
  std::string label_bytes = detail::read_maybe_gzip(label_path, "idx");
  auto idims = parse_idx_header(image_bytes, image_path, 3);
  auto ldims = parse_idx_header(label_bytes, label_path, 1);
  ZENITH_CHECK(idims[0] == ldims[0], "[idx] ", label_path, ": ", ldims[0], " labels but ",
               image_path, " has ", idims[0], " images");
  Split s;
  s.rows = idims[1];
  s.cols = idims[2];
  s.images.assign(image_bytes.begin() + 16, image_bytes.end());
  s.labels.resize(size_t(ldims[0]));
  for (size_t i = 0; i < s.labels.size(); ++i) {
    uint8_t v = uint8_t(label_bytes[8 + i]);
    ZENITH_CHECK(v < kNumClasses, "[idx] ", label_path, ": label ", int(v), " at offset ", 8 + i,
                 " is out of range [0, ", kNumClasses, ")");
    s.labels[i] = v;
  }
  return s;
}

Dataset load_idx_dataset(const std::string& dir, const std::string& usage, const char* component,
                         const std::string& hint) {
  detail::require_directory(dir, component, hint);
  ZENITH_CHECK(usage == "train" || usage == "test" || usage == "all", "[", component,
               "] unknown usage '", usage, "' (known: train, test, all)");
  // As MindSpore: "train" and "test" need their split; "all" reads the splits the folder holds
  // (the tutorials' MNIST_Data/train and MNIST_Data/test each hold one).
  std::vector<std::string> prefixes;
  if (usage == "train" || (usage == "all" && has_split(dir, "train"))) prefixes.push_back("train");
  if (usage == "test" || (usage == "all" && has_split(dir, "t10k"))) prefixes.push_back("t10k");
  ZENITH_CHECK(!prefixes.empty(), "[", component, "] ", dir,
               ": holds neither train-images-idx3-ubyte nor t10k-images-idx3-ubyte (nor their "
               ".gz); usage 'all' reads whichever of the two splits is there");
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  int64_t rows = 0, cols = 0;
  for (const auto& prefix : prefixes) {
    Split s = load_split(dir, prefix, component);
    ZENITH_CHECK(rows == 0 || (rows == s.rows && cols == s.cols), "[", component, "] ", dir,
                 ": train and test images differ in size");
    rows = s.rows;
    cols = s.cols;
    images.insert(images.end(), s.images.begin(), s.images.end());
    labels.insert(labels.end(), s.labels.begin(), s.labels.end());
  }
  Tensor all = Tensor::empty({int64_t(labels.size()), rows, cols, 1}, DType::u8);
  if (!images.empty()) std::memcpy(all.raw_data(), images.data(), images.size());
  return Dataset(std::make_shared<detail::ImageArrayNode>(all, std::move(labels)));
}

}  // namespace

Dataset MnistDataset(const std::string& dataset_dir, const std::string& usage) {
  return load_idx_dataset(dataset_dir, usage, "mnist",
                          "MNIST is not packaged in Debian; put the four IDX files there");
}

Dataset FashionMnistDataset(const std::string& dataset_dir, const std::string& usage) {
  return load_idx_dataset(dataset_dir, usage, "fashion-mnist",
                          "the Debian package dataset-fashion-mnist provides Fashion-MNIST in "
                          "/usr/share/datasets/fashion-mnist: apt-get install "
                          "dataset-fashion-mnist");
}

}  // namespace zenith::dataset
