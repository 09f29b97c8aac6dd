#include "bench_report.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_remeasure.h"
#include "dtype_names.h"
#include "json_writer.h"
#include "normkit/normkit.h"
#include "text_format.h"

extern char** environ;  // POSIX

namespace nktool {
namespace {

// The launch-configuration knobs set in the environment (NK_TUNE_*, docs/notes.md), so that a
// result says which variant it measured.
std::vector<std::pair<std::string, std::string>> tuning_knobs() {
  std::vector<std::pair<std::string, std::string>> knobs;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "NK_TUNE_", 8) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq) knobs.emplace_back(std::string(*e, static_cast<size_t>(eq - *e)), eq + 1);
  }
  return knobs;
}

// Derived numbers of one pass against the copy ceiling.
struct PassNumbers {
  double gbps = 0, percent_of_copy = 0, floor_us = 0;
};

PassNumbers derive(const PassTiming& t, const CopyCeiling& copy) {
  PassNumbers n;
  if (!t.measured) return n;
  n.gbps = t.bytes / (t.us.median * 1e-6) / 1e9;
  n.percent_of_copy = copy.gbps > 0 ? 100.0 * n.gbps / copy.gbps : 0;
  n.floor_us = copy.gbps > 0 ? t.bytes / (copy.gbps * 1e9) * 1e6 : 0;
  return n;
}

// The pass's time as a percentage of a same-size copy's (--same-size-copy): 100 = as fast as a
// copy of its bytes timed the same way.
double percent_of_same_size_copy(const PassTiming& t) {
  return t.copy_measured && t.us.median > 0 ? 100.0 * t.copy_us.median / t.us.median : 0;
}

std::string pass_cells(const PassTiming& t, const CopyCeiling& copy, bool same_size_copy) {
  std::string cells;
  if (!t.measured) {
    cells = strprintf("%9s %9s %7s %9s", "-", "-", "-", "-");
  } else {
    const PassNumbers n = derive(t, copy);
    cells = strprintf("%9.2f %9.1f %6.1f%% %9.2f", t.us.median, n.gbps, n.percent_of_copy,
                      n.floor_us);
  }
  if (same_size_copy) {
    cells += t.copy_measured ? strprintf(" %9.2f %6.1f%%", t.copy_us.median,
                                         percent_of_same_size_copy(t))
                             : strprintf(" %9s %7s", "-", "-");
  }
  return cells;
}

void write_pass(JsonWriter& j, const PassTiming& t, const CopyCeiling& copy) {
  if (!t.measured) {
    j.null();
    return;
  }
  const PassNumbers n = derive(t, copy);
  j.begin_object();
  j.field("median_us", t.us.median);
  j.field("min_us", t.us.min);
  j.field("p90_us", t.us.p90);
  j.field("steady", !unsteady(t));  // spread_too_wide_us: see the table's "unsteady" lines
  if (t.remeasured) {  // these figures are a second run's; the first, unsteady one:
    j.key("first_run");
    j.begin_object();
    j.field("median_us", t.first_us.median);
    j.field("min_us", t.first_us.min);
    j.field("p90_us", t.first_us.p90);
    j.end_object();
  }
  j.field("reps", t.us.count);
  j.field("bytes", static_cast<int64_t>(t.bytes));
  j.field("gbps", n.gbps);
  j.field("percent_of_copy", n.percent_of_copy);
  j.field("floor_us", n.floor_us);
  if (t.workspace_bytes) j.field("workspace_bytes", static_cast<int64_t>(t.workspace_bytes));
  if (!t.explain.empty()) j.field("explain", t.explain);
  if (t.copy_measured) {
    j.field("same_size_copy_us", t.copy_us.median);
    j.field("percent_of_same_size_copy", percent_of_same_size_copy(t));
  }
  j.end_object();
}

}  // namespace

