// How many vectors of each input a thread of the cluster-streaming kernels (forward and
// backward) loads before it uses any: each pass is a loop of such batches of full vectors (no
// per-vector range test between their loads, so all are in flight at once), then at most one
// partial vector. With one vector at a time (a range test per load), the backward's
// 32768-column chunks took ~30 us a row, 4x their bytes' time (docs/notes.md, twenty-third
// session).
#pragma once

namespace normkit::cuda {

constexpr int kClusterStreamingBatch = 4;

}  // namespace normkit::cuda
