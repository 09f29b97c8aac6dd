// CUDA backend entry points: device facts, vector-width choice, configuration, dispatch.
#include <algorithm>
#include <initializer_list>
#include <mutex>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/launch_common.cuh"
#include "cuda/launchers.h"
#include "cuda/vector_width.h"

namespace normkit::cuda {
namespace {

std::string shape_context(const char* op, int64_t rows, int64_t hidden, nk_dtype a, nk_dtype b,
                          nk_dtype c, const LaunchConfig& cfg) {
  return std::string(op) + " rows=" + std::to_string(rows) + " hidden=" + std::to_string(hidden) +
         " dtypes " + nk_dtype_name(a) + "/" + nk_dtype_name(b) + "/" + nk_dtype_name(c) +
         "; config " + cfg.describe();
}

int fwd_vector_width(const nk_rms_norm_fwd_args& a) {
  const size_t xs = nk_dtype_size(a.x_dtype), ws = nk_dtype_size(a.weight_dtype);
  return vector_width(a.rows, {{a.x, xs, a.x_row_stride},
                               {a.residual, xs, a.residual_row_stride},
                               {a.residual_out, xs, a.residual_out_row_stride},
                               {a.y, nk_dtype_size(a.y_dtype), a.y_row_stride},
                               {a.weight, ws, 0},
                               {a.bias, ws, 0}});
}

int bwd_vector_width(const nk_rms_norm_bwd_args& a) {
  const size_t xs = nk_dtype_size(a.x_dtype);
  return vector_width(a.rows, {{a.x, xs, a.x_row_stride},
                               {a.dy, nk_dtype_size(a.dy_dtype), a.dy_row_stride},
                               {a.dresidual_out, xs, a.dresidual_out_row_stride},
                               {a.dx, xs, a.dx_row_stride},
                               {a.weight, nk_dtype_size(a.weight_dtype), 0}});
}

// Whether the forward may take rows misaligned for 16-byte vectors as a head of up to 7
// elements and aligned vectors after it (plan_fwd_realigned): 16-bit x, y, weight and bias, no
// residual, every x and y row misaligned alike, weight and bias 16-byte aligned.
bool fwd_realignable(const nk_rms_norm_fwd_args& a, int vec) {
  if (vec * nk_dtype_size(a.x_dtype) >= 16 || a.residual) return false;
  if (nk_dtype_size(a.x_dtype) != 2 || nk_dtype_size(a.y_dtype) != 2 ||
      nk_dtype_size(a.weight_dtype) != 2) {
    return false;
  }
  const auto offset = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16; };
  if (offset(a.x) != offset(a.y) || offset(a.x) % 2 != 0) return false;
  if (a.rows > 1 && (a.x_row_stride * 2) % 16 != (a.y_row_stride * 2) % 16) return false;
  return (!a.weight || offset(a.weight) == 0) && (!a.bias || offset(a.bias) == 0);
}

// The realigned forward plan for rows that fwd_realignable allows, or grid 0: the persistent
// kernel where it applies, else one row per CTA (plan_fwd_for and explain_fwd alike).
// weight_only_call: a weight, no bias, not zero-centred; lean_general_call: a call the lean
// kernel's general form may serve (fwd_lean_general_call; plan_fwd_realigned).
LaunchConfig plan_fwd_realigned_rows(int64_t rows, int64_t hidden, const KernelFacts& facts,
                                     bool weight_only_call, bool lean_general_call) {
  const LaunchConfig slots = plan_fwd_realigned_slots(rows, hidden, facts);
  return slots.grid > 0 ? slots
                        : plan_fwd_realigned(rows, hidden, facts, weight_only_call,
                                             lean_general_call);
}

// Whether the backward may read rows misaligned for 16-byte vectors as the forward does (a head,
// then aligned 16-byte vectors: plan_bwd_realigned, plan_bwd_realigned_slots): 16-bit x, dy and
// weight, every x, dy, dx (and dresidual_out) row misaligned alike, the weight 16-byte aligned.
// Also aligned rows that 16-byte vectors do not cover (one row, or padded strides, of a hidden
// size not a multiple of 8): no pipelined plan takes them, and the registers kernel of 16-byte
// vectors measured 28 us at 1 x 17389 (36 us alone under ncu, its 3 CTAs mostly waiting:
// twenty-seventh session).
bool bwd_rows_realignable(const nk_rms_norm_bwd_args& a) {
  if (nk_dtype_size(a.x_dtype) != 2 || nk_dtype_size(a.dy_dtype) != 2 ||
      nk_dtype_size(a.weight_dtype) != 2) {
    return false;
  }
  const auto offset = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16; };
  if (offset(a.x) != offset(a.dy) || offset(a.x) != offset(a.dx) || offset(a.x) % 2 != 0 ||
      (a.dresidual_out && offset(a.dresidual_out) != offset(a.x))) {
    return false;
  }
  const int64_t stride_offset = (a.x_row_stride * 2) % 16;
  if (a.rows > 1 && ((a.dy_row_stride * 2) % 16 != stride_offset ||
                     (a.dx_row_stride * 2) % 16 != stride_offset ||
                     (a.dresidual_out && (a.dresidual_out_row_stride * 2) % 16 != stride_offset))) {
    return false;
  }
  return !(a.weight && offset(a.weight) != 0);
}

