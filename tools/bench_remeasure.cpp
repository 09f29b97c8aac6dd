#include "bench_remeasure.h"

#include <utility>

namespace nktool {

bool unsteady(const PassTiming& t) { return t.measured && spread_too_wide_us(t.us); }

bool any_unsteady(const ShapeResult& row) { return unsteady(row.fwd) || unsteady(row.bwd); }

void take_remeasured(ShapeResult& row, const ShapeResult& again) {
  for (auto [pass, second] : {std::pair{&row.fwd, &again.fwd}, std::pair{&row.bwd, &again.bwd}}) {
    if (!unsteady(*pass) || !second->measured) continue;
    const TimingStats first = pass->us;
    *pass = *second;
    pass->remeasured = true;
    pass->first_us = first;
  }
}

RemeasureCounts count_remeasure(const std::vector<ShapeResult>& shapes) {
  RemeasureCounts n;
  for (const ShapeResult& row : shapes) {
    for (const PassTiming* pass : {&row.fwd, &row.bwd}) {
      n.remeasured += pass->remeasured;
      n.unsteady += unsteady(*pass);
    }
  }
  return n;
}

}  // namespace nktool
