// JsonLinesDataset: one JSON object per line; the listed keys become columns. A column is
// int64 when every value in the file is an integer, else float32.
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "zenith/data.h"

namespace zenith::dataset {

namespace {

struct Where {
  const std::string& path;
  size_t line;
  size_t offset;
};

// Shape of a number or a rectangular nested array of numbers; notes whether all are integers.
void infer_shape(const nlohmann::json& v, Shape& shape, size_t depth, bool& integral,
                 const Where& w, const std::string& key) {
  if (v.is_number()) {
    ZENITH_CHECK(depth == shape.size(), "[jsonl] ", w.path, ":", w.line, " (offset ", w.offset,
                 "): '", key, "' is a ragged array");
    integral = integral && v.is_number_integer();
    return;
  }
  ZENITH_CHECK(v.is_array(), "[jsonl] ", w.path, ":", w.line, " (offset ", w.offset, "): '", key,
               "' is ", v.type_name(), ", expected a number or an array of numbers");
  if (depth == shape.size()) shape.push_back(int64_t(v.size()));
  ZENITH_CHECK(shape[depth] == int64_t(v.size()), "[jsonl] ", w.path, ":", w.line, " (offset ",
               w.offset, "): '", key, "' is a ragged array");
  for (const auto& e : v) infer_shape(e, shape, depth + 1, integral, w, key);
}

void flatten(const nlohmann::json& v, std::vector<double>& out) {
  if (v.is_number()) {
    out.push_back(v.get<double>());
    return;
  }
  for (const auto& e : v) flatten(e, out);
}

class JsonLinesNode : public DatasetNode {
 public:
  JsonLinesNode(std::vector<Row> rows, std::vector<std::string> names)
      : rows_(std::move(rows)), names_(std::move(names)) {}
  int64_t size() const override { return int64_t(rows_.size()); }
  Row get(int64_t index, int64_t) const override {
    ZENITH_CHECK(index >= 0 && index < size(), "[jsonl] index ", index, " out of range [0, ",
                 size(), ")");
    Row row;
    for (const auto& t : rows_[size_t(index)]) row.push_back(t.clone());
    return row;
  }
  std::vector<std::string> column_names() const override { return names_; }

 private:
  std::vector<Row> rows_;
  std::vector<std::string> names_;
};

}  // namespace

Dataset JsonLinesDataset(const std::string& path, const std::vector<std::string>& columns) {
  ZENITH_CHECK(!columns.empty(), "[jsonl] ", path, ": no columns requested");
  std::string text = core::read_file(path, "jsonl");
  struct Parsed {
    std::vector<std::vector<double>> values;
    std::vector<Shape> shapes;
  };
  std::vector<Parsed> parsed;
  std::vector<bool> integral(columns.size(), true);
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    ++line_no;
    Where w{path, line_no, pos};
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      nlohmann::json obj;
      try {
        obj = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        ZENITH_FAIL("[jsonl] ", path, ":", line_no, " (offset ", pos,
                    "): invalid JSON: ", e.what());
      }
      ZENITH_CHECK(obj.is_object(), "[jsonl] ", path, ":", line_no, " (offset ", pos,
                   "): expected a JSON object");
      Parsed p;
      for (size_t c = 0; c < columns.size(); ++c) {
        ZENITH_CHECK(obj.contains(columns[c]), "[jsonl] ", path, ":", line_no, " (offset ", pos,
                     "): missing key '", columns[c], "'");
        Shape shape;
        bool is_int = true;
        infer_shape(obj[columns[c]], shape, 0, is_int, w, columns[c]);
        integral[c] = integral[c] && is_int;
        std::vector<double> v;
        flatten(obj[columns[c]], v);
        p.values.push_back(std::move(v));
        p.shapes.push_back(std::move(shape));
      }
      parsed.push_back(std::move(p));
    }
    pos = end + 1;
  }
  ZENITH_CHECK(!parsed.empty(), "[jsonl] ", path, ": no records");
  std::vector<Row> rows;
  rows.reserve(parsed.size());
  for (const auto& p : parsed) {
    Row row;
    for (size_t c = 0; c < columns.size(); ++c)
      row.push_back(
          Tensor::from_vector(p.values[c], p.shapes[c], integral[c] ? DType::i64 : DType::f32));
    rows.push_back(std::move(row));
  }
  return Dataset(std::make_shared<JsonLinesNode>(std::move(rows), columns));
}

}  // namespace zenith::dataset
