// Parsing of the `--shapes` option: "ROWSxHIDDEN[,ROWSxHIDDEN...]".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nktool {

struct Shape {
  int64_t rows = 0;
  int64_t hidden = 0;
  int64_t elements() const { return rows * hidden; }
};

// "29x17389" -> {29, 17389}. Throws std::invalid_argument with a message naming the bad item.
std::vector<Shape> parse_shapes(const std::string& text);

std::string format_shape(const Shape& shape);  // "29x17389"

}  // namespace nktool
