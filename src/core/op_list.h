// OpId: the closed list of ops of core/ops.def as an enum, with each op's name and the type of
// its attributes (AttrsOf<OpId::conv2d> is Conv2dAttrs), all checked at compile time.
#pragma once

#include <cstddef>
#include <string>

#include "core/op_attrs.h"

namespace zenith {

enum class OpId : uint16_t {
#define ZENITH_OP(name, Attrs) name,
#include "core/ops.def"
#undef ZENITH_OP
};

inline constexpr size_t kOpCount = 0
#define ZENITH_OP(name, Attrs) +1
#include "core/ops.def"
#undef ZENITH_OP
    ;

// "conv2d"
const char* op_name(OpId op);

template <OpId op>
struct OpTraits;
#define ZENITH_OP(op_id, AttrsStruct)           \
  template <>                                   \
  struct OpTraits<OpId::op_id> {                \
    using Attrs = AttrsStruct;                  \
    static constexpr const char* name = #op_id; \
  };
#include "core/ops.def"
#undef ZENITH_OP

template <OpId op>
using AttrsOf = typename OpTraits<op>::Attrs;

// The attributes of a dispatched op as observers see them: typed access for the op they belong
// to, and the stable text form for any op.
class AttrsRef {
 public:
  AttrsRef(OpId op, const void* attrs) : op_(op), attrs_(attrs) {}
  OpId op() const { return op_; }
  template <OpId op>
  const AttrsOf<op>& get() const;
  std::string text() const;                    // attrs_text of the typed struct
  const void* data() const { return attrs_; }  // the struct, untyped (graph capture copies it)

 private:
  OpId op_;
  const void* attrs_;
};

[[noreturn]] void fail_attrs_mismatch(OpId have, OpId want);

template <OpId op>
const AttrsOf<op>& AttrsRef::get() const {
  if (op_ != op) fail_attrs_mismatch(op_, op);
  return *static_cast<const AttrsOf<op>*>(attrs_);
}

}  // namespace zenith
