/*
 * normkit: RMSNorm forward and backward for CUDA GPUs and CPUs, behind one C API.
 *
 * Conventions shared by every function here:
 *  - Tensors are row-major matrices [rows, hidden] given by a pointer, a dtype and a row stride
 *    counted in ELEMENTS (not bytes). A row stride of 0 means "contiguous" (= hidden); any
 *    other stride must be >= hidden. Columns are always contiguous.
 *  - Vectors ([hidden] weight, bias, dweight, dbias; [rows] rstd) are contiguous.
 *  - All arithmetic is float32; results are rounded once to the output dtype
 *    (round-to-nearest-even).
 *  - Pointers for NK_BACKEND_CUDA are device pointers (or managed / mapped host memory) on the
 *    current CUDA device; pointers for NK_BACKEND_CPU are host pointers.
 *  - Every function returns a status. On failure nothing has been written to any output and
 *    nk_last_error() returns a message naming the argument and its value.
 *  - Index arithmetic is 64-bit: rows * row_stride may exceed 2^31.
 *  - Results are deterministic: the same inputs on the same device and backend give the same
 *    bits (dweight/dbias are reduced in a fixed order, without atomics). "The same inputs"
 *    includes the pointers' alignment (it picks the vector width, hence the kernel and its
 *    summation order) and any NK_TUNE_* setting; "the same device" means the same GPU, since
 *    the number of partial sums can follow how many thread-block clusters that chip runs at
 *    once. Across those, results differ only in float rounding order.
 *  - GPU calls allocate nothing and never synchronize the host, so they can be captured in a
 *    CUDA graph.
 */
#ifndef NORMKIT_NORMKIT_H
#define NORMKIT_NORMKIT_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define NK_API __declspec(dllexport)
#else
#define NK_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define NK_VERSION_MAJOR 0
#define NK_VERSION_MINOR 1
#define NK_VERSION_PATCH 0

/** Status of every call. NK_SUCCESS is 0. */
typedef enum nk_status {
  NK_SUCCESS = 0,
  NK_ERROR_INVALID_ARGUMENT = 1, /**< an argument breaks the contract; see nk_last_error() */
  NK_ERROR_UNSUPPORTED = 2,      /**< valid, but not supported by this build or backend */
  NK_ERROR_NO_DEVICE = 3,        /**< NK_BACKEND_CUDA asked for but no usable GPU or CUDA build */
  NK_ERROR_CUDA = 4,             /**< a CUDA runtime call or kernel launch failed */
  NK_ERROR_INTERNAL = 5          /**< a bug in normkit: please report the message */
} nk_status;

/** Element types. Values are stable (bindings store them). */
typedef enum nk_dtype {
  NK_FLOAT32 = 0,
  NK_FLOAT16 = 1,       /**< IEEE binary16 */
  NK_BFLOAT16 = 2,      /**< bfloat16 */
  NK_FLOAT8_E4M3 = 3,   /**< OCP float8 e4m3fn: largest finite 448, no infinities (output only) */
  NK_FLOAT8_E5M2 = 4,   /**< OCP float8 e5m2: largest finite 57344 (output only) */
  NK_INT8 = 5,          /**< signed 8-bit integer (quantized output only) */
  NK_FLOAT8_E8M0 = 6    /**< unsigned power of two 2^(byte - 127); MXFP8 block scales only */
} nk_dtype;

