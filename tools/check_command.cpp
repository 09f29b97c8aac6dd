#include "check_command.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "check_backend_run.h"
#include "check_backends.h"
#include "check_cases.h"
#include "check_compare.h"
#include "check_quant_command.h"
#include "check_tensors.h"
#include "normkit/normkit.h"
#include "text_format.h"
#include "timing.h"

namespace nktool {
namespace {

std::string error_cell(const OutputCheck& o) {
  if (!o.present) return strprintf("%-9s", "-");
  const double e = o.comparison.worst_error;
  const char mark = o.comparison.passed ? ' ' : '!';
  if (std::isinf(e)) return strprintf("%-8s%c", "inf", mark);
  return strprintf("%-8.1e%c", e, mark);
}

void print_header() {
  std::printf("%4s %-5s %-12s %-15s %-9s %-9s%-9s%-9s%-9s%-9s%-9s %s\n", "case", "on", "shape",
              "dtypes x/w/y", "flags", "y", "res", "rstd", "dx", "dw", "db", "result");
}

void print_case_details(const CheckCase& c, CaseTensors& t) {
  std::printf("     case %d: rows %lld hidden %lld, eps %g, weight %s, dweight %s, dbias %s\n", c.id,
              static_cast<long long>(c.rows), static_cast<long long>(c.hidden),
              static_cast<double>(c.eps), c.has_weight ? "yes" : "no",
              c.want_dweight ? "yes" : "no", c.want_dbias ? "yes" : "no");
  const struct {
    const char* name;
    HostTensor* t;
  } tensors[] = {{"x", &t.x},        {"residual", &t.residual}, {"weight", &t.weight},
                 {"bias", &t.bias},  {"y", &t.y},               {"residual_out", &t.residual_out},
                 {"rstd", &t.rstd},  {"dy", &t.dy},             {"x(bwd)", &t.bwd_x},
                 {"dres_out", &t.dresidual_out},                {"dx", &t.dx},
                 {"dweight", &t.dweight}, {"dbias", &t.dbias}};
  std::string line = "     layout (stride argument, byte offset from 256-aligned):";
  for (const auto& item : tensors) {
    if (item.t->empty()) continue;
    line += strprintf(" %s[%lld,+%zu]", item.name, static_cast<long long>(item.t->stride_argument()),
                      item.t->offset_bytes());
  }
  std::printf("%s\n", line.c_str());
}

// The forward/backward cases with float outputs: one line per (case, backend).
void run_float_check(const CheckOptions& options, const std::vector<BackendChoice>& backends,
                     CheckTally& tally) {
  const std::vector<CheckCase> cases = make_check_cases(options.quick, options.seed);
  std::printf("forward and backward: %zu cases%s\n", cases.size(),
              options.quick ? " (quick)" : "");
  for (const BackendChoice& b : backends) {
    if (!b.available) tally.skipped += static_cast<int>(cases.size());
  }
  std::printf("errors: worst |actual - expected| / (|expected| + 1e-2 * rms(expected)) against a "
              "float64 reference; '!' = above tolerance\n%s\n",
              check_flags_legend().c_str());
  print_header();

  const Stopwatch total;
  for (const CheckCase& c : cases) {
    CaseTensors tensors = make_case_tensors(c);
    const ExpectedResults expected = compute_expected(c, tensors);
    if (options.verbose) print_case_details(c, tensors);
    for (const BackendChoice& b : backends) {
      if (!b.available) continue;
      const Stopwatch case_time;
      const BackendRunResult run = run_case_on_backend(c, tensors, b.backend);
      const std::string shape = std::to_string(c.rows) + "x" + std::to_string(c.hidden);
      std::string line = strprintf("%4d %-5s %-12s %-15s %-9s ", c.id, b.name, shape.c_str(),
                                   c.dtypes().c_str(), c.flags().c_str());
      bool ok = false;
      CaseVerdict verdict;
      if (run.ok) {
        verdict = judge(c, tensors, expected);
        for (const OutputCheck& o : verdict.outputs) line += error_cell(o);
        ok = verdict.passed();
      } else {
        line += strprintf("%-54s", "(no results: the call failed)");
      }
      line += ok ? " ok" : " FAIL";
      if (options.verbose) line += strprintf("  %.0f ms", case_time.elapsed_us() / 1000);
      std::printf("%s\n", line.c_str());
      if (!run.ok) std::printf("     error: %s\n", run.error.c_str());
      for (const std::string& p : verdict.problems) std::printf("     %s\n", p.c_str());
      for (const OutputCheck& o : verdict.outputs) {
        if (o.present && (options.verbose || !o.comparison.passed)) {
          std::printf("     %-4s %s\n", o.name, o.comparison.describe().c_str());
        }
      }
      if (!ok && !options.verbose) print_case_details(c, tensors);
      std::fflush(stdout);
      (ok ? tally.passed : tally.failed) += 1;
    }
  }
  std::printf("forward and backward: %.1f s\n", total.elapsed_us() / 1e6);
}

}  // namespace

int run_check(const CheckOptions& options) {
  const std::vector<BackendChoice> backends = choose_backends(options.backend);
  std::printf("normkit check: normkit %s, seed %llu%s%s, backends: %s\n", nk_version(),
              static_cast<unsigned long long>(options.seed), options.quick ? ", quick" : "",
              options.quant_only ? ", quantized forward only" : "",
              describe_backends(backends).c_str());
  bool any_available = false;
  for (const BackendChoice& b : backends) any_available = any_available || b.available;
  if (!any_available) {
    std::printf("check: 0 passed, 0 failed, all skipped (%s)\n",
                unavailable_reasons(backends).c_str());
    std::fprintf(stderr, "normkit check: nothing to check: no requested backend is available\n");
    return 1;
  }

  CheckTally tally;
  const Stopwatch total;
  if (!options.quant_only) run_float_check(options, backends, tally);
  run_quant_check(options, backends, tally);

  std::printf("%.1f s\n", total.elapsed_us() / 1e6);
  std::printf("check: %d passed, %d failed", tally.passed, tally.failed);
  if (tally.skipped) {
    std::printf(", %d skipped (%s)", tally.skipped, unavailable_reasons(backends).c_str());
  }
  std::printf("\n");
  return tally.failed == 0 && tally.passed > 0 ? 0 : 1;
}

}  // namespace nktool
