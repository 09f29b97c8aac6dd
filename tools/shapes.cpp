#include "shapes.h"

#include <cctype>
#include <limits>
#include <stdexcept>

namespace nktool {
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
                                "': expected ROWSxHIDDEN with positive integers, e.g. 4096x4096");
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
    shapes.push_back(parse_one(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return shapes;
}

std::string format_shape(const Shape& shape) {
  return std::to_string(shape.rows) + "x" + std::to_string(shape.hidden);
}

}  // namespace nktool