/**
 * Quantized output of the forward (nk_rms_norm_fwd_args.quant). In every mode, v[r][j] is the
 * float32 value the unquantized forward would round to y_dtype (except the rounding order
 * of NK_QUANT_TOKEN without bias: v = (s * w_eff) * rstd there, so that the row maximum
 * a[r] = (max_j |s * w_eff|) * rstd exactly and a kernel needs one row reduction, not
 * two), and Q(t) rounds t to y_dtype
 * to nearest even and saturates it to the finite range [-qmax, qmax] of y_dtype
 * (qmax = 448 for e4m3, 57344 for e5m2, 127 for int8, where -128 is never produced; NaN stays
 * NaN for FP8 and becomes 0 for int8). Scales are float32 unless stated, computed in float32.
 *
 *  - NK_QUANT_TENSOR: y[r][j] = Q(v[r][j] * scale[0]) with one float32 `scale` read from the
 *    backend's memory (so a training loop never synchronizes with the host).
 *  - NK_QUANT_TOKEN: per row, a[r] = max_j |v[r][j]|,
 *      scales[r] = max(min(a[r] / qmax, scale_ub or +inf), FLT_MIN),
 *      y[r][j] = Q(v[r][j] * (1 / scales[r]))   (the reciprocal rounded to float32 first).
 *    Dequantize with y * scales[r].
 *  - NK_QUANT_BLOCK: as NK_QUANT_TOKEN, but one scale per `quant_block` consecutive elements
 *    of a row (block b of row r covers columns [b*quant_block, (b+1)*quant_block)); scales is
 *    [rows, hidden / quant_block] float32, row-major and dense. scale_ub applies per block.
 *  - NK_QUANT_MXFP8: OCP MX: blocks of 32, one NK_FLOAT8_E8M0 scale byte per block in scales
 *    ([rows, hidden / 32], dense): with a = max |v| over the block and emax = 8 (e4m3) or 15
 *    (e5m2), e = clamp(floor(log2(a)) - emax, -127, 127) (e = -127 when a is 0 or subnormal
 *    below 2^-127), scale byte = e + 127, y = Q(v * 2^-e). Values above qmax * 2^e saturate.
 *
 * Block modes need hidden to be a multiple of the block size (no padding rule). Every mode
 * can also write `amax` = max |v| over the whole tensor, before any scaling (for delayed
 * scaling), and NK_QUANT_TENSOR can also write y transposed to `y_t`.
 */
typedef enum nk_quant_mode {
  NK_QUANT_NONE = 0,   /**< y is y_dtype, unscaled (y_dtype float32/float16/bfloat16) */
  NK_QUANT_TENSOR = 1, /**< per-tensor scale; y_dtype e4m3, e5m2 or int8 */
  NK_QUANT_TOKEN = 2,  /**< dynamic per-row scale; y_dtype e4m3, e5m2 or int8 */
  NK_QUANT_BLOCK = 3,  /**< dynamic per-block scale (32, 64 or 128); y_dtype e4m3 or e5m2 */
  NK_QUANT_MXFP8 = 4   /**< MXFP8: 1x32 blocks, e8m0 scales; y_dtype e4m3 or e5m2 */
} nk_quant_mode;

/** Where a call runs. */
typedef enum nk_backend {
  NK_BACKEND_CPU = 0,  /**< host memory, multithreaded */
  NK_BACKEND_CUDA = 1  /**< device memory on the current CUDA device */
} nk_backend;

/**
 * Forward: for each row r,
 *   s[r]   = x[r] + residual[r]              (only when residual != NULL; else s = x)
 *   rstd[r] = 1 / sqrt(mean_j(s[r][j]^2) + eps)
 *   y[r][j] = s[r][j] * rstd[r] * w_eff[j] + bias[j]
 * where w_eff = weight (or 1 + weight when zero_centered; 1 when weight is NULL) and the bias
 * term is dropped when bias is NULL. With a residual, residual_out[r] = s[r] rounded to
 * x_dtype is written, and s is normalized after that rounding (so y is a function of the
 * stored residual_out, as the backward pass needs).
 *
 * With quant != NK_QUANT_NONE the output y is quantized as described at nk_quant_mode.
 *
 * Initialize with nk_rms_norm_fwd_args_init() and set the fields you use.
 */