// The realigned plan for rows that bwd_rows_realignable allows, or grid 0: the persistent
// kernel that keeps per-slot sums past bwd_realign_slots_first_rows (or half of them and
// bwd_realign_slots_first_elements), else the dx kernel beside the column sums (rows of whole
// vectors only where bwd_realign_whole_vectors says so; not where dx is written in place of x or
// dy while dweight or dbias is wanted: the column sums read them), else the persistent kernel.
// Never the persistent kernel on rows of whole vectors: the pipelined kernel takes those.
LaunchConfig plan_bwd_realigned_rows(int64_t rows, int64_t hidden, bool whole_vectors, bool sums,
                                     bool dbias, bool in_place, const KernelFacts& facts) {
  LaunchConfig none;
  none.grid = 0;
  const LaunchConfig slots =
      whole_vectors ? none : plan_bwd_realigned_slots(rows, hidden, dbias, facts);
  const bool slots_first = facts.bwd_realign_slots >= 2 ||
                           rows > facts.bwd_realign_slots_first_rows ||
                           (rows > facts.bwd_realign_slots_first_rows / 2 &&
                            rows * hidden > facts.bwd_realign_slots_first_elements);
  if (slots.grid > 0 && slots_first) return slots;
  if (facts.bwd_realign_slots < 2 && !(sums && in_place) &&
      (!whole_vectors || bwd_realign_whole_vectors(rows, hidden, facts))) {
    const LaunchConfig few = plan_bwd_realigned(rows, hidden, sums, dbias, facts);
    if (few.grid > 0) return few;
  }
  return slots;
}

LaunchConfig plan_bwd_realigned_for(const nk_rms_norm_bwd_args& a, int vec,
                                    const KernelFacts& facts) {
  if (!bwd_rows_realignable(a)) {
    LaunchConfig none;
    none.grid = 0;
    return none;
  }
  return plan_bwd_realigned_rows(
      a.rows, a.hidden, vec * nk_dtype_size(a.x_dtype) >= 16 && a.hidden % vec == 0,
      a.dweight != nullptr || a.dbias != nullptr, a.dbias != nullptr,
      a.dx == a.x || a.dx == a.dy, facts);
}

// Bytes per column of a row that a pipelined kernel stages in shared memory (the sum of the
// staged operands' element sizes), or 0 when a vector of one of them would be under the 4
// bytes cp.async needs.
int64_t staged_bytes(int vec, std::initializer_list<size_t> element_sizes) {
  int64_t total = 0;
  for (size_t size : element_sizes) {
    if (vec * size < 4) return 0;
    total += static_cast<int64_t>(size);
  }
  return total;
}

