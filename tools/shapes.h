// Parsing of the `--shapes` option: a comma-separated list of ROWSxHIDDEN items and names of
// shape sets ("sweep", "models"), e.g. "models,29x17389".
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

// The shape sets that `--shapes` accepts by name, each a list in ROWSxHIDDEN form.
struct ShapeSet {
  const char* name;
  const char* shapes;
  const char* what;  // one line for --help
};
// "sweep": the sweep of ../shared/PEERS.md (the bench's default); "models": the norms of current
// LLMs that the sweep leaves out (per-head QK norms, MLA ranks, hidden sizes of common models).
extern const ShapeSet kShapeSets[2];
extern const char* const kDefaultBenchShapes;  // the "sweep" set

// "29x17389,models" -> {29, 17389} and the "models" set's shapes, in order. Throws
// std::invalid_argument with a message naming the bad item.
std::vector<Shape> parse_shapes(const std::string& text);

std::string format_shape(const Shape& shape);  // "29x17389"

// "sweep (the sweep of PEERS.md, the default: 29x17389,...), models (...: 131072x128,...)"
std::string shape_sets_help();

}  // namespace nktool
