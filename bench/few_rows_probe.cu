// Where the time of a forward over few long rows goes (issue 4: 29 x 17389 takes 8.5 us on an
// H100 and 8.6-8.9 on an H200 against 128 x 4096's 5.6-6.0, the same 1 MB each way; docs/notes.md,
// forty-ninth session). Standalone but for normkit's cluster sums (src/cuda/reduce.cuh), built on
// the device by `bench/device.sh few_rows`:
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Ibench bench/few_rows_probe.cu -o p && ./p
//
// A plain bf16 RMSNorm forward, one row split over a cluster of C CTAs (C = 1: one CTA per row),
// each CTA a contiguous part of the row's 16-byte vectors, ITEMS vectors per thread loaded with
// their weight vectors before the sum; the CTAs' sums added by normkit's cluster_push_sum (one
// st.async per peer, no cluster barrier after the sum) or cluster_sum (two cluster barriers).
// Rows that 16-byte vectors do not cover (odd hidden sizes: row r starts r * hidden elements in)
// are read as the aligned vectors that overlap them ("window"), the elements outside the row
// masked, the weight shifted into place from two aligned vectors, the two end vectors stored
// element by element. Timed as `normkit bench` times (bench/probe_timing.cuh), with each call's
// span (first CTA start to last CTA end).
//
// Beside them, normkit's own realigned forward (rms_norm_fwd_realigned, both forms, and
// rms_norm_fwd_realigned_lean) on the plan that plan_fwd_realigned gives under
// NK_TUNE_FWD_REALIGN_CLUSTERS=1 (and _LEAN=2), its output checked the same way: the kernel and
// split that the rule would take, in the same run as the probe's (build line in
// bench/device.sh, step few_rows: this file with src/cuda/launch_config.cpp).
#include <cooperative_groups.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/launch_config.h"
#include "cuda/reduce.cuh"
#include "cuda/rms_norm_fwd_realigned.cuh"
#include "cuda/rms_norm_fwd_realigned_lean.cuh"
#include "probe_bf16.cuh"
#include "probe_timing.cuh"

