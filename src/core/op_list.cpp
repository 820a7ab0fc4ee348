#include "core/op_list.h"

#include <array>
#include <cstdio>

namespace zenith {

namespace {
constexpr std::array<const char*, kOpCount> kOpNames = {
#define ZENITH_OP(name, Attrs) #name,
#include "core/ops.def"
#undef ZENITH_OP
};
}  // namespace

const char* op_name(OpId op) {
  size_t i = size_t(op);
  return i < kOpCount ? kOpNames[i] : "unknown_op";
}

void fail_attrs_mismatch(OpId have, OpId want) {
  ZENITH_FAIL("[dispatch] attributes of '", op_name(have), "' read as those of '", op_name(want),
              "'");
}

std::string AttrsRef::text() const {
  switch (op_) {
#define ZENITH_OP(name, Attrs) \
  case OpId::name:             \
    return attrs_text(*static_cast<const Attrs*>(attrs_));
#include "core/ops.def"
#undef ZENITH_OP
  }
  return {};
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::kNone:
      return "none";
    case Reduction::kMean:
      return "mean";
    case Reduction::kSum:
      return "sum";
  }
  return "?";
}

const char* batch_norm_impl_name(BatchNormImpl impl) {
  switch (impl) {
    case BatchNormImpl::kAuto:
      return "auto";
    case BatchNormImpl::kLoops:
      return "loops";
    case BatchNormImpl::kOnednn:
      return "onednn";
  }
  return "?";
}

uint64_t text_hash(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

namespace detail {

void append_field(std::string& out, const char* name, int64_t v) {
  out += name;
  out += '=';
  out += std::to_string(v);
  out += ';';
}

void append_field(std::string& out, const char* name, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  out += name;
  out += '=';
  out += buf;
  out += ';';
}

void append_field(std::string& out, const char* name, bool v) {
  out += name;
  out += v ? "=1;" : "=0;";
}

void append_field(std::string& out, const char* name, const std::vector<int64_t>& v) {
  out += name;
  out += '=';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  out += ';';
}

void append_field(std::string& out, const char* name, DType v) {
  out += name;
  out += '=';
  out += dtype_name(v);
  out += ';';
}

void append_field(std::string& out, const char* name, Reduction v) {
  out += name;
  out += '=';
  out += reduction_name(v);
  out += ';';
}

void append_field(std::string& out, const char* name, BatchNormImpl v) {
  out += name;
  out += '=';
  out += batch_norm_impl_name(v);
  out += ';';
}

}  // namespace detail
}  // namespace zenith