int64_t fwd_staged_bytes(int vec, nk_dtype x, bool with_residual) {
  const size_t xs = nk_dtype_size(x);
  return with_residual ? staged_bytes(vec, {xs, xs}) : staged_bytes(vec, {xs});
}

int64_t bwd_staged_bytes(int vec, nk_dtype x, nk_dtype dy, bool with_dresidual) {
  const size_t xs = nk_dtype_size(x), dys = nk_dtype_size(dy);
  return with_dresidual ? staged_bytes(vec, {xs, dys, xs}) : staged_bytes(vec, {xs, dys});
}

// plan_fwd / plan_bwd with the L2 policy of the inputs they read once (x and residual; x, dy
// and dresidual_out), weighed by those inputs' bytes, and their cluster-streaming steps (the
// backward's also its split-row extras; weight_bytes 0 without a weight): what the launches and
// --explain share. common_call: a weight, not zero-centered, and no bias (with 16-bit types
// and no residual, the calls of rms_norm_fwd_lean).
LaunchConfig plan_fwd_with_reads(int64_t rows, int64_t hidden, int vec, nk_dtype x, nk_dtype w,
                                 nk_dtype y, bool with_residual, bool common_call,
                                 const KernelFacts& facts) {
  const bool all_16_bit =
      nk_dtype_size(x) == 2 && nk_dtype_size(w) == 2 && nk_dtype_size(y) == 2;
  LaunchConfig c = plan_fwd(rows, hidden, vec, plain_fwd_facts(facts, nk_dtype_size(x)),
                            fwd_staged_bytes(vec, x, with_residual),
                            common_call && !with_residual && all_16_bit);
  if (!all_16_bit || (with_residual && c.items > 2)) {
    // The kernels of several rows per group, of the small register bounds and of the weight
    // loaded with x exist for 16-bit x, weight and y only (float32 x spilled at 64 registers;
    // fewer instantiations). With a residual, rows of more than 2 vectors per thread measured
    // slower at 2 rows per group (KernelFacts::fwd_rows_per_group), and would hold x, weight
    // and residual at once in the weight-with-x kernel's 64 registers (not measured).
    c.grid *= c.rows_per_group;
    c.rows_per_group = 1;
    c.register_bound = 0;
    c.weight_first = false;  // (and so lean: plan_fwd was told this is no lean call)
  }
  apply_read_policy(c, fwd_read_once_bytes(rows, hidden, nk_dtype_size(x), with_residual), false,
                    facts);
  apply_fwd_cluster_streaming(c, rows, hidden, facts);
  apply_streaming_prefetch(c, int64_t(nk_dtype_size(x)), int64_t(nk_dtype_size(x)), false, facts);
  apply_fwd_row_sum_quads(c, all_16_bit, common_call, facts);
  return c;
}
LaunchConfig plan_bwd_with_reads(int64_t rows, int64_t hidden, int vec, nk_dtype x, nk_dtype dy,
                                 int64_t weight_bytes, bool dbias, bool with_dresidual,
                                 const KernelFacts& facts) {
  LaunchConfig c =
      plan_bwd(rows, hidden, vec, facts, bwd_staged_bytes(vec, x, dy, with_dresidual));
  const int64_t xs = static_cast<int64_t>(nk_dtype_size(x));
  const int64_t read_once =
      rows * hidden * (xs + static_cast<int64_t>(nk_dtype_size(dy)) + (with_dresidual ? xs : 0));
  apply_read_policy(c, read_once, true, facts);
  apply_split_row_extras(c, weight_bytes, dbias, with_dresidual, facts);
  apply_cluster_streaming(c, rows, hidden, dbias, facts);
  apply_streaming_prefetch(c, xs, int64_t(nk_dtype_size(dy)), true, facts);
  apply_column_sums(c, rows, hidden, dbias, facts);
  return c;
}