typedef struct nk_rms_norm_fwd_args {
  int64_t rows;   /**< number of rows, >= 1 */
  int64_t hidden; /**< number of columns (normalized size), >= 1 */

  const void* x;        /**< [rows, hidden], x_dtype, required */
  nk_dtype x_dtype;
  int64_t x_row_stride; /**< elements; 0 = hidden */

  const void* residual;        /**< [rows, hidden], x_dtype, optional */
  int64_t residual_row_stride; /**< elements; 0 = hidden */
  void* residual_out;          /**< [rows, hidden], x_dtype; required iff residual != NULL */
  int64_t residual_out_row_stride; /**< elements; 0 = hidden */

  const void* weight;    /**< [hidden], weight_dtype, optional (NULL = all ones) */
  const void* bias;      /**< [hidden], weight_dtype, optional */
  nk_dtype weight_dtype; /**< dtype of weight and bias; ignored when neither is given */
  int zero_centered;     /**< nonzero: scale by (1 + weight), the Gemma convention */
  float eps;             /**< added to the mean square; finite and >= 0 */

  void* y;              /**< [rows, hidden], y_dtype, required */
  nk_dtype y_dtype;
  int64_t y_row_stride; /**< elements; 0 = hidden */

  float* rstd; /**< [rows] float32, optional: 1/sqrt(mean square + eps) per row */

  /* Quantized output: see nk_quant_mode. A field the mode does not use must stay 0/NULL (as
   * nk_rms_norm_fwd_args_init leaves it): scale only with TENSOR, scales with TOKEN/BLOCK/MXFP8,
   * scale_ub with TOKEN/BLOCK, quant_block with BLOCK/MXFP8, y_t with TENSOR; any other
   * combination is NK_ERROR_INVALID_ARGUMENT. FP8 NaN is written as 0x7F with NaN's sign. */
  nk_quant_mode quant;  /**< NK_QUANT_NONE by default */
  int64_t quant_block;  /**< NK_QUANT_BLOCK: 32, 64 or 128 (0 = 128); NK_QUANT_MXFP8: 0 or 32 */
  const float* scale;   /**< NK_QUANT_TENSOR: [1] float32 in backend memory, required */
  float scale_ub;       /**< NK_QUANT_TOKEN/BLOCK: upper bound on every scale; 0 = none */
  void* scales;         /**< TOKEN: [rows] float32; BLOCK: [rows, hidden/block] float32;
                             MXFP8: [rows, hidden/32] e8m0 bytes. Required in those modes */
  float* amax;          /**< any quant mode, optional: [1] float32, max |v| over the tensor */
  void* y_t;            /**< NK_QUANT_TENSOR, optional: [hidden, rows] y_dtype, y transposed */
  int64_t y_t_row_stride; /**< elements between rows of y_t; 0 = rows */
} nk_rms_norm_fwd_args;

/**
 * Backward of nk_rms_norm_fwd. With s the normalized input (x, or residual_out when the
 * forward fused a residual), xhat = s * rstd and g = dy * w_eff:
 *   dx[r][j]   = rstd[r] * (g[j] - xhat[j] * mean_k(g[k] * xhat[k])) + dresidual_out[r][j]
 *   dweight[j] = sum_r dy[r][j] * xhat[r][j]
 *   dbias[j]   = sum_r dy[r][j]
 * When the forward had a residual, dx is the gradient for both x and residual.
 * dweight and dbias need a workspace: see nk_rms_norm_bwd_workspace_size().
 */
typedef struct nk_rms_norm_bwd_args {
  int64_t rows;   /**< >= 1 */
  int64_t hidden; /**< >= 1 */

  const void* dy;        /**< [rows, hidden], dy_dtype, required: gradient of y */
  nk_dtype dy_dtype;
  int64_t dy_row_stride; /**< elements; 0 = hidden */

  const void* x;        /**< [rows, hidden], x_dtype, required: the normalized input s */
  nk_dtype x_dtype;
  int64_t x_row_stride; /**< elements; 0 = hidden */

  const float* rstd; /**< [rows] float32, required: as written by the forward */

  const void* weight;    /**< [hidden], weight_dtype, optional (NULL = all ones) */
  nk_dtype weight_dtype; /**< dtype of weight, dweight and dbias; ignored when none is given */
  int zero_centered;     /**< as in the forward */

  const void* dresidual_out;        /**< [rows, hidden], x_dtype, optional: added into dx */
  int64_t dresidual_out_row_stride; /**< elements; 0 = hidden */

  void* dx;              /**< [rows, hidden], x_dtype, required */
  int64_t dx_row_stride; /**< elements; 0 = hidden */

  void* dweight; /**< [hidden], weight_dtype, optional: gradient of weight */
  void* dbias;   /**< [hidden], weight_dtype, optional */

  void* workspace;        /**< scratch for dweight/dbias partial sums, or NULL */
  size_t workspace_bytes; /**< size of workspace */
} nk_rms_norm_bwd_args;

