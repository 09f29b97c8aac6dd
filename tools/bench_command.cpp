#include "bench_command.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <memory>
#include <vector>

#include "bench_remeasure.h"
#include "bench_report.h"
#include "bench_runner.h"
#include "bench_types.h"
#include "dtype_names.h"
#include "normkit/normkit.h"
#include "shapes.h"
#include "text_format.h"

namespace nktool {

namespace {

// On the CPU the full sweep takes minutes; by default it runs the shapes up to this size.
constexpr int64_t kCpuDefaultMaxElements = int64_t{32} << 20;
constexpr int kCpuDefaultReps = 10;
// The random pool is tiled into larger tensors: 32 Mi values (64 MiB of bf16) are plenty.
constexpr size_t kMaxPoolElements = size_t{32} << 20;

}  // namespace

int run_bench(const BenchOptions& options) {
  BenchConfig config;
  config.dtype = parse_dtype(options.dtype);
  config.weight_dtype =
      options.weight_dtype.empty() ? config.dtype : parse_dtype(options.weight_dtype);
  config.out_dtype = options.out_dtype.empty() ? config.dtype : parse_dtype(options.out_dtype);
  config.weight = !options.no_weight;
  config.bias = options.bias;
  config.zero_centered = options.zero_centered;
  if (options.no_weight && options.zero_centered) {
    throw std::runtime_error("--zero-centered scales by 1 + weight: drop --no-weight");
  }
  config.residual = options.residual;
  config.fwd = !options.bwd_only;
  config.bwd = !options.fwd_only;
  config.reps = options.reps;
  config.same_size_copy = options.same_size_copy;
  config.demote_inputs = !options.keep_l2_priority;
  if (!options.quant.empty()) {
    const QuantChoice q = parse_quant(options.quant);
    config.quant = q.mode;
    config.quant_block = q.block;
    config.quant_dtype = parse_quant_dtype(options.quant_dtype);
    if (options.bwd_only) throw std::runtime_error("--quant times the forward; drop --bwd-only");
    if (!options.out_dtype.empty()) {
      throw std::runtime_error("--out-dtype: with --quant, y is in --quant-dtype");
    }
    config.bwd = false;
    config.transposed = options.transposed;
    if (options.transposed && q.mode != NK_QUANT_TENSOR) {
      throw std::runtime_error("--transposed needs --quant tensor");
    }
  } else if (options.transposed) {
    throw std::runtime_error("--transposed needs --quant tensor");
  }

  std::string backend = options.backend;
  if (backend == "auto") backend = nk_cuda_device_count() > 0 ? "cuda" : "cpu";
  if (backend == "cuda" && nk_cuda_device_count() == 0) {
    throw std::runtime_error(nk_has_cuda_build()
                                 ? "--backend cuda: no CUDA device is available"
                                 : "--backend cuda: this normkit was built without CUDA");
  }
  // Open the JSON file now, so an unwritable path fails before a long run rather than after.
  std::ofstream json;
  if (!options.json_path.empty()) {
    json.open(options.json_path);
    if (!json) throw std::runtime_error("--json: cannot open '" + options.json_path + "' for writing");
  }

  BenchReport report;
  report.backend = backend;
  std::vector<Shape> shapes = parse_shapes(options.shapes.empty() ? kDefaultBenchShapes
                                                                  : options.shapes);
  if (backend == "cpu") {
    if (options.shapes.empty()) {
      const size_t all = shapes.size();
      shapes.erase(std::remove_if(shapes.begin(), shapes.end(),
                                  [](const Shape& s) { return s.elements() > kCpuDefaultMaxElements; }),
                   shapes.end());
      report.notes.push_back(strprintf("CPU backend: %zu of the %zu default shapes (those with "
                                       "<= 32 Mi elements); pass --shapes for others",
                                       shapes.size(), all));
    }
    if (!options.reps_given) {
      config.reps = kCpuDefaultReps;
      report.notes.push_back(strprintf("CPU backend: %d repetitions by default (--reps to change)",
                                       kCpuDefaultReps));
    }
    if (options.explain) {
      report.notes.push_back("--explain shows CUDA launch configurations; the CPU backend has none");
    }
  }
  report.config = config;
  report.command = options.command_line;
  report.date_utc = utc_timestamp();

  int64_t largest = 1;
  for (const Shape& s : shapes) largest = std::max(largest, s.elements());
  const size_t pool = std::min(static_cast<size_t>(largest), kMaxPoolElements);
  std::fprintf(stderr, "normkit bench: generating %zu random %s values...\n", pool,
               short_name(config.dtype));
  std::unique_ptr<BenchRunner> runner = backend == "cuda" ? make_cuda_runner(config, pool)
                                                          : make_cpu_runner(config, pool);
  report.device = runner->device_name();
  report.timing_method = runner->timing_method();
  std::fprintf(stderr, "normkit bench: measuring the copy bandwidth...\n");
  report.copy = runner->measure_copy();

  print_bench_header(stdout, report);
  print_bench_table_header(stdout, config);
  int failures = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::fprintf(stderr, "normkit bench: [%zu/%zu] %s\n", i + 1, shapes.size(),
                 format_shape(shapes[i]).c_str());
    ShapeResult row;
    row.skipped = bench_skip_reason(shapes[i], config);
    try {
      if (row.skipped.empty()) row = runner->run(shapes[i], options.explain);
      if (!options.no_remeasure && row.skipped.empty() && any_unsteady(row)) {
        std::fprintf(stderr, "normkit bench: %s: samples spread too widely, measuring again\n",
                     format_shape(shapes[i]).c_str());
        take_remeasured(row, runner->run(shapes[i], options.explain));
      }
      row.shape = shapes[i];
      if (config.same_size_copy && row.skipped.empty()) {
        for (PassTiming* pass : {&row.fwd, &row.bwd}) {
          if (!pass->measured) continue;
          pass->copy_us = runner->time_copy(pass->bytes);
          pass->copy_measured = true;
        }
      }
    } catch (const std::exception& e) {
      row.shape = shapes[i];
      row.error = e.what();
      ++failures;
    }
    print_bench_row(stdout, report, row, options.explain);
    report.shapes.push_back(row);
  }

  if (!options.json_path.empty()) {
    write_bench_json(json, options.json_path, report);
    std::fprintf(stderr, "normkit bench: wrote %s\n", options.json_path.c_str());
  }
  const RemeasureCounts counts = count_remeasure(report.shapes);
  if (counts.remeasured) {
    std::fprintf(stderr, "normkit bench: %d pass%s measured again (the \"measured again\" lines; "
                         "JSON first_run)\n",
                 counts.remeasured, counts.remeasured == 1 ? "" : "es");
  }
  if (counts.unsteady) {
    std::fprintf(stderr,
                 "normkit bench: %d pass%s spread too widely to trust the median (the "
                 "\"unsteady\" lines; JSON \"steady\": false)\n",
                 counts.unsteady, counts.unsteady == 1 ? "'s samples" : "es' samples");
  }
  if (failures) {
    std::fprintf(stderr, "normkit bench: %d of %zu shapes failed\n", failures, shapes.size());
    return 1;
  }
  return 0;
}

}  // namespace nktool