LaunchConfig plan_fwd_for(const nk_rms_norm_fwd_args& a, const KernelFacts& facts) {
  const int vec = fwd_vector_width(a);
  const bool common_call = a.weight && !a.zero_centered && !a.bias;
  if (facts.fwd_realign && fwd_realignable(a, vec)) {
    const LaunchConfig realigned =
        plan_fwd_realigned_rows(a.rows, a.hidden, facts, common_call,
                                fwd_lean_general_call(a.weight != nullptr, common_call, facts));
    if (realigned.grid > 0) return realigned;
  }
  return plan_fwd_with_reads(a.rows, a.hidden, vec, a.x_dtype, a.weight_dtype, a.y_dtype,
                             a.residual != nullptr, common_call, facts);
}

// The calls of rms_norm_bwd_lean (where bwd_lean_plan takes their plan): 16-bit x, weight and
// dy, a weight, no dresidual_out, no dbias (or dbias where KernelFacts::bwd_lean_dbias says).
bool bwd_lean_call(nk_dtype x, nk_dtype w, nk_dtype dy, bool weight, bool dbias,
                   bool dresidual, const KernelFacts& facts) {
  return nk_dtype_size(x) == 2 && nk_dtype_size(w) == 2 && nk_dtype_size(dy) == 2 && weight &&
         (!dbias || facts.bwd_lean_dbias != 0) && !dresidual;
}

// plan_bwd_with_reads's plan for a call with these operands, on rms_norm_bwd_lean where the
// call and the plan allow it (bwd_lean_call, bwd_lean_plan), at one vector per thread where
// bwd_lean_one_item says so.
LaunchConfig plan_bwd_rows(int64_t rows, int64_t hidden, int vec, nk_dtype x, nk_dtype w,
                           nk_dtype dy, bool weight, bool dbias, bool dresidual,
                           const KernelFacts& facts) {
  const int64_t weight_bytes = weight ? int64_t(nk_dtype_size(w)) : 0;
  const bool sixteen_bit =
      nk_dtype_size(x) == 2 && nk_dtype_size(w) == 2 && nk_dtype_size(dy) == 2;
  LaunchConfig c =
      plan_bwd_with_reads(rows, hidden, vec, x, dy, weight_bytes, dbias, dresidual, facts);
  c.lean = bwd_lean_call(x, w, dy, weight, dbias, dresidual, facts) &&
           bwd_lean_plan(c, hidden, facts);
  if (bwd_lean_one_item(c, hidden, facts)) {
    KernelFacts one_item = facts;
    one_item.bwd_items_target = 1;
    LaunchConfig o =
        plan_bwd_with_reads(rows, hidden, vec, x, dy, weight_bytes, dbias, dresidual, one_item);
    if (bwd_lean_plan(o, hidden, facts)) {
      o.lean = true;
      apply_bwd_row_sum_quads(o, sixteen_bit, dbias, facts);
      return o;
    }
  }
  apply_bwd_row_sum_quads(c, sixteen_bit, dbias, facts);
  return c;
}

// The column-owning backward where it applies (few rows), else plan_bwd. That kernel stages x,
// dy and dresidual_out whatever their alignment, so only dx's rows set its vector width.
LaunchConfig plan_bwd_for(const nk_rms_norm_bwd_args& a, const KernelFacts& facts) {
  const size_t xs = nk_dtype_size(a.x_dtype), dys = nk_dtype_size(a.dy_dtype);
  const int64_t staged[3] = {int64_t(xs), int64_t(dys), a.dresidual_out ? int64_t(xs) : 0};
  const int outputs = (a.dweight ? 1 : 0) + (a.dbias ? 1 : 0);
  const LaunchConfig columns =
      plan_bwd_columns(a.rows, a.hidden, vector_width(a.rows, {{a.dx, xs, a.dx_row_stride}}),
                       facts, staged, outputs);
  if (columns.grid > 0) return columns;
  const int vec = bwd_vector_width(a);
  const LaunchConfig realigned = plan_bwd_realigned_for(a, vec, facts);
  if (realigned.grid > 0) return realigned;
  return plan_bwd_rows(a.rows, a.hidden, vec, a.x_dtype, a.weight_dtype, a.dy_dtype,
                       a.weight != nullptr, a.dbias != nullptr, a.dresidual_out != nullptr, facts);
}