/** Fills *args with defaults: NULL pointers, float32 dtypes, contiguous strides, eps 1e-6. */
NK_API void nk_rms_norm_fwd_args_init(nk_rms_norm_fwd_args* args);
/** Fills *args with defaults: NULL pointers, float32 dtypes, contiguous strides, no workspace. */
NK_API void nk_rms_norm_bwd_args_init(nk_rms_norm_bwd_args* args);

/**
 * RMSNorm forward on `backend`. `stream` is a cudaStream_t for NK_BACKEND_CUDA (NULL = the
 * default stream) and ignored for NK_BACKEND_CPU. Asynchronous on CUDA.
 */
NK_API nk_status nk_rms_norm_fwd(const nk_rms_norm_fwd_args* args, nk_backend backend,
                                 void* stream);

/**
 * Workspace query: the number of bytes nk_rms_norm_bwd needs in args->workspace for these
 * args (0 when neither dweight nor dbias is requested). The size depends only on rows,
 * hidden, which of dweight/dbias are requested, the backend and (for CUDA) the current
 * device. Pointers in args other than dweight/dbias are not looked at.
 */
NK_API nk_status nk_rms_norm_bwd_workspace_size(const nk_rms_norm_bwd_args* args,
                                                nk_backend backend, size_t* bytes);

/**
 * RMSNorm backward on `backend`. If dweight or dbias is requested, args->workspace must
 * point to at least nk_rms_norm_bwd_workspace_size() bytes (16-byte aligned) in the
 * backend's memory; calling with workspace == NULL fails with a message giving the size.
 */
NK_API nk_status nk_rms_norm_bwd(const nk_rms_norm_bwd_args* args, nk_backend backend,
                                 void* stream);

/** Message describing the last failed call on this thread ("" if none). Valid until the next call. */
NK_API const char* nk_last_error(void);

/** Name of a status ("NK_SUCCESS", ...). */
NK_API const char* nk_status_name(nk_status status);

/** Name of a dtype ("float32", "float16", "bfloat16", "float8_e4m3", "float8_e5m2", "int8",
 *  "float8_e8m0"), or "invalid". */
NK_API const char* nk_dtype_name(nk_dtype dtype);

/** Bytes per element of a dtype (0 for an invalid dtype). */
NK_API size_t nk_dtype_size(nk_dtype dtype);

/** Nonzero when this build contains the CUDA backend. */
NK_API int nk_has_cuda_build(void);

/** Number of usable CUDA devices (0 in a CPU-only build or without a driver/GPU). */
NK_API int nk_cuda_device_count(void);

/** For benchmark harnesses: enqueues on `stream` (a cudaStream_t; NULL: the default stream) a
 *  kernel that gives the cached L2 lines of [ptr, ptr + bytes) the normal eviction priority;
 *  the data is untouched. normkit's kernels read their inputs with an evict-last L2 policy
 *  where that pays, and such lines outlive an L2 "flush" that writes a large buffer at normal
 *  priority (cudaMemset, torch's zero_()): call this on each input before the flush, so that
 *  the flush leaves none of them in L2, as for a kernel that reads without a hint.
 *  `normkit bench` does this. bytes == 0 or ptr == NULL does nothing. Errors:
 *  NK_ERROR_NO_DEVICE without a CUDA build or device, NK_ERROR_CUDA if the launch fails. */
NK_API nk_status nk_cuda_demote_l2(const void* ptr, size_t bytes, void* stream);

/** Name of a quantization mode ("none", "tensor", "token", "block", "mxfp8"), or "invalid". */
NK_API const char* nk_quant_mode_name(nk_quant_mode mode);

/** Library version string, e.g. "0.1.0 (cuda sm_80,sm_90)". */
NK_API const char* nk_version(void);

/** The CPU backend's code paths on the CPU this process runs on, as one line: the x86-64 level
 *  of its row kernels, and the instructions behind its float16 conversions and bfloat16
 *  rounding (e.g. "row kernels x86-64-v4 (AVX-512); float16 AVX-512; bfloat16 rounding
 *  AVX512-BF16"). The results do not depend on them; their speed does. Never null; valid for
 *  the life of the process. */
NK_API const char* nk_cpu_paths(void);

#ifdef __cplusplus
}
#endif

#endif /* NORMKIT_NORMKIT_H */
