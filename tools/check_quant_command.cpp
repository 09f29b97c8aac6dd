#include "check_quant_command.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "check_quant_cases.h"
#include "check_quant_compare.h"
#include "check_quant_run.h"
#include "check_quant_tensors.h"
#include "dtype_names.h"
#include "text_format.h"
#include "timing.h"

namespace nktool {
namespace {

// The scales column: TOKEN/BLOCK "ok 0.31" (worst |error| as a fraction of the allowed one),
// MXFP8 "ok" or "ok 2b" (bytes legitimately one off at a power-of-two boundary), TENSOR "-"
// (its scale is an input); "N wrong!" when any scale is wrong.
std::string scales_cell(const QuantCheckCase& c, const normkit::ref::QuantComparison& q) {
  if (c.mode == NK_QUANT_TENSOR) return "-";
  if (q.scales_wrong) return strprintf("%lld wrong!", static_cast<long long>(q.scales_wrong));
  if (c.mode == NK_QUANT_MXFP8) {
    return q.scale_boundary ? strprintf("ok %lldb", static_cast<long long>(q.scale_boundary))
                            : "ok";
  }
  return strprintf("ok %.1e", q.worst_scale_error);
}

std::string amax_cell(const normkit::ref::QuantComparison& q) {
  if (!q.amax_checked) return "-";
  if (std::isinf(q.amax_error)) return "inf!";
  return strprintf("%.1e%s", q.amax_error, q.amax_error <= 1.0 ? "" : "!");
}

std::string y_t_cell(const normkit::ref::QuantComparison& q) {
  if (q.transposed_checked == 0) return "-";
  if (q.transposed_wrong) {
    return strprintf("%lld wrong!", static_cast<long long>(q.transposed_wrong));
  }
  return "ok";
}

std::string error_cell(const normkit::ref::Comparison& comparison) {
  const double e = comparison.worst_error;
  const char* mark = comparison.passed ? "" : "!";
  if (std::isinf(e)) return std::string("inf") + mark;
  if (e == 0) return std::string("exact") + mark;
  return strprintf("%.1e%s", e, mark);
}

void print_header() {
  std::printf("%4s %-5s %-8s %-4s %-10s %-9s %-12s %7s %4s %5s %-10s %-8s %-8s %-6s %-8s %s\n",
              "case", "on", "mode", "y", "shape", "x/w", "flags", "exact", "bnd", "wrong",
              "scales", "amax", "y_t", "res", "rstd", "result");
}

void print_case_details(const QuantCheckCase& c, QuantCaseTensors& t) {
  std::string quant = strprintf("quant %s block %lld", c.mode_name().c_str(),
                                static_cast<long long>(c.block));
  if (c.mode == NK_QUANT_TENSOR) {
    quant += strprintf(", scale %.9g", static_cast<double>(t.scale_value));
  }
  if (t.scale_ub > 0) quant += strprintf(", scale_ub %.9g", static_cast<double>(t.scale_ub));
  std::printf("     case %d: rows %lld hidden %lld, eps %g, weight %s, %s\n", c.id,
              static_cast<long long>(c.rows), static_cast<long long>(c.hidden),
              static_cast<double>(c.eps), c.has_weight ? "yes" : "no", quant.c_str());
  const struct {
    const char* name;
    HostTensor* t;
  } tensors[] = {{"x", &t.x},       {"residual", &t.residual},         {"weight", &t.weight},
                 {"bias", &t.bias}, {"scale", &t.scale},               {"y", &t.y},
                 {"residual_out", &t.residual_out},                    {"rstd", &t.rstd},
                 {"scales", &t.scales}, {"amax", &t.amax},             {"y_t", &t.y_t}};
  std::string line = "     layout (stride argument, byte offset from 256-aligned):";
  for (const auto& item : tensors) {
    if (item.t->empty()) continue;
    line += strprintf(" %s[%lld,+%zu]", item.name,
                      static_cast<long long>(item.t->stride_argument()), item.t->offset_bytes());
  }
  std::printf("%s\n", line.c_str());
}

// Totals of the codes over all passing and failing runs, for the closing line.
struct CodeTotals {
  long long codes = 0, exact = 0, boundary = 0, wrong = 0;
  void add(const normkit::ref::QuantComparison& q) {
    codes += q.elements;
    exact += q.exact;
    boundary += q.boundary;
    wrong += q.wrong;
  }
};

}  // namespace

void run_quant_check(const CheckOptions& options, const std::vector<BackendChoice>& backends,
                     CheckTally& tally) {
  const std::vector<QuantCheckCase> cases = make_quant_check_cases(options.quick, options.seed);
  std::printf("\nquantized forward: %zu cases%s (tensor, token, block32/64/128, mxfp8 x e4m3, "
              "e5m2, int8 where allowed)\n",
              cases.size(), options.quick ? " (quick)" : "");
  for (const BackendChoice& b : backends) {
    if (!b.available) tally.skipped += static_cast<int>(cases.size());
  }
  std::printf("codes judged by normkit::ref::compare_quant: exact, or 'bnd' = the grid neighbour "
              "of a value within float32 error of a rounding midpoint (at most 4 + codes/1000); "
              "scales: worst error / allowed; amax: error / allowed; res: residual_out must be "
              "exact; '!' = out of bounds\n%s\n",
              quant_flags_legend().c_str());
  print_header();

  CodeTotals totals;
  const Stopwatch total;
  for (const QuantCheckCase& c : cases) {
    QuantCaseTensors tensors = make_quant_case_tensors(c);
    const QuantExpected expected = compute_quant_expected(c, tensors);
    if (options.verbose) print_case_details(c, tensors);
    for (const BackendChoice& b : backends) {
      if (!b.available) continue;
      const Stopwatch case_time;
      const BackendRunResult run = run_quant_case_on_backend(c, tensors, b.backend);
      const std::string shape = std::to_string(c.rows) + "x" + std::to_string(c.hidden);
      std::string line = strprintf("%4d %-5s %-8s %-4s %-10s %-9s %-12s ", c.id, b.name,
                                   c.mode_name().c_str(), short_name(c.y_dtype), shape.c_str(),
                                   c.input_dtypes().c_str(), c.flags().c_str());
      QuantVerdict verdict;
      bool ok = false;
      if (run.ok) {
        verdict = judge_quant(c, tensors, expected);
        const normkit::ref::QuantComparison& q = verdict.codes;
        totals.add(q);
        line += strprintf("%7lld %4lld%s %5lld %-10s %-8s %-8s %-6s %-8s",
                          static_cast<long long>(q.exact), static_cast<long long>(q.boundary),
                          q.boundary > q.boundary_limit ? "!" : " ",
                          static_cast<long long>(q.wrong), scales_cell(c, q).c_str(),
                          amax_cell(q).c_str(), y_t_cell(q).c_str(),
                          verdict.has_residual_out ? error_cell(verdict.residual_out).c_str() : "-",
                          error_cell(verdict.rstd).c_str());
        ok = verdict.passed();
      } else {
        line += strprintf("%-73s", "(no results: the call failed)");
      }
      line += ok ? " PASS" : " FAIL";
      if (options.verbose) line += strprintf("  %.0f ms", case_time.elapsed_us() / 1000);
      std::printf("%s\n", line.c_str());
      if (!run.ok) std::printf("     error: %s\n", run.error.c_str());
      if (run.ok && (options.verbose || !verdict.codes.passed)) {
        std::printf("     codes %s\n", verdict.codes.describe().c_str());
      }
      if (verdict.has_residual_out && !verdict.residual_out.passed) {
        std::printf("     res  %s\n", verdict.residual_out.describe().c_str());
      }
      if (run.ok && !verdict.rstd.passed) {
        std::printf("     rstd %s\n", verdict.rstd.describe().c_str());
      }
      for (const std::string& p : verdict.problems) std::printf("     %s\n", p.c_str());
      if (!ok && !options.verbose) print_case_details(c, tensors);
      std::fflush(stdout);
      (ok ? tally.passed : tally.failed) += 1;
    }
  }
  std::printf("quantized forward: %.1f s; %lld codes: %lld exact, %lld boundary, %lld wrong\n",
              total.elapsed_us() / 1e6, totals.codes, totals.exact, totals.boundary,
              totals.wrong);
}

}  // namespace nktool