int natural_vec(nk_dtype a, nk_dtype b, nk_dtype c) {
  const size_t smallest = std::min({nk_dtype_size(a), nk_dtype_size(b), nk_dtype_size(c)});
  return static_cast<int>(16 / smallest);
}

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return count;
}

const DeviceFacts& current_device_facts() {
  static std::mutex mutex;
  static std::vector<DeviceFacts> cache;
  if (device_count() == 0) throw Error(NK_ERROR_NO_DEVICE, "no CUDA device is available");
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  for (const DeviceFacts& f : cache) {
    if (f.device == device) return f;
  }
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  DeviceFacts f;
  f.device = device;
  f.sm_count = prop.multiProcessorCount;
  f.major = prop.major;
  f.minor = prop.minor;
  f.l2_bytes = prop.l2CacheSize;
  f.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  f.smem_per_sm = prop.sharedMemPerMultiprocessor;
  f.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  f.cluster_launch = prop.major >= 9;
  f.name = prop.name;
  cache.reserve(16);
  cache.push_back(f);
  return cache.back();
}

// Without a weight or a bias, weight_dtype names no operand: x's dtype stands in for it, so that
// such calls on 16-bit x take the kernels of 16-bit operands (the realigned forward among them).
// Callers that leave it at nk_rms_norm_fwd_args_init's float32, as the bindings do without a
// weight, would otherwise get the kernels of a float32 weight.
namespace {
nk_rms_norm_fwd_args with_param_dtype(const nk_rms_norm_fwd_args& call) {
  nk_rms_norm_fwd_args a = call;
  if (!a.weight && !a.bias) a.weight_dtype = a.x_dtype;
  return a;
}
}  // namespace

void rms_norm_fwd(const nk_rms_norm_fwd_args& call, void* stream) {
  if (call.quant != NK_QUANT_NONE) return rms_norm_fwd_quant(call, stream);
  const nk_rms_norm_fwd_args a = with_param_dtype(call);
  const LaunchConfig cfg = plan_fwd_for(a, kernel_facts(current_device_facts()));
  const auto s = static_cast<cudaStream_t>(stream);
  try {
    dispatch_dtype(a.x_dtype, "rms_norm_fwd x",
                   [&](auto x) { launch_fwd_for_x<decltype(x)>(a, cfg, s); });
  } catch (const Error& e) {
    throw Error(e.status(), std::string(e.what()) + "; " +
                                shape_context("rms_norm_fwd", a.rows, a.hidden, a.x_dtype,
                                              a.weight_dtype, a.y_dtype, cfg));
  }
}

size_t rms_norm_bwd_workspace_bytes(int64_t rows, int64_t hidden, bool want_dweight,
                                    bool want_dbias) {
  return static_cast<size_t>(bwd_workspace_bytes(
      rows, hidden, kernel_facts(current_device_facts()), want_dweight, want_dbias));
}

namespace {
// The backward's weight_dtype names no operand without a weight, dweight or dbias: x's dtype
// stands in for it, as the forward's with_param_dtype has it (JAX's FFI leaves it at float32).
nk_rms_norm_bwd_args with_param_dtype(const nk_rms_norm_bwd_args& call) {
  nk_rms_norm_bwd_args a = call;
  if (!a.weight && !a.dweight && !a.dbias) a.weight_dtype = a.x_dtype;
  return a;
}
}  // namespace

