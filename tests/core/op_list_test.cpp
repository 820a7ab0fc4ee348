// The op list (src/core/ops.def, core/op_list.h): ids, names, typed attributes.
#include <set>

#include "core/dispatch.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

TEST(OpList, EnumeratesEveryOpOnceInListOrder) {
  auto ops = dispatch::registered_ops();
  ASSERT_EQ(ops.size(), kOpCount);
  std::set<std::string> names;
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(size_t(ops[i].id), i);
    EXPECT_EQ(std::string(ops[i].name), op_name(ops[i].id));
    EXPECT_TRUE(names.insert(ops[i].name).second) << ops[i].name << " twice";
  }
  EXPECT_STREQ(op_name(OpId::conv2d), "conv2d");
  EXPECT_STREQ(OpTraits<OpId::sigmoid_backward>::name, "sigmoid_backward");
  static_assert(std::is_same_v<AttrsOf<OpId::conv2d_backward_data>, Conv2dAttrs>);
  static_assert(std::is_same_v<AttrsOf<OpId::relu>, NoAttrs>);
}

TEST(OpAttrs, EqualityTextAndHash) {
  Conv2dAttrs a;
  a.input_shape = {2, 3, 8, 8};
  a.weight_shape = {4, 3, 3, 3};
  a.output_shape = {2, 4, 6, 6};
  Conv2dAttrs b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(attrs_text(a), attrs_text(b));
  EXPECT_EQ(attrs_hash(a), attrs_hash(b));
  b.stride = {2, 2};
  EXPECT_FALSE(a == b);
  EXPECT_NE(attrs_text(a), attrs_text(b));
  EXPECT_NE(attrs_hash(a), attrs_hash(b));
  EXPECT_EQ(attrs_text(a),
            "input_shape=2,3,8,8;weight_shape=4,3,3,3;output_shape=2,4,6,6;stride=1,1;"
            "pad_begin=0,0;pad_end=0,0;dilation=1,1;groups=1;bias=0;");
  EXPECT_EQ(attrs_text(CrossEntropyAttrs{.label_smoothing = 0.1, .reduction = Reduction::kSum}),
            "ignore_index=-100;label_smoothing=0.10000000000000001;reduction=sum;weight_grad=1;");
  EXPECT_NE(attrs_hash(CrossEntropyAttrs{.weight_grad = false}), attrs_hash(CrossEntropyAttrs{}));
  EXPECT_EQ(attrs_text(CopyAttrs{.dtype = DType::bf16}), "dtype=bfloat16;");
  EXPECT_EQ(attrs_text(NoAttrs{}), "");
  // The same text in every process: FNV-1a, not std::hash.
  EXPECT_EQ(text_hash(""), 14695981039346656037ull);
  EXPECT_EQ(text_hash("a"), 12638187200555641996ull);
}

TEST(OpAttrs, ObserversSeeTypedAttributes) {
  struct Seen {
    std::vector<std::string> texts;
    std::vector<int64_t> dims;
  } seen;
  int id = dispatch::add_observer(
      [](void* user, const dispatch::OpEvent& e) {
        auto* s = static_cast<Seen*>(user);
        if (e.op != OpId::softmax) return;
        s->texts.push_back(e.attrs.text());
        s->dims.push_back(e.attrs.get<OpId::softmax>().dim);
      },
      &seen);
  ops::softmax(Tensor::randn({2, 3}), -1);
  dispatch::remove_observer(id);
  EXPECT_EQ(seen.texts, (std::vector<std::string>{"dim=1;"}));
  EXPECT_EQ(seen.dims, (std::vector<int64_t>{1}));
  EXPECT_TRUE(throws_with(
      [] {
        NoAttrs none;
        AttrsRef(OpId::relu, &none).get<OpId::conv2d>();
      },
      "[dispatch] attributes of 'relu' read as those of 'conv2d'"));
}
