// `normkit bench`: time the forward and backward per shape against a measured copy ceiling.
#pragma once

#include <string>

namespace nktool {

struct BenchOptions {
  std::string backend = "auto";  // auto | cpu | cuda
  std::string shapes;            // empty: the default sweep
  std::string dtype = "bf16";
  std::string weight_dtype;      // empty: dtype (weight, bias, dweight and dbias)
  std::string out_dtype;         // empty: dtype (the forward's y)
  bool no_weight = false;        // neither weight nor dweight (scale 1)
  bool bias = false;             // forward reads a bias; backward writes dbias
  bool zero_centered = false;    // scale by (1 + weight), weight near 0
  std::string json_path;         // empty: no JSON
  bool explain = false;
  int reps = 100;
  bool reps_given = false;  // the CPU backend lowers the default when not given
  bool fwd_only = false, bwd_only = false;
  bool residual = false;
  std::string quant;        // empty: unquantized; else a parse_quant() name
  std::string quant_dtype = "e4m3";
  bool transposed = false;  // with quant tensor: also y_t
  bool same_size_copy = false;  // also time a copy of each pass's bytes, the same way
  bool keep_l2_priority = false;  // --keep-l2-priority: flush without demoting the inputs
  bool no_remeasure = false;  // keep unsteady passes' first figures (bench_remeasure.h)
  std::string command_line;  // recorded in the JSON
};

int run_bench(const BenchOptions& options);

}  // namespace nktool