void rms_norm_bwd(const nk_rms_norm_bwd_args& call, void* stream) {
  const nk_rms_norm_bwd_args a = with_param_dtype(call);
  const LaunchConfig cfg = plan_bwd_for(a, kernel_facts(current_device_facts()));
  const auto s = static_cast<cudaStream_t>(stream);
  try {
    dispatch_dtype(a.x_dtype, "rms_norm_bwd x", [&](auto x) {
      dispatch_dtype(a.weight_dtype, "rms_norm_bwd weight",
                     [&](auto w) { launch_bwd_for<decltype(x), decltype(w)>(a, cfg, s); });
    });
  } catch (const Error& e) {
    throw Error(e.status(), std::string(e.what()) + "; " +
                                shape_context("rms_norm_bwd", a.rows, a.hidden, a.x_dtype,
                                              a.weight_dtype, a.dy_dtype, cfg));
  }
}

namespace {
thread_local std::string bwd_launch_note;
}  // namespace

void note_bwd_launch(const LaunchConfig& planned, const LaunchConfig& launched) {
  bwd_launch_note.clear();
  if (launched.grid != planned.grid || launched.slots != planned.slots) {
    bwd_launch_note = "launched grid=" + std::to_string(launched.grid) +
                      " slots=" + std::to_string(launched.slots) +
                      " (capped to the CTAs resident at once)";
  }
}

std::string last_bwd_launch_note() { return bwd_launch_note; }

std::string explain_fwd(int64_t rows, int64_t hidden, nk_dtype x, nk_dtype weight_dtype,
                        nk_dtype y, bool with_residual, bool weight_extras, bool weight) {
  const bool common_call = weight && !weight_extras;  // as plan_fwd_for has it
  // No weight and no bias (bench rejects zero-centring without a weight): x's dtype stands in,
  // as rms_norm_fwd's with_param_dtype has it.
  const nk_dtype w = !weight && !weight_extras ? x : weight_dtype;
  // Contiguous operands from aligned allocations, as `normkit bench` passes them.
  const int nat = natural_vec(x, w, y);
  const int vec = hidden % nat == 0 ? nat : 1;
  const KernelFacts facts = kernel_facts(current_device_facts());
  if (facts.fwd_realign && vec < nat && nk_dtype_size(x) == 2 && nk_dtype_size(w) == 2 &&
      nk_dtype_size(y) == 2) {
    const LaunchConfig realigned =
        plan_fwd_realigned_rows(rows, hidden, facts, common_call,
                                fwd_lean_general_call(weight, common_call, facts));
    if (realigned.grid > 0) return realigned.describe();
  }
  return plan_fwd_with_reads(rows, hidden, vec, x, w, y, with_residual, common_call, facts)
      .describe();
}

std::string explain_bwd(int64_t rows, int64_t hidden, nk_dtype x, nk_dtype weight_dtype,
                        nk_dtype dy, bool dbias, bool weight) {
  const nk_dtype w = weight || dbias ? weight_dtype : x;  // as rms_norm_bwd's with_param_dtype
  const int nat = natural_vec(x, w, dy);
  const int vec = hidden % nat == 0 ? nat : 1;
  const KernelFacts facts = kernel_facts(current_device_facts());
  // As `normkit bench` calls it: dweight wanted with a weight (and dbias with --bias), no
  // dresidual_out.
  const int64_t xs = nk_dtype_size(x), staged[3] = {xs, int64_t(nk_dtype_size(dy)), 0};
  const int dx_vec = hidden % (16 / xs) == 0 ? int(16 / xs) : 1;
  const LaunchConfig columns =
      plan_bwd_columns(rows, hidden, dx_vec, facts, staged, (weight ? 1 : 0) + (dbias ? 1 : 0));
  if (columns.grid > 0) return columns.describe();
  if (xs == 2 && nk_dtype_size(dy) == 2 && nk_dtype_size(w) == 2) {
    const LaunchConfig realigned =
        plan_bwd_realigned_rows(rows, hidden, vec == nat, weight || dbias, dbias, false, facts);
    if (realigned.grid > 0) return realigned.describe();
  }
  return plan_bwd_rows(rows, hidden, vec, x, w, dy, weight, dbias, false, facts).describe();
}

}  // namespace normkit::cuda