void print_bench_header(std::FILE* out, const BenchReport& r) {
  std::fprintf(out, "normkit bench: normkit %s, backend %s\n", nk_version(), r.backend.c_str());
  std::fprintf(out, "device:  %s\n", r.device.c_str());
  std::fprintf(out, "date:    %s\n", r.date_utc.c_str());
  std::string backward_outputs = "dx";
  if (r.config.weight) backward_outputs += r.config.bias ? ", dweight" : " and dweight";
  if (r.config.bias) backward_outputs += " and dbias";
  std::fprintf(out, "inputs:  %s, random values, %s, eps %g%s%s\n",
               short_name(r.config.dtype), bench_inputs_text(r.config).c_str(),
               static_cast<double>(r.config.eps),
               r.config.residual ? ", fused residual add (dresidual_out in the backward)" : "",
               r.config.bwd ? ("; backward computes " + backward_outputs).c_str() : "");
  if (r.config.quant != NK_QUANT_NONE) {
    std::fprintf(out, "quant:   %s", nk_quant_mode_name(r.config.quant));
    if (r.config.quant == NK_QUANT_BLOCK) std::fprintf(out, " (blocks of %lld)", static_cast<long long>(r.config.quant_block));
    std::fprintf(out, ", y %s, scale 1, amax written%s\n", short_name(r.config.quant_dtype),
                 r.config.transposed ? ", y_t (transposed y) written" : "");
  }
  const auto knobs = tuning_knobs();
  if (!knobs.empty()) {
    std::fprintf(out, "tuning: ");
    for (const auto& [name, value] : knobs) {
      std::fprintf(out, " %s=%s", name.c_str(), value.c_str());
    }
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "timing:  %s\n", r.timing_method.c_str());
  std::fprintf(out, "copy:    %.1f GB/s (%s)\n", r.copy.gbps, r.copy.method.c_str());
  std::fprintf(out, "bytes:   fwd = %s; bwd = %s (rstd not counted)\n",
               r.config.fwd ? fwd_bytes_formula(r.config).c_str() : "(not timed)",
               r.config.bwd ? bwd_bytes_formula(r.config).c_str() : "(not timed)");
  std::fprintf(out, "floor:   bytes / copy bandwidth\n");
  if (r.config.same_size_copy) {
    std::fprintf(out, "copy us: a copy moving the pass's bytes (half read, half written), timed as "
                      "the pass is; %% copy = its time / the pass's\n");
  }
  for (const std::string& note : r.notes) std::fprintf(out, "note:    %s\n", note.c_str());
}

void print_bench_table_header(std::FILE* out, const BenchConfig& c) {
  std::fprintf(out, "\n%-12s", "shape");
  if (c.fwd) {
    std::fprintf(out, " %9s %9s %7s %9s", "fwd us", "fwd GB/s", "fwd %", "floor us");
    if (c.same_size_copy) std::fprintf(out, " %9s %7s", "copy us", "% copy");
  }
  if (c.bwd) {
    std::fprintf(out, "   %9s %9s %7s %9s", "bwd us", "bwd GB/s", "bwd %", "floor us");
    if (c.same_size_copy) std::fprintf(out, " %9s %7s", "copy us", "% copy");
  }
  std::fprintf(out, "\n");
}

