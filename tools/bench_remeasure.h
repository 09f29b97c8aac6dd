// A pass whose samples spread too widely (timing.h, spread_too_wide_us) is measured once more:
// its median was most likely taken from a disturbed stretch of the run (twice on 2026-11-27, a
// shape's samples ran ~15 us slow for a while), and a second run tells a disturbance from a
// plan whose time varies by nature.
#pragma once

#include <vector>

#include "bench_types.h"

namespace nktool {

// Whether `t` was measured and its samples spread too widely for its median to stand for it.
bool unsteady(const PassTiming& t);

// Whether any pass of `row` is unsteady.
bool any_unsteady(const ShapeResult& row);

// Each unsteady pass of `row` takes `again`'s timing of the same pass (launch explanation and
// same-size copy included); its first timing stays in first_us. Steady passes keep theirs.
void take_remeasured(ShapeResult& row, const ShapeResult& again);

// Over the passes of `shapes`: how many took a second run, and how many are unsteady still.
struct RemeasureCounts {
  int remeasured = 0, unsteady = 0;
};
RemeasureCounts count_remeasure(const std::vector<ShapeResult>& shapes);

}  // namespace nktool