// Which sum each case times first (-DPUSH_FIRST=0: the two-barrier one). The first variant a
// case times reads ~0.4 us slower even where both are the same code (one CTA per row): read each
// variant where it was timed second (bench/results/2026-11-28T0946-h200-few-rows-probe).
#ifndef PUSH_FIRST
#define PUSH_FIRST 1
#endif
namespace {

using probe::check;
using probe::note_end;
using probe::note_start;

struct Args {
  const uint4* x;   // rows * hidden bf16 values, contiguous (16 bytes of padding after)
  const uint4* w;   // hidden bf16 values (16 bytes of padding after)
  uint4* y;         // as x
  int hidden;       // columns
  int chunk;        // window vectors per CTA
  int cluster;      // CTAs per row
  float inv_hidden;
};

// Halves k of the 16 halves (lo, hi) from `from` on: lo[from..7], hi[0..from-1+...], i.e. the
// 8 halves starting at half `from` (0-8) of the pair. `from` is uniform per CTA.
__device__ __forceinline__ uint4 halves_from(const uint4& lo, const uint4& hi, int from) {
  const uint32_t c[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  uint32_t o[4];
  switch (from) {
#define NK_PROBE_SHIFT(F)                                                          \
  case F:                                                                          \
    _Pragma("unroll") for (int m = 0; m < 4; ++m) {                                \
      o[m] = (F % 2 == 0) ? c[m + F / 2] : __byte_perm(c[m + F / 2], c[m + F / 2 + 1], 0x5432); \
    }                                                                              \
    break;
    NK_PROBE_SHIFT(0)
    NK_PROBE_SHIFT(1)
    NK_PROBE_SHIFT(2)
    NK_PROBE_SHIFT(3)
    NK_PROBE_SHIFT(4)
    NK_PROBE_SHIFT(5)
    NK_PROBE_SHIFT(6)
    NK_PROBE_SHIFT(7)
#undef NK_PROBE_SHIFT
    default:
      return hi;
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// Zeroes the halves of v outside [first, last) (half indices 0-8).
__device__ __forceinline__ uint4 keep_halves(uint4 v, int first, int last) {
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    if (k < first || k >= last) w[k / 2] &= (k % 2 == 0) ? 0xffff0000u : 0x0000ffffu;
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <int ITEMS, bool PUSH>
__global__ void __launch_bounds__(ITEMS <= 3 ? 1024 : 512) split_rows(Args a, unsigned long long* span) {
  namespace nc = normkit::cuda;
  note_start(span);
  __shared__ nc::ClusterPush push;
  __shared__ float slot;
  __shared__ float warp_sums[32];
  if (PUSH && a.cluster > 1) nc::cluster_push_init(push);
  const int part = blockIdx.x % a.cluster;
  const long row = blockIdx.x / a.cluster;
  const long start = row * a.hidden;            // the row's first element
  const int shift = static_cast<int>(start % 8);  // its place within a vector
  const long v0 = start / 8;                    // the first window vector
  const int window = static_cast<int>((start + a.hidden - 1) / 8 - v0 + 1);
  const int first = part * a.chunk;
  const int end = min(first + a.chunk, window);
  uint4 xv[ITEMS], lo[ITEMS], hi[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = first + i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    xv[i] = lo[i] = hi[i] = make_uint4(0, 0, 0, 0);
    if (j < end) {
      xv[i] = a.x[v0 + j];
      if (shift != 0 && j > 0) lo[i] = a.w[j - 1];
      hi[i] = a.w[j];  // (the weight's padding covers j = hidden / 8)
    }
  }
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = first + i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    if (j == 0 || j == window - 1) {
      const int lead = j == 0 ? shift : 0;
      const int tail = j == window - 1 ? static_cast<int>((start + a.hidden - 1) % 8) + 1 : 8;
      xv[i] = keep_halves(xv[i], lead, tail);
    }
    sum += probe::sum_of_squares(xv[i]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  float total = 0.f;
  for (int k = 0; k < static_cast<int>(blockDim.x) / 32; ++k) total += warp_sums[k];
  if (a.cluster > 1) total = PUSH ? nc::cluster_push_sum(total, push) : nc::cluster_sum(total, &slot);
  const float rstd = rsqrtf(total * a.inv_hidden + 1e-6f);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = first + i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    if (j >= end) continue;
    const uint4 wv = shift == 0 ? hi[i] : halves_from(lo[i], hi[i], 8 - shift);
    const uint4 out = probe::scaled(xv[i], wv, rstd);
    if (j != 0 && j != window - 1) {
      a.y[v0 + j] = out;
    } else {
      const int lead = j == 0 ? shift : 0;
      const int tail = j == window - 1 ? static_cast<int>((start + a.hidden - 1) % 8) + 1 : 8;
      const uint16_t* halves = reinterpret_cast<const uint16_t*>(&out);
      uint16_t* dst = reinterpret_cast<uint16_t*>(a.y + v0 + j);
      for (int k = lead; k < tail; ++k) dst[k] = halves[k];
    }
  }
  note_end(span);
}

__global__ void empty_cta(Args, unsigned long long* span) {
  note_start(span);
  note_end(span);
}

// Launches kernel<<<grid, block>>>(args...) in clusters of `cluster` CTAs (1: no clusters):
// the probe's kernels and normkit's alike.
template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, int cluster,
            cudaStream_t stream, const Args&... args) {
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attr[1];
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  if (cluster > 1) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    config.attrs = attr;
    config.numAttrs = 1;
  }
  check(cudaLaunchKernelEx(&config, kernel, args...), "cudaLaunchKernelEx");
}

using Kernel = void (*)(Args, unsigned long long*);

Kernel pick(int items, bool push) {
  switch (items) {
    case 1: return push ? split_rows<1, true> : split_rows<1, false>;
    case 2: return push ? split_rows<2, true> : split_rows<2, false>;
    case 3: return push ? split_rows<3, true> : split_rows<3, false>;
    case 4: return push ? split_rows<4, true> : split_rows<4, false>;
    case 6: return push ? split_rows<6, true> : split_rows<6, false>;
    default: return push ? split_rows<8, true> : split_rows<8, false>;
  }
}

// The host's bf16 -> float.
float bf16_value(uint16_t h) {
  uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Checks y against a float64 reference of x and w (|error| <= 1/64 relative: bf16 rounding).
bool verify(const probe::Bf16Inputs& in, int rows, int hidden) {
  const size_t n = size_t(rows) * hidden;
  std::vector<uint16_t> x(n), w(hidden), y(n);
  check(cudaMemcpy(x.data(), in.x, n * 2, cudaMemcpyDeviceToHost), "x back");
  check(cudaMemcpy(w.data(), in.w, hidden * 2, cudaMemcpyDeviceToHost), "w back");
  check(cudaMemcpy(y.data(), in.y, n * 2, cudaMemcpyDeviceToHost), "y back");
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int c = 0; c < hidden; ++c) ss += double(bf16_value(x[size_t(r) * hidden + c])) * bf16_value(x[size_t(r) * hidden + c]);
    const double rstd = 1.0 / std::sqrt(ss / hidden + 1e-6);
    for (int c = 0; c < hidden; ++c) {
      const size_t e = size_t(r) * hidden + c;
      const double want = bf16_value(x[e]) * rstd * bf16_value(w[c]);
      if (std::fabs(bf16_value(y[e]) - want) > std::fabs(want) / 64 + 1e-6) {
        std::printf("  MISMATCH row %d col %d: %g against %g\n", r, c, bf16_value(y[e]), want);
        return false;
      }
    }
  }
  return true;
}

// normkit's realigned forward of rows x hidden (x, w, y of `in`; rows misaligned by an odd
// hidden) on its plan under NK_TUNE_FWD_REALIGN_CLUSTERS=1, weight only or the general form.
// normkit's kernel forms for a realigned plan: rms_norm_fwd_realigned for a weight alone or in
// general, or rms_norm_fwd_realigned_lean (NK_TUNE_FWD_REALIGN_LEAN=2's plans: one-row plans
// too).
enum class Form { kWeightOnly, kGeneral, kLean };

// untimed_launches > 0: that many launches (each after the flush) and the check, no timing.
void normkit_realigned(probe::Probe& p, const probe::Bf16Inputs& in, int rows, int hidden,
                       Form form, int untimed_launches = 0) {
  namespace nc = normkit::cuda;
  nc::KernelFacts f;
  f.sm_count = p.sms;
  f.fwd_realign_clusters = 1;
  f.fwd_realign_lean = form == Form::kLean ? 2 : 0;
  // (planned as a call of a weight alone, whichever kernel form runs on it)
  const nc::LaunchConfig c = nc::plan_fwd_realigned(rows, hidden, f, /*weight_only_call=*/true);
  if (c.grid == 0) {
    std::printf("%5dx%-6d normkit: no realigned plan\n", rows, hidden);
    return;
  }
  nc::FwdParams fp{};
  fp.shape.rows = rows;
  fp.shape.hidden = hidden;
  fp.shape.inv_hidden = 1.0f / hidden;
  fp.shape.items = c.items;
  fp.shape.cluster_size = c.cluster_size;
  fp.shape.cols_per_cta = c.cols_per_cta;
  fp.x = in.x;
  fp.x_stride = hidden;
  fp.weight = in.w;
  fp.eps = 1e-6f;
  fp.y = in.y;
  fp.y_stride = hidden;
  using B = __nv_bfloat16;
  void (*kernel)(nc::FwdParams) =
      form == Form::kGeneral ? nc::rms_norm_fwd_realigned<B, B, B, nc::kSmallItems, false>
                             : nc::rms_norm_fwd_realigned<B, B, B, nc::kSmallItems, true>;
  if (form == Form::kLean && !c.realigned_lean) {
    std::printf("%5dx%-6d normkit: no lean plan (%s)\n", rows, hidden, c.describe().c_str());
    return;
  }
  const nc::RealignedLeanParams lean = nc::realigned_lean_params(fp);
  const auto call = [&](unsigned long long*) {
    const dim3 grid(static_cast<unsigned>(c.grid)), block(c.threads_per_row, c.rows_per_block);
    if (form == Form::kLean) {
      launch(nc::rms_norm_fwd_realigned_lean<B, B, B, nc::kSmallItems, nc::RealignedLeanParams>,
             grid, block, c.cluster_size, p.stream, lean);
    } else {
      launch(kernel, grid, block, c.cluster_size, p.stream, fp);
    }
  };
  check(cudaMemset(in.y, 0xff, size_t(rows) * hidden * 2), "poison");
  for (int i = 0; i < std::max(untimed_launches, 1); ++i) {
    if (untimed_launches > 0) p.flush_l2();
    call(nullptr);
  }
  check(cudaStreamSynchronize(p.stream), "first call");
  const bool ok = verify(in, rows, hidden);
  if (untimed_launches > 0) {
    std::printf("normkit kernel: %s: %s\n", c.describe().c_str(), ok ? "ok" : "WRONG");
    return;
  }
  const double us = p.time(call).first;
  const char* name = form == Form::kLean      ? "lean"
                     : form == Form::kGeneral ? "general"
                                              : "weight-only";
  std::printf("%5dx%-6d normkit %-11s %s: %.2f us | %s\n", rows, hidden, name,
              c.describe().c_str(), us, ok ? "ok" : "WRONG");
}

}  // namespace

// FEW_ROWS_NCU=1: only the probe's kernel and normkit's weight-only and lean kernels at
// 29 x 17389 on one split (5 CTAs of 128 threads x 4 vectors), three launches each, for ncu to
// compare (bench/device.sh few_rows_ncu).
void ncu_pair(probe::Probe& p, const probe::Bf16Inputs& in) {
  constexpr int kRows = 29, kHidden = 17389, kCluster = 5, kItems = 4;
  const long window_max = (kHidden + 7) / 8 + 1;
  const int chunk = static_cast<int>((window_max + kCluster - 1) / kCluster);
  const int threads = ((chunk + kItems - 1) / kItems + 31) / 32 * 32;
  const Args a{in.x, in.w, in.y, kHidden, chunk, kCluster, 1.0f / kHidden};
  for (int i = 0; i < 3; ++i) {
    p.flush_l2();
    launch(pick(kItems, true), kRows * kCluster, threads, kCluster, p.stream, a, p.span);
  }
  check(cudaStreamSynchronize(p.stream), "probe kernel");
  std::printf("probe kernel: %d CTAs of %d threads, clusters of %d: %s\n", kRows * kCluster,
              threads, kCluster, verify(in, kRows, kHidden) ? "ok" : "WRONG");
  normkit_realigned(p, in, kRows, kHidden, Form::kWeightOnly, 3);
  normkit_realigned(p, in, kRows, kHidden, Form::kLean, 3);
}

int main() {
  probe::Probe p;
  const size_t max_elements = size_t{1} << 22;
  const probe::Bf16Inputs in(max_elements + 64, 262144 + 64);
  if (const char* only = std::getenv("FEW_ROWS_NCU"); only && *only == '1') {
    ncu_pair(p, in);
    return 0;
  }
  if (const char* only = std::getenv("FEW_ROWS_ONE_ROW"); only && *only == '1') {
    // Only normkit's realigned forward on rows one CTA holds (the planner's one-row plans), on
    // rms_norm_fwd_realigned and on the lean kernel (NK_TUNE_FWD_REALIGN_LEAN=2), alternating
    // which runs first, three times. FEW_ROWS_SHAPES (RxH,RxH,...) replaces the shapes.
    std::vector<std::pair<int, int>> shapes = {{96, 4095}, {64, 8191}, {64, 5001}, {200, 3001},
                                               {128, 4095}, {256, 4095}, {320, 2047},
                                               {1024, 4095}};
    if (const char* list = std::getenv("FEW_ROWS_SHAPES"); list && *list) {
      shapes.clear();
      for (const char* at = list; *at;) {
        int rows = 0, hidden = 0, used = 0;
        if (std::sscanf(at, "%dx%d%n", &rows, &hidden, &used) != 2) break;
        shapes.emplace_back(rows, hidden);
        at += used;
        if (*at == ',') ++at;
      }
    }
    for (int pass = 0; pass < 3; ++pass) {
      for (const auto& [rows, hidden] : shapes) {
        const Form first = pass % 2 == 0 ? Form::kWeightOnly : Form::kLean;
        normkit_realigned(p, in, rows, hidden, first);
        normkit_realigned(p, in, rows, hidden,
                          first == Form::kLean ? Form::kWeightOnly : Form::kLean);
      }
    }
    return 0;
  }
  struct Case {
    int rows, hidden, cluster, items;
  };
  // Each shape at its splits: C CTAs per row, ITEMS vectors per thread; threads cover the part.
  const std::vector<Case> cases = {
      {128, 4096, 1, 4}, {128, 4096, 1, 2}, {128, 4096, 1, 1}, {128, 4096, 2, 2},
      {32, 16384, 1, 2},  {32, 16384, 1, 4}, {32, 16384, 2, 2}, {32, 16384, 2, 4},
      {32, 16384, 4, 1},  {32, 16384, 4, 2}, {32, 16384, 4, 4}, {32, 16384, 8, 1},
      {29, 17384, 1, 3},  {29, 17384, 2, 2}, {29, 17384, 3, 1}, {29, 17384, 4, 1},
      {29, 17384, 4, 2},  {29, 17384, 4, 4}, {29, 17384, 5, 1}, {29, 17384, 8, 1},
      {29, 17389, 1, 3},  {29, 17389, 2, 2}, {29, 17389, 3, 1}, {29, 17389, 4, 1},
      {29, 17389, 4, 2},  {29, 17389, 4, 4}, {29, 17389, 5, 1}, {29, 17389, 8, 1},
      {29, 17389, 5, 4},  {29, 17389, 5, 2},
      {1, 4096, 1, 4},    {1, 17389, 1, 3},  {1, 17389, 4, 1},  {1, 17389, 8, 1},
      {1, 17389, 8, 3},   {2, 65537, 8, 3},  {2, 65537, 8, 2},
  };
  std::printf("%-12s %3s %5s %7s %5s | %9s %9s | %9s %9s | %s\n", "shape", "C", "items",
              "threads", "grid", "push us", "span", "sync us", "span", "check");
  for (const Case& c : cases) {
    const long window_max = (c.hidden + 7) / 8 + (c.hidden % 8 != 0 ? 1 : 0);
    const int chunk = static_cast<int>((window_max + c.cluster - 1) / c.cluster);
    int threads = (chunk + c.items - 1) / c.items;
    threads = (threads + 31) / 32 * 32;
    if (threads > (c.items <= 3 ? 1024 : 512)) {
      std::printf("%5dx%-6d %3d %5d too many threads (%d)\n", c.rows, c.hidden, c.cluster, c.items,
                  threads);
      continue;
    }
    const Args a{in.x, in.w, in.y, c.hidden, chunk, c.cluster, 1.0f / c.hidden};
    const int grid = c.rows * c.cluster;
    double us[2], spans[2];
    bool ok = true;
    for (int push = PUSH_FIRST; push == 0 || push == 1; push += PUSH_FIRST ? -1 : 1) {
      const Kernel k = pick(c.items, push == 1);
      check(cudaMemset(in.y, 0xff, size_t(c.rows) * c.hidden * 2), "poison");
      launch(k, grid, threads, c.cluster, p.stream, a, p.span);
      check(cudaStreamSynchronize(p.stream), "first call");
      ok = ok && verify(in, c.rows, c.hidden);
      const auto t = p.time([&](unsigned long long* s) { launch(k, grid, threads, c.cluster, p.stream, a, s); });
      us[push] = t.first;
      spans[push] = t.second;
    }
    std::printf("%5dx%-6d %3d %5d %7d %5d | %9.2f %9.2f | %9.2f %9.2f | %s\n", c.rows, c.hidden,
                c.cluster, c.items, threads, grid, us[1], spans[1], us[0], spans[0],
                ok ? "ok" : "WRONG");
  }
  std::printf("\nnormkit's realigned forward on NK_TUNE_FWD_REALIGN_CLUSTERS=1's plans, twice:\n");
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [rows, hidden] : std::vector<std::pair<int, int>>{
             {29, 17389}, {1, 17389}, {4, 17389}, {2, 65537}, {3, 40001}}) {
      normkit_realigned(p, in, rows, hidden, Form::kWeightOnly);
      normkit_realigned(p, in, rows, hidden, Form::kLean);
      normkit_realigned(p, in, rows, hidden, Form::kGeneral);
    }
  }
  const Args none{in.x, in.w, in.y, 1, 1, 1, 1.f};
  for (const int cluster : {1, 4}) {
    for (const int grid : {1, 128}) {
      if (grid < cluster) continue;
      const auto t = p.time([&](unsigned long long* s) { launch(empty_cta, grid, 128, cluster, p.stream, none, s); });
      std::printf("empty kernel grid %d cluster %d: %.2f us (span %.2f)\n", grid, cluster, t.first,
                  t.second);
    }
  }
  std::printf("\n(every time in us, median of 100 calls after the memset flush; span: first CTA "
              "start to last CTA end)\n");
  return 0;
}
