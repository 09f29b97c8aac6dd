#include "shapes.h"

#include <cctype>
#include <limits>
#include <stdexcept>

namespace nktool {

// Rows of the per-head norms count tokens times heads: a QK norm of 4096 tokens over 32 heads of
// 128 is 131072 x 128.
const ShapeSet kShapeSets[2] = {
    {"sweep",
     "29x17389,256x65536,1024x32768,2048x16384,4096x1024,4096x12288,8192x2048,8192x4096,"
     "8192x8192,16384x4096,1x4096,128x4096,4096x4096,32768x8192,16384x7168",
     "the sweep of PEERS.md"},
    {"models",
     // QK norms over heads of 128 (Qwen3: 32 query heads, 8 key heads; 4096 tokens, and 64 at
     // decode), of 256 (Gemma 3: 16 heads); the MLA ranks of DeepSeek-V3 (kv 512, q 1536) at
     // 16384 tokens; the hidden sizes of Qwen2.5-0.5B (896), Gemma 3 1B (1152), Gemma 2 2B
     // (2304), Gemma 3 4B (2560), Qwen2.5-7B (3584), Qwen2.5-14B (5120), Gemma 3 27B (5376)
     // and Mixtral 8x22B (6144).
     "131072x128,32768x128,2048x128,65536x256,16384x512,16384x1536,16384x896,16384x1152,"
     "8192x2304,8192x2560,8192x3584,8192x5120,4096x5376,4096x6144",
     "norms of current LLMs: per-head QK norms, MLA ranks, model hidden sizes"},
};
const char* const kDefaultBenchShapes = kShapeSets[0].shapes;

namespace {

// Strict positive integer: digits only, no sign, no overflow.
bool parse_positive(const std::string& text, int64_t* value) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  if (v < 1) return false;
  *value = v;
  return true;
}

Shape parse_one(const std::string& item) {
  const auto x = item.find_first_of("xX");
  Shape shape;
  if (x == std::string::npos || !parse_positive(item.substr(0, x), &shape.rows) ||
      !parse_positive(item.substr(x + 1), &shape.hidden)) {
    throw std::invalid_argument("bad shape '" + item +
                                "': expected ROWSxHIDDEN with positive integers, e.g. 4096x4096, "
                                "or the name of a shape set (sweep, models)");
  }
  if (shape.rows > std::numeric_limits<int64_t>::max() / shape.hidden) {
    throw std::invalid_argument("bad shape '" + item + "': rows * hidden overflows");
  }
  return shape;
}

}  // namespace

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> shapes;
  size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const auto end = comma == std::string::npos ? text.size() : comma;
    std::string item = text.substr(start, end - start);
    // Tolerate spaces around items ("29x17389, 4096x4096").
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.erase(0, 1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
    if (item.empty()) throw std::invalid_argument("empty item in shape list '" + text + "'");
    const ShapeSet* set = nullptr;
    for (const ShapeSet& s : kShapeSets) {
      if (item == s.name) set = &s;
    }
    if (set != nullptr) {
      const std::vector<Shape> named = parse_shapes(set->shapes);
      shapes.insert(shapes.end(), named.begin(), named.end());
    } else {
      shapes.push_back(parse_one(item));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return shapes;
}

std::string format_shape(const Shape& shape) {
  return std::to_string(shape.rows) + "x" + std::to_string(shape.hidden);
}

std::string shape_sets_help() {
  std::string text;
  for (const ShapeSet& s : kShapeSets) {
    if (!text.empty()) text += "; ";
    text += std::string(s.name) + " = " + s.what + " (" + s.shapes + ")";
  }
  return text;
}

}  // namespace nktool
