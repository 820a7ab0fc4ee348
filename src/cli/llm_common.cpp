// Helpers of the LLM commands.
#include "cli/llm_common.h"

#include <cctype>

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

std::shared_ptr<models::Llama> load_llama(const std::string& model_dir,
                                          const std::string& adapter_dir) {
  auto model = models::Llama::from_pretrained(model_dir);
  if (!adapter_dir.empty()) models::load_lora(*model, adapter_dir);
  model->eval();
  return model;
}

std::vector<int64_t> to_int64(const std::vector<int32_t>& ids) {
  return std::vector<int64_t>(ids.begin(), ids.end());
}

}  // namespace zenith::cli