void print_bench_row(std::FILE* out, const BenchReport& r, const ShapeResult& row, bool explain) {
  std::fprintf(out, "%-12s", format_shape(row.shape).c_str());
  if (!row.error.empty()) {
    std::fprintf(out, " FAILED: %s\n", row.error.c_str());
    return;
  }
  if (!row.skipped.empty()) {
    std::fprintf(out, " skipped: %s\n", row.skipped.c_str());
    return;
  }
  const bool copies = r.config.same_size_copy;
  if (r.config.fwd) std::fprintf(out, " %s", pass_cells(row.fwd, r.copy, copies).c_str());
  if (r.config.bwd) std::fprintf(out, "   %s", pass_cells(row.bwd, r.copy, copies).c_str());
  std::fprintf(out, "\n");
  if (explain) {
    if (!row.fwd.explain.empty()) std::fprintf(out, "    fwd: %s\n", row.fwd.explain.c_str());
    if (!row.bwd.explain.empty()) std::fprintf(out, "    bwd: %s\n", row.bwd.explain.c_str());
  }
  for (const auto& [name, pass] : {std::pair<const char*, const PassTiming*>{"fwd", &row.fwd},
                                   {"bwd", &row.bwd}}) {
    if (pass->remeasured) {
      std::fprintf(out,
                   "    measured again: %s's first median %.2f us lay far above its fastest "
                   "sample (%.2f us, p90 %.2f)\n",
                   name, pass->first_us.median, pass->first_us.min, pass->first_us.p90);
    }
    if (!unsteady(*pass)) continue;
    std::fprintf(out,
                 "    unsteady: %s median %.2f us against a fastest sample of %.2f us (p90 %.2f): "
                 "%s\n",
                 name, pass->us.median, pass->us.min, pass->us.p90,
                 pass->remeasured ? "twice, so most likely this plan's time varies"
                                  : "the run was disturbed or this plan's time varies; measure "
                                    "it again to tell");
  }
  std::fflush(out);
}

void write_bench_json(std::ostream& file, const std::string& path, const BenchReport& r) {
  JsonWriter j(file);
  j.begin_object();
  j.field("tool", "normkit bench");
  j.field("normkit_version", nk_version());
  j.field("command", r.command);
  j.field("date_utc", r.date_utc);
  j.field("backend", r.backend);
  j.field("device", r.device);
  j.field("timing", r.timing_method);
  j.key("notes");
  j.begin_array();
  for (const std::string& note : r.notes) j.value(note);
  j.end_array();
  j.key("config");
  j.begin_object();
  j.field("dtype", short_name(r.config.dtype));
  j.field("weight_dtype", short_name(r.config.weight_dtype));
  j.field("out_dtype", short_name(r.config.out_dtype));
  j.field("weight", r.config.weight);
  j.field("bias", r.config.bias);
  j.field("zero_centered", r.config.zero_centered);
  j.field("eps", static_cast<double>(r.config.eps));
  j.field("residual", r.config.residual);
  j.field("quant", nk_quant_mode_name(r.config.quant));
  if (r.config.quant != NK_QUANT_NONE) {
    j.field("quant_dtype", short_name(r.config.quant_dtype));
    j.field("quant_block", r.config.quant_block);
    j.field("transposed", r.config.transposed);
  }
  j.field("forward", r.config.fwd);
  j.field("backward", r.config.bwd);
  j.field("reps", r.config.reps);
  j.field("same_size_copy", r.config.same_size_copy);
  j.field("fwd_bytes_formula", fwd_bytes_formula(r.config));
  j.field("bwd_bytes_formula", bwd_bytes_formula(r.config));
  j.key("tuning");  // NK_TUNE_* knobs set in the environment
  j.begin_object();
  for (const auto& [name, value] : tuning_knobs()) j.field(name, value);
  j.end_object();
  j.end_object();
  j.key("copy");
  j.begin_object();
  j.field("gbps", r.copy.gbps);
  j.field("buffer_bytes", static_cast<int64_t>(r.copy.buffer_bytes));
  j.field("median_us", r.copy.us.median);
  j.field("min_us", r.copy.us.min);
  j.field("p90_us", r.copy.us.p90);
  j.field("reps", r.copy.reps);
  j.field("method", r.copy.method);
  j.end_object();
  j.key("shapes");
  j.begin_array();
  for (const ShapeResult& row : r.shapes) {
    j.begin_object();
    j.field("rows", row.shape.rows);
    j.field("hidden", row.shape.hidden);
    if (!row.error.empty()) {
      j.field("error", row.error);
    } else if (!row.skipped.empty()) {
      j.field("skipped", row.skipped);
    } else {
      j.key("fwd");
      write_pass(j, row.fwd, r.copy);
      j.key("bwd");
      write_pass(j, row.bwd, r.copy);
    }
    j.end_object();
  }
  j.end_array();
  j.end_object();
  file.flush();
  if (!file || !j.done()) throw std::runtime_error("writing '" + path + "' failed");
}

}  // namespace nktool
