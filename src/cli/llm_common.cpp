// Helpers of the LLM commands.
#include "cli/llm_common.h"

#include <cctype>

#include "zenith/cpu_features.h"

namespace zenith::cli {

std::vector<int64_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(start, comma - start);
    while (!item.empty() && std::isspace(uint8_t(item.front()))) item.erase(item.begin());
    while (!item.empty() && std::isspace(uint8_t(item.back()))) item.pop_back();
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    ZENITH_CHECK(!item.empty() && used == item.size() && id >= 0, "[", flag.substr(2), "] ", flag,
                 " '", text, "': item ", ids.size() + 1, " ('", item,
                 "') is not a token id (a non-negative integer); write ids as 1,2,3");
    ids.push_back(id);
    start = comma + 1;
  }
  return ids;
}

const char* const kLoadDtypeHelp =
    "weights at load: f32, bf16, f16, or q8_0, q4_0, q4_k (GGML blocks for the linear layers)";

std::shared_ptr<models::Llama> load_llama(const std::string& model_dir,
                                          const std::string& adapter_dir,
                                          const std::string& dtype) {
  const bool quantize = !dtype.empty() && dtype.front() == 'q';
  std::optional<DType> float_dtype;
  if (!dtype.empty() && !quantize) {
    float_dtype = dtype_from_name(dtype);
    ZENITH_CHECK(is_floating(*float_dtype),
                 "[--dtype] expected f32, bf16, f16, q8_0, q4_0 or q4_k, got ", dtype);
  }
  std::shared_ptr<models::Llama> model;
  if (models::is_quantized_dir(model_dir)) {
    ZENITH_CHECK(dtype.empty(), "[--dtype] ", model_dir, " is already quantized; drop --dtype ",
                 dtype);
    model = models::load_quantized(model_dir);
  } else {
    model = models::Llama::from_pretrained(model_dir, float_dtype);
  }
  if (!adapter_dir.empty()) models::load_lora(*model, adapter_dir);
  if (quantize) model->quantize(quant_from_name(dtype));
  // bf16 weights: bf16 products where the CPU has them (prefill; decode keeps the GEMV).
  if (float_dtype == DType::bf16 && bf16_arithmetic()) model->set_low_precision(DType::bf16);
  model->eval();
  return model;
}

std::string precision_note(const std::string& dtype) {
  if (dtype != "bf16") return "";
  if (!bf16_arithmetic())
    return "bf16 weights, float32 arithmetic (no avx512_bf16, or ZENITH_BF16_COMPUTE=0)";
  return "bf16 weights; prefill (linear layers and attention) in bf16 arithmetic (avx512_bf16, "
         "float32 accumulation), decode (up to 8 rows) in float32 arithmetic on the bf16 weights";
}

std::vector<int64_t> to_int64(const std::vector<int32_t>& ids) {
  return std::vector<int64_t>(ids.begin(), ids.end());
}

}  // namespace zenith::cli
