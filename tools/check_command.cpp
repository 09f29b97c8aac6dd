#include "check_command.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "check_backend_run.h"
#include "check_cases.h"
#include "check_compare.h"
#include "check_tensors.h"
#include "normkit/normkit.h"
#include "text_format.h"
#include "timing.h"

namespace nktool {
namespace {

struct BackendChoice {
  nk_backend backend;
  const char* name;
  bool available;
  std::string why_not;  // when unavailable
};

BackendChoice cuda_choice() {
  BackendChoice b{NK_BACKEND_CUDA, "cuda", false, ""};
  if (!nk_has_cuda_build()) b.why_not = "this normkit was built without CUDA";
  else if (nk_cuda_device_count() == 0) b.why_not = "no CUDA device is available";
  else b.available = true;
  return b;
}

std::vector<BackendChoice> choose_backends(const std::string& which) {
  std::vector<BackendChoice> list;
  if (which == "cpu" || which == "all") list.push_back({NK_BACKEND_CPU, "cpu", true, ""});
  if (which == "cuda" || which == "all") list.push_back(cuda_choice());
  return list;
}

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

}  // namespace

int run_check(const CheckOptions& options) {
  const std::vector<BackendChoice> backends = choose_backends(options.backend);
  const std::vector<CheckCase> cases = make_check_cases(options.quick, options.seed);

  std::string backend_list;
  for (const BackendChoice& b : backends) {
    backend_list += std::string(backend_list.empty() ? "" : ", ") + b.name +
                    (b.available ? "" : " (unavailable: " + b.why_not + ")");
  }
  std::printf("normkit check: normkit %s, seed %llu, %zu cases%s, backends: %s\n", nk_version(),
              static_cast<unsigned long long>(options.seed), cases.size(),
              options.quick ? " (quick)" : "", backend_list.c_str());
  int passed = 0, failed = 0, skipped = 0;
  std::string skip_reasons;
  for (const BackendChoice& b : backends) {
    if (b.available) continue;
    skipped += static_cast<int>(cases.size());
    skip_reasons += std::string(skip_reasons.empty() ? "" : "; ") + b.name + ": " + b.why_not;
  }

  if (skipped == static_cast<int>(cases.size() * backends.size())) {
    std::printf("check: 0 passed, 0 failed, %d skipped (%s)\n", skipped, skip_reasons.c_str());
    std::fprintf(stderr, "normkit check: nothing to check: no requested backend is available\n");
    return 1;
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
      (ok ? passed : failed) += 1;
    }
  }

  std::printf("%.1f s\n", total.elapsed_us() / 1e6);
  std::printf("check: %d passed, %d failed", passed, failed);
  if (skipped) std::printf(", %d skipped (%s)", skipped, skip_reasons.c_str());
  std::printf("\n");
  return failed == 0 && passed > 0 ? 0 : 1;
}

}  // namespace nktool
