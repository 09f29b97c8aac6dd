// The launch configuration: a pure function of the problem (shape, dtypes, alignment) and the
// device facts. Plain C++ with no CUDA headers, so it is unit-testable on any machine and
// printable by `normkit bench --explain`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "normkit/normkit.h"

namespace normkit::cuda {

// How a kernel covers a row.
enum class RowPlan {
  kRegisters,  // a row (or a row chunk per cluster CTA) held in registers: one HBM pass
  kCluster,    // kRegisters with each row split over the CTAs of a thread-block cluster
  kStreaming,  // rows too long for on-chip storage: two passes, the second mostly from L2
  kPipelined,  // persistent; rows copied into shared memory kPipelineStages - 1 rows ahead
  kColumns,    // backward of few rows: one cluster, each CTA owning columns of every row
};

// Rows of at most this many vectors are short for KernelFacts::fwd_short_row_items.
constexpr int64_t kFwdShortRowVectors = 16;

// The registers backward's bound for 1-element vectors where KernelFacts::bwd_narrow_items asks
// for more than bwd_items_max(1) (its own kernel instantiation).
constexpr int kBwdNarrowItemsWide = 16;

struct KernelFacts {
  int sm_count = 132;
  bool cluster_launch = true;  // sm_90+
  int max_cluster = 8;         // 8 portable; 16 where the device allows non-portable sizes
  // The largest cluster of the pipelined kernels, for rows that need more than max_cluster
  // CTAs (non-portable on sm_90): 2 vectors per thread up to this many CTAs, then 4; 0 = off
  // (such rows take the streaming kernel). Measured 3x faster than streaming past 64K columns
  // (docs/notes.md v13), and 16 x 2 faster than 8 x 4 at 131072 (v19: 426 -> 319 us);
  // NK_TUNE_BWD_HUGE_ROW_CLUSTER overrides.
  int max_cluster_pipelined = 16;
  int64_t smem_per_block = 227 * 1024;  // opt-in maximum of dynamic shared memory per CTA
  int64_t smem_per_sm = 228 * 1024;
  // Pipelined backward: resident CTAs per SM it aims for, and vectors per thread per row.
  // Tuning knobs (NK_TUNE_BWD_CTAS_PER_SM, NK_TUNE_BWD_ITEMS override them for sweeps).
  int bwd_ctas_per_sm = 2;
  int bwd_items_target = 0;  // 0: the measured default
  // The pipelined backward's own resident CTAs per SM and slots per SM (0: bwd_ctas_per_sm;
  // NK_TUNE_BWD_PIPELINED_CTAS_PER_SM). The launcher caps the grid to the CTAs that registers
  // let reside, so 3 changes only rows of CTAs that small (160 or 192 threads at ~104
  // registers): they ran 2 CTAs per SM, 10 warps. Measured (thirty-second session, H100, bf16,
  // NK_TUNE_BWD_CTAS_PER_SM=3 against 2, twice in one call, the sweep and the models set):
  // 8192 x 2304 53.2 -> 47.4 us, 8192 x 2560 56.2 -> 51.7, every other shape level.
  int bwd_pipelined_ctas_per_sm = 3;
  // The pipelined backward's rows of fewer than 32 x 2 vectors (bf16 rows under 512 columns:
  // per-head QK norms of 64-256) on a power of two threads under a warp, several rows per warp
  // (NK_TUNE_BWD_SUB_WARP_ROWS): 1 (the default) rows of under 32 vectors (a warp per row
  // leaves lanes idle) where the rows fill 256-thread CTAs on a third of the SMs, and rows of
  // 32 to 63 vectors where they give each row group 3 rows or more (2 CTAs per SM); 2 wherever
  // the rows fill one such CTA; 0 a warp per row. Measured (thirty-third session, 22:52, H100,
  // bf16, twice in one call, settings 0/1/2): 262144 x 64 106.8 -> 53.4 us, 131072 x 128 62.9 ->
  // 48.9, 32768 x 128 0.97x, the rest level under 1. Setting 2 then lost where it left SMs idle
  // or lanes were not idle (2048 x 128 1.3x, 16384 x 256 1.07x); after the group sums moved
  // to the whole CTA (thirty-fourth session, 02:29, twice) it gained at 32 vectors with many
  // rows (65536 x 256 49.1 -> 44.3 us, 32768 x 256 0.92x, 16384 x 256 0.96-0.97x) and lost
  // with few (8192 x 256 1.05-1.08x, 4096 x 256 1.01-1.03x, 512 x 128 1.06-1.10x): the rows
  // of 32-63 vectors under setting 1. Rows of under 32 vectors (thirty-fifth session, 03:49,
  // twice): setting 2 gained from 48 CTAs of rows (1536-8192 x 128 0.89-1.00x, 2048-16384 x 64
  // 0.76-0.97x) and lost on 16-32 (512-1024 x 128 1.02-1.07x, 1024 x 64 1.05x): from a third
  // of the SMs under setting 1.
  int bwd_sub_warp_rows = 1;
  // Pipelined backward of unsplit rows: threads per CTA that its row groups fill (256 or 512;
  // NK_TUNE_BWD_CTA_THREADS). 512 keeps the threads per SM (two CTAs of 256 at ~101
  // registers, or one of 512: the launcher caps the grid to the CTAs resident at once) but
  // halves the CTAs and so the slots of partial sums that the reduction reads; CTAs of more
  // than 256 threads give way to at least one CTA per SM where the rows allow. Measured
  // (nineteenth session, H200, twice each in one call), 512 against 256: 8192 x 2048 0.97x the
  // time, but 4096 x 4096 1.13x, 8192 x 4096 1.08x, 16384 x 4096 1.04x, 4096 x 1024 1.01x; on
  // the H100 8192 x 2048, 16384 x 2048, 32768 x 2048 1.00-1.01x, 8192 x 3072 1.04x: 256.
  int bwd_cta_threads = 256;
  // The same for rows of 33-127 threads (whole warps: 64 or 96 threads, 513-1536 bf16
  // columns), where it is at least bwd_cta_threads (NK_TUNE_BWD_MID_ROW_CTA_THREADS).
  // Measured (thirty-fourth session, 02:06, H100, bf16, twice, after the groups' sums were
  // spread over the CTA), 512 against 256 for every row: 16384 x 1152 (96 threads) 54.9 ->
  // 49.8 us, 16384 x 1536 0.94x, 4096 x 1024 (64) 19.1 -> 18.3-18.5, 16384 x 896 0.99x; rows
  // of 128 threads level (8192 x 2048), of 160-256 1.01-1.03x slower (4096 x 4096 1.03x), of
  // 32 or fewer level.
  int bwd_mid_row_cta_threads = 512;
  // The backward of at most this many rows takes the registers kernels (plan) instead of the
  // pipelined one, where both apply (NK_TUNE_BWD_REGISTERS_MAX_ROWS; 0: never). Measured at 256
  // with the column sums (twenty-sixth session, H100): 1.2-1.9x slower at every aligned shape
  // of 2-256 rows (128 x 4096 8.2 -> 13.5 us).
  int64_t bwd_registers_max_rows = 0;
  // The registers backward's most vectors per thread for 1-element vectors (misaligned rows of
  // 16-bit data: 2-byte accesses) where bwd_items_max(1) = 8 would need a cluster of more than
  // max_cluster CTAs (non-portable sizes, fewer of them resident) or the two-pass streaming
  // kernel; up to kBwdNarrowItemsWide (NK_TUNE_BWD_NARROW_ITEMS; 8 restores the old plans).
  // Measured (seventeenth session, H100, twice in one call), 16 against 8: 29 x 17389 18.1 ->
  // 16.5 us (clusters of 5 instead of 9), 29 x 30001 24.6 -> 18.2, 601 x 30001 228.6 -> 147.2,
  // 29 x 40001 136.6 -> 26.0 (a cluster instead of streaming). Rows that fit max_cluster CTAs
  // of 8 keep 8 (plan_bwd): 16 there was 1.00-1.04x (9 x 1003 9.0 -> 9.3, 128 x 4095 18.3 ->
  // 18.5, 1024 x 16383 313.5 -> 314.0).
  int bwd_narrow_items = kBwdNarrowItemsWide;
  // 1: persistent backward plans with several slots sum their dweight/dbias partial sums in the
  // main kernel after a grid barrier (a cooperative launch; reduce_slots_in_grid) instead of in
  // a second kernel (NK_TUNE_BWD_REDUCE_IN_GRID; the launcher takes the second kernel anyway
  // where the grid cannot be resident at once). Measured slower (ninth session,
  // H100: 4096 x 1024 23.4 against 22.1 us, 128 x 4096 10.9 against 9.8; ncu: the barrier and
  // the sums cost the kernel ~5 us), so 0.
  int bwd_reduce_in_grid = 0;
  // The kernel that sums the slots otherwise (NK_TUNE_BWD_REDUCE_KERNEL): 0 reduce_partials (32
  // columns per CTA, up to 16 lanes of 4 chains each), 1 reduce_slots (a few columns per CTA,
  // about two CTAs per SM, one round of loads). And whether the main kernel lets it launch at
  // the main kernel's start (NK_TUNE_BWD_EARLY_DEPENDENT=1) or when the main kernel's CTAs exit
  // (0). Measured (ninth session, H100, the sweep twice in one run): 0 and 0 fastest at every
  // shape but 256 x 65536 (16 slots: reduce_slots 52.3 against 53.8 us); reduce_slots costs up
  // to 1.3 us (128 x 4096 11.1 against 10.0), the early launch 0.2-1 us. Setting 2 (the
  // pipelined kernel; the others as 0): each CTA allows it once its rows are done, before it
  // adds and writes its slot's sums, so that the launch overlaps the grid's last CTAs rather
  // than following them. Measured (thirty-fourth session, 02:06, H100, twice): level or
  // 1.01-1.03x slower (16384 x 512, 2048 x 128, 4096 x 1024 1.05x once).
  int bwd_reduce_kernel = 0;
  int bwd_early_dependent = 0;
  // The shared-memory carveout every normkit kernel asks for, in percent of the most shared
  // memory an SM offers (NK_TUNE_SMEM_CARVEOUT; cudaFuncAttributePreferredSharedMemoryCarveout):
  // -1 leaves the driver's choice. For the run-order offset (docs/notes.md, thirty-fifth
  // session): a forward timed after a backward is 0.5-0.8 us slower by its events although its
  // kernel is not (ncu), and the backward runs with 48-98 KB of shared memory per CTA, the
  // forward of 4096 x 1024 with none: if the SMs' L1/shared split changes between them, a
  // fixed carveout shows it. Not yet measured.
  int smem_carveout = -1;
  // How the pipelined backward's CTAs of several row groups add their groups' dweight/dbias
  // sums before writing their slot (NK_TUNE_BWD_GROUP_SUMS_BY_CTA): 1 every thread of the CTA
  // takes whole columns; 0 the first row group alone (its threads' own columns: at 128 columns
  // 8 threads adding 16 columns of 32 groups each, at the end of every CTA). The same sums in
  // the same order either way. Measured (thirty-fourth session, 01:53, H100, bf16, twice), 1
  // against 0: 32768 x 128 22.8 -> 18.7 us, 131072 x 128 48.7 -> 44.7, 4096 x 1024 21.5 ->
  // 19.2, 8192 x 2048 47.5 -> 45.1, 16384 x 512 30.1 -> 27.6; with a bias 0.77-0.86x there.
  int bwd_group_sums_by_cta = 1;
  // Split rows of more than kClusterDeferMaxItems vectors per thread (rows past 131072 bf16
  // columns: 16 CTAs of 512 threads x 4 vectors). bwd_smem_weight 1 (the default): they hold the
  // weight of their CTA's columns in shared memory after the stages, where it fits
  // (apply_split_row_extras), instead of re-reading it twice per row (KeptColumns keeps only up
  // to 2 vectors in registers, and beside 192 KB of stages L1 has no room for the chunk, so each
  // re-read went to L2); 0: re-read (NK_TUNE_BWD_SMEM_WEIGHT). bwd_pending_in_registers 1: they
  // keep the pending row, which completes one row late, in registers rather than in its stage,
  // which then takes a second row in flight (rms_norm_bwd_pipelined's PENDING_REGS; without dbias
  // and dresidual_out only); 0 (the default): in its stage, one row in flight
  // (NK_TUNE_BWD_PENDING_IN_REGISTERS). Measured (twenty-second session, H100, twice each in one
  // call, bf16, no bias), against both 0: smem weight 512 x 262144 381.8 -> 310.3 us (71% ->
  // 87.5% of copy), 300 x 262144 235.0 -> 192.6, 64 x 262144 70.7-75.3 -> 62.8, 512 x 200000
  // 361.3 -> 303.9; with the pending row in registers too 317.8, 198.7, 65.9 and 283.8 (better
  // only at 200000 columns; the H200 had it better everywhere); the pending row in registers
  // alone (weight re-read) 0.97-0.99x at 262144, 0.93x at 200000, 1.05x at 64 x 262144.
  int bwd_smem_weight = 1;
  int bwd_pending_in_registers = 0;
  // 1: backward rows that take the streaming plan (past what 16 pipelined CTAs hold: 262144
  // bf16 or 131072 float32 columns) run on a cluster of up to 16 CTAs per row instead of one
  // CTA, each streaming its chunk twice, the second time from L2, with the dweight/dbias sums in
  // shared memory as far as they fit, the rest in the workspace (rms_norm_bwd_cluster_streaming;
  // apply_cluster_streaming); 0: one CTA per row (NK_TUNE_BWD_CLUSTER_STREAMING). 1 (the
  // default) measured faster everywhere it applied (twenty-third session, H100, bf16): 256 x
  // 524288 2033 -> 562 us, 600 x 300000 2634 -> 823, 64 x 524288 728 -> 194; float32 512 x
  // 262144 1490 -> 838; with dbias 512 x 300000 3908 -> 778.
  int bwd_cluster_streaming = 1;
  // The most KB of shared memory those kernels' column sums take (0: as many as fit); the
  // passes past it accumulate in the workspace, and L1 keeps the rest of the SM's 256 KB
  // (NK_TUNE_BWD_STREAMING_SUMS_MAX_KB).
  int bwd_streaming_sums_max_kb = 0;
  // The most clusters such a backward runs at once (0, the default: as many as the SMs hold;
  // NK_TUNE_BWD_STREAMING_MAX_CLUSTERS). Fewer keep fewer rows' chunks in flight in L2 (1048576
  // columns: 7 clusters hold 28 MB of x and dy), but measured slower at every step (twenty-fifth
  // session, H100, twice each): 128 x 1048576 672 us at 7 clusters, 700 at 6, 754 at 5, 829 at
  // 4; 256 x 524288 455, 475, 528, 626; with dbias likewise. The rows in flight, not L2, bound it.
  int bwd_streaming_max_clusters = 0;
  // 1 (the default): forward rows that take the streaming plan run on a cluster of up to 16
  // CTAs per row in the same way (rms_norm_fwd_cluster_streaming; apply_fwd_cluster_streaming);
  // 0: one CTA per row (NK_TUNE_FWD_CLUSTER_STREAMING). Measured (same call): 256 x 524288
  // 311 -> 241 us, 128 x 1048576 442 -> 286, 64 x 524288 204 -> 73, 600 x 300000 465 -> 359,
  // float32 512 x 262144 563 -> 462, with the residual 256 x 524288 529 -> 417.
  int fwd_cluster_streaming = 1;
  // The cluster-streaming kernels can prefetch (the start of) each CTA's chunk of its next row
  // into L2 (one bulk request per tensor) once pass 1 of the current row has read it, so that
  // HBM works through the cluster's reduction and pass 2 (NK_TUNE_CLUSTER_STREAMING_PREFETCH):
  // 0 never, 1 always, 2 (the default) in the backward only. How much: a cap that keeps the
  // rows in flight and the prefetch within 40% of L2 (below). Measured (H100, twice each, µs):
  // the whole chunk helped only where the rows in flight were small (600 x 300000 795 -> 633,
  // 8 MB of chunks); at 256 x 524288 (14 MB) the first 16 KB per tensor was best (472 without,
  // 455, 463 with 32 KB, 511 with all 64 KB) and at 1048576 columns (28 MB) none (128 x 1048576
  // 671, 678 with 16 KB, 814 with all); float32 512 x 262144 750 -> 743 with 16 KB, 857 with all.
  // Every forward slower with it (256 x 524288 243.5 -> 248.6 with 16 KB, 297 with all) but
  // 600 x 300000 (358 -> 347). Twenty-third and twenty-fourth sessions, docs/notes.md.
  int cluster_streaming_prefetch = 2;
  // How much of each CTA's chunk of its next row the prefetch asks for, per tensor
  // (apply_streaming_prefetch): NK_TUNE_CLUSTER_STREAMING_PREFETCH_KB if set (> 0), else what
  // fits with the rows in flight within NK_TUNE_CLUSTER_STREAMING_L2_PERCENT of L2.
  int cluster_streaming_prefetch_kb = 0;
  int cluster_streaming_l2_percent = 40;
  int64_t l2_bytes = int64_t(50) << 20;
  // Pipelined forward: resident CTAs per SM, and the most rows for which it is chosen over the
  // registers kernel (NK_TUNE_FWD_CTAS_PER_SM, NK_TUNE_FWD_PIPELINE_MAX_ROWS).
  int fwd_ctas_per_sm = 2;
  int fwd_pipeline_max_rows = 264;
  // Whether rows split over a cluster take the pipelined forward (NK_TUNE_FWD_PIPELINE_CLUSTERS).
  int fwd_pipeline_clusters = 0;
  // Register plans split fewer rows than SMs over more cluster CTAs (to fill the device) only
  // from this many elements: below it a launch is dominated by latency and the split adds a
  // cluster barrier (NK_TUNE_SPLIT_FOR_FILL_ELEMENTS).
  int64_t split_for_fill_elements = int64_t(1) << 20;
  // CTA size that rows split over a cluster aim for: the forward registers kernel
  // (NK_TUNE_FWD_CLUSTER_THREADS) and the pipelined backward (NK_TUNE_BWD_CLUSTER_THREADS), the
  // latter for rows of up to bwd_cluster_threads_max_vectors vectors; longer rows take 512
  // (NK_TUNE_BWD_CLUSTER_THREADS_MAX_VECTORS). Measured (seventeenth session, H100, the sweep
  // twice in one call), 256 against 512 for every split row: 4096 x 12288 119.3 -> 113.9 us,
  // 1024 x 32768 85.7 -> 82.9, 2048 x 16384 81.8 -> 80.7 (two CTAs per SM, so one CTA's
  // cluster barriers overlap another's loads; the SMs used stay as they were: 1024 x 32768
  // launches 30 resident clusters either way, of 4 CTAs or of 8), but 256 x 65536 53.3 -> 53.7
  // and, on the second day's kernels, 1024 x 131072 319 -> 394: rows past 4096 vectors (32768
  // 16-bit columns) keep 512.
  int fwd_cluster_threads = 512;
  int bwd_cluster_threads = 256;
  int64_t bwd_cluster_threads_max_vectors = 4096;
  // The forwards' CTAs of several short rows: as many rows as take up to this many threads, in
  // the plain forward (NK_TUNE_FWD_CTA_THREADS) and the quantized one (NK_TUNE_QUANT_CTA_THREADS).
  // Measured (fifteenth session, H100, twice each in one call), 128 against 256 (rows of 2048 and
  // 4096 columns then one or two per CTA, not two or four): quantized per-block 0.93-0.95x the
  // time at 4096 x 4096, 8192 x 2048, 8192 x 4096, 16384 x 4096 (84.6 -> 80.2 us), MXFP8
  // 0.93-0.94x, token 0.97-0.99x, per-tensor 0.99-1.00x; but the plain forward 1.05-1.10x
  // slower (4096 x 4096 27.7 -> 30.4, 8192 x 4096 49.9 -> 54.5).
  int fwd_cta_threads = 256;
  int quant_cta_threads = 128;
  // Most CTAs per cluster for the forward registers kernel (NK_TUNE_FWD_MAX_CLUSTER; over 8 is
  // a non-portable size).
  int fwd_max_cluster = 8;
  // The plain forward's rows of 16-byte vectors that one CTA cannot hold (past 32768 bf16
  // columns) split over clusters of CTAs of this many threads where such CTAs hold them at up
  // to kSmallItems vectors within fwd_max_cluster CTAs (NK_TUNE_FWD_WIDE_ROW_THREADS; 0: as
  // fwd_cluster_threads says). Measured (fifteenth session, H100, twice each in one call): 256 x
  // 65536 32.2-32.4 -> 31.3-31.4 us (eight CTAs of 256 threads against four of 512), where the
  // same 256-thread CTAs for rows one CTA holds were slower (1024 x 32768 51.5 -> 53.7-54.2).
  int fwd_wide_row_threads = 256;
  // The most CTAs of fwd_wide_row_threads such a row may take (NK_TUNE_FWD_WIDE_ROW_MAX_CLUSTER;
  // past 8 a non-portable size; fwd_max_cluster where that is larger): rows of up to 131072
  // bf16 columns on as many 256-thread CTAs as they need rather than clusters of 512-thread ones.
  // Measured (nineteenth session, H100, twice each in one call), 16 against 8: 1024 x 131072
  // 214.1 -> 210.8 us (85.9% of copy), 2048 x 131072 419.4 -> 413.1, 512 x 100000 110.3 ->
  // 107.0, 64 x 131072 21.1 -> 20.6, 1 x 131072 7.33 -> 7.05; 256 x 65536 (8 CTAs either way)
  // level.
  int fwd_wide_row_max_cluster = 16;
  // Forward rows of 8- or 16-byte vectors that need more than fwd_max_cluster CTAs at the small
  // register budget take clusters of up to this many (non-portable past 8), else the streaming
  // kernel (NK_TUNE_FWD_WIDE_ROW_CLUSTER; 0: streaming). Measured (docs/notes.md v16): 512 x
  // 262144 in 245 us on 16 CTAs against 284 streaming, once the cluster sum stopped waiting on
  // a cluster barrier.
  int fwd_wide_row_cluster = 16;
  // Clusters of 16-byte vectors on CTAs of half the threads at twice the vectors per thread
  // (the large register budget), so that more of a cluster's CTAs share an SM
  // (NK_TUNE_FWD_WIDE_ROW_LARGE_ITEMS). 1: those past fwd_max_cluster CTAs and the wide-row
  // rule's (rows past 131072 bf16 columns: 512 x 262144 on 16 CTAs of 256 threads x 8 vectors
  // rather than 512 x 4); 2 (the default): also the wide-row rule's own clusters (rows of
  // 32K-131K columns: 1024 x 131072 on 16 CTAs of 128 threads x 8 vectors) where the launch has
  // more than 3.5 CTAs per SM; 3: those everywhere; 0: the former plans. Measured (H100, twice
  // each in one call), 1 against 0 (nineteenth session): 512 x 262144 230.8 -> 195.3 us (78% ->
  // 92.6% of copy), 300 x 262144 138.7 -> 120.0, 512 x 200000 239.4 -> 203.1, 64 x 262144 36.9
  // -> 34.3; 3 against 1 (twentieth): 1024 x 131072 210.8 -> 196.8 (85.8% -> 92%), 2048 x
  // 131072 413 -> 380, 1024 x 98304 162.0 -> 145.5, 1024 x 65536 102.7 -> 96.6, 512 x 100000
  // 106.7 -> 90.4, 32 x 131072 (512 CTAs) 12.5 -> 11.2, 64 x 131072 20.6 -> 20.3, 256 x 65536
  // level, but launches of up to 448 CTAs 1.10-1.17x slower (16 x 131072 8.5 -> 9.9, 28 x
  // 131072 9.8 -> 11.1, 1 x 131072 7.5 -> 8.6): hence 2, whose threshold sits where the
  // 256-thread plans pass a wave of resident clusters (131072 columns: 9.8 us at 448 CTAs, 12.3
  // at 464; 58 x 65536 and 38 x 98304 straddle it the wrong way by ~1 us).
  int fwd_wide_row_large_items = 2;
  // Rows of 4- to 16-byte vectors that one CTA holds at the large register budget (more than
  // kSmallItems vectors per thread: bf16 rows of 16K-32K columns) get one CTA per row when there
  // are 4 x SMs rows or more (measured v14: 1024 x 32768 59 against 67 us on clusters of two);
  // NK_TUNE_FWD_SPLIT_WIDE_ROWS splits them over a cluster of two at the small budget anyway:
  // 1 in every forward, 2 (the default) in the quantized forwards with dynamic scales (TOKEN,
  // BLOCK, MXFP8), 0 never. Measured (ninth session, H100; 1024 x 32768, 600 x 32768, 2048 x
  // 24576; one CTA per row -> split): token 68.3 -> 51.7, 46.4 -> 34.6, 105.0 -> 83.5 us (its
  // folded one-reduction kernel then applies), block 0.90-0.96x, mxfp8 0.91-0.98x; tensor
  // 0.97-1.04x and the plain forward of 16-bit x 1.04-1.15x, so those keep one CTA per row.
  // Setting 2 also splits the plain forward's float32 rows (plain_fwd_facts): forty-second
  // session (H100, twice): 1024 x 32768 116.4 -> 95.3 us (the pipelined clusters of 8 that
  // such rows took before -> 4 CTAs of 4 vectors per thread), 2048 x 32768 0.82x, 4096 x 12288
  // 0.94x, 1024 x 16384 0.96x, 512 x 32768 and 256 x 65536 level.
  int fwd_split_wide_rows = 2;
  // The pipelined backward splits a row over a cluster when it has more vectors than this
  // (NK_TUNE_BWD_SPLIT_VECTORS). Measured (docs/notes.md v16-v17): 12K-16K columns of 8-element
  // vectors run faster on clusters of 2 CTAs at 2 vectors per thread than on one CTA at 3-4
  // (2048 x 16384: 94.5 -> 88.3 us), and float32 rows of 12K-16K columns 64% -> 82-85% of copy.
  // The forward splits from kPipelineMaxThreads x kPipelineItems.
  int bwd_split_vectors = 1024;
  // Whether the forward takes 16-bit rows misaligned alike for x and y as a head and aligned
  // 8-element vectors (plan_fwd_realigned; NK_TUNE_FWD_REALIGN=0: element by element), from
  // this many elements (NK_TUNE_FWD_REALIGN_MIN_ELEMENTS). Measured (docs/notes.md v22): 1.5-2x
  // faster from 16M elements (4096 x 4095: 80 -> 52 us), slower on small launches (29 x 17389:
  // 9.3 vs 8.8 us, 64 x 1001: 8.6 vs 5.5).
  int fwd_realign = 1;
  int64_t fwd_realign_min_elements = int64_t(1) << 20;
  // ... and below that, in calls of a weight alone, rows a cluster splits (longer than one
  // registers CTA holds: 16K+ columns) on the realigned kernel too, split to fill the device as
  // from split_for_fill_elements (NK_TUNE_FWD_REALIGN_CLUSTERS; 0: element by element).
  // Measured (forty-ninth session, H200, under the knobs that give these plans, twice each,
  // after the realigned kernels loaded every weight pair before shifting one): 29 x 17389
  // 8.35-8.46 -> 7.33-7.38 us, 1 x 17389 7.52-7.73 -> 7.10-7.20, 4 x 17389 8.19-8.35 ->
  // 6.93-7.36, 2 x 65537 9.33-9.44 -> 7.28-7.38 (bench/results/2026-11-28T1000-h200-realign-
  // pairs-first); the general kernel form (bias, zero-centred) 0.9-1.9 us slower than the
  // weight-only one on these plans (T1008-h200-few-rows-normkit): those calls take the rule on
  // the lean kernel only (fwd_realign_lean_general).
  int fwd_realign_clusters = 1;
  // ... and 64 rows or more that one CTA holds, in calls of a weight alone (and the others on
  // the lean kernel: fwd_realign_lean_general), on the realigned kernel of one row per CTA from
  // this many elements where they are longer than 2048 columns (which the element-by-element
  // kernel splits over a cluster;
  // NK_TUNE_FWD_REALIGN_LONG_ROWS_MIN_ELEMENTS), from this many where they are not
  // (NK_TUNE_FWD_REALIGN_SHORT_ROWS_MIN_ELEMENTS).
  // Measured (fiftieth session, H200, twice each, element by element -> realigned; the slots
  // kernel slower than the one-row kernel on each): rows past 2048 columns 64 x 4095 6.93 ->
  // 7.18 us, 64 x 5001 7.43 -> 6.95, 80 x 4095 7.42 -> 7.26, 90 x 4095 7.48 -> 7.21, 96 x 4095
  // 7.54 -> 7.28, 64 x 8191 8.30 -> 7.55, 200 x 3001 9.85 -> 7.25, 256 x 4095 10.53 -> 7.81,
  // 128 x 8191 11.24 -> 8.00; rows of 2048 columns or fewer 128 x 2047 6.48 -> 7.17, 512 x 1001
  // 6.93 -> 7.33, 256 x 2047 7.12 -> 7.33, 320 x 2047 7.79 -> 7.35, 700 x 1001 7.42 -> 7.36,
  // 360 x 2047 7.78 -> 7.42, 384 x 2047 7.89 -> 7.68, 1024 x 1001 8.95 -> 7.71
  // (bench/results/2026-11-28T1136-h200-realign-rows-below-1m, T1156-h200-realign-defaults).
  // Re-timed on the lean kernel (fifty-first session, H200, twice each): 64 x 4095 6.67-6.75 ->
  // 6.27-6.30 (the long threshold 288K -> 240K), 64 x 3001 6.59-6.69 -> 6.59-6.61, 128 x 2047
  // 6.34 -> 6.34-6.35, 256 x 2047 6.90-7.01 -> 6.51-6.53, 512 x 1001 6.70-6.75 -> 6.94-6.98,
  // 128 x 1500 6.05 -> 6.27-6.45, 300 x 1500 6.00-6.14 -> 6.40-6.53, 400 x 1300 6.05-6.62 ->
  // 6.37-6.46, 600 x 1001 7.01-7.23 -> 7.25-7.33 (bench/results/2026-11-28T1315-h200-lean-
  // thresholds).
  int64_t fwd_realign_long_rows_min_elements = int64_t(240) << 10;
  int64_t fwd_realign_short_rows_min_elements = int64_t(600) << 10;
  // ... given this many rows or more (NK_TUNE_FWD_REALIGN_ROWS_MIN_ROWS): fewer, one CTA each,
  // leave most SMs idle where the element-by-element kernel splits them (fiftieth session,
  // against rms_norm_fwd_realigned: 32 x 8191 level, 8 x 12287 0.7 us slower).
  int64_t fwd_realign_rows_min_rows = 64;
  // ... and rows past 2048 columns below those bounds, from this many rows
  // (NK_TUNE_FWD_REALIGN_LEAN_ROWS_MIN_ROWS), where the plan is rms_norm_fwd_realigned_lean's
  // (else element by element). Measured (fifty-first session, H200, twice each, element by
  // element -> lean): 32 x 4095 6.51-6.56 -> 5.95-6.02 us, 40 x 4095 6.53-6.56 -> 5.98-6.00,
  // 48 x 4095 6.59-6.62 -> 6.05-6.08, 32 x 8191 7.20-7.22 -> 6.45-6.66, 16 x 8191 6.56-6.59 ->
  // 6.29-6.35, 48 x 3001 6.50-6.56 -> 6.32-6.38; 16 x 16383, whose plan the lean kernel does
  // not cover, 7.20-7.22 -> 7.78-8.14 on rms_norm_fwd_realigned (bench/results/
  // 2026-11-28T1339-h200-rows-floor).
  int64_t fwd_realign_lean_rows_min_rows = 16;
  // ... those realigned plans of calls of a weight alone on rms_norm_fwd_realigned_lean (each
  // row read as the aligned vectors that overlap it, no head thread, 32-bit offsets, a 72-byte
  // parameter block: fewer instructions, as bench/few_rows_probe.cu's kernel, which ran 0.85 us
  // shorter than rms_norm_fwd_realigned on one split of 29 x 17389 under ncu) where the plan's
  // threads cover the row's aligned vectors (realigned_lean_covers), one row per CTA
  // (NK_TUNE_FWD_REALIGN_LEAN; 1: cluster plans only; 0: rms_norm_fwd_realigned). A one-row plan
  // one vector short of the window is planned for 7 more columns. Measured (fiftieth session,
  // H200, twice each): cluster plans 29 x 17389 7.66 -> 7.03 us, 4 x 17389 7.05 -> 6.55,
  // 2 x 65537 7.52 -> 7.01, 3 x 40001 7.29 -> 6.78, 8 x 20001 7.07 -> 6.51, 61 x 17389 8.33 ->
  // 7.83, 1 x 17389 level (bench/results/2026-11-28T1147-h200-realign-lean); one-row plans
  // through the probe, each output checked, 96 x 4095 7.07 -> 6.3-6.4, 256 x 4095 7.58 ->
  // 7.0-7.1, 64 x 8191 7.36 -> 6.85, 320 x 2047 7.33 -> 6.7, 200 x 3001 7.01 -> 6.94
  // (T1201-h200-lean-one-row-probe).
  int fwd_realign_lean = 2;
  // ... and, compiled apart, for calls of a weight with a bias or zero-centring
  // (NK_TUNE_FWD_REALIGN_LEAN_GENERAL): their realigned plans where the lean kernel covers the
  // row, and below fwd_realign_min_elements the rules of calls of a weight alone (clusters that
  // fill the device; the rules of rows one CTA holds), taken only where the lean kernel covers
  // the plan (else element by element, as with 0). Measured (fifty-first
  // session, H200, medians of three, 0 -> 1): with a bias 29 x 17389 12.61 -> 7.79 us,
  // 4 x 17389 12.32 -> 7.23, 61 x 17389 10.66 -> 8.48, 256 x 4095 11.94 -> 7.49, 200 x 3001
  // 10.54 -> 7.39, 96 x 4095 8.06 -> 6.91; zero-centred 29 x 17389 8.74 -> 7.87, 2 x 65537
  // 9.73 -> 7.58, 256 x 4095 10.46 -> 7.36, 64 x 4095 6.86 -> 6.91 (bench/results/
  // 2026-11-28T1330-h200-lean-general). 2: calls without a weight too (with or without a
  // bias; the weight taken as ones), which below 1M elements had run element by element.
  // Measured (fifty-second session, H200, two runs each, 1 -> 2): no weight 29 x 17389 8.56 ->
  // 7.76 us (a weight alone 6.85), 4 x 17389 8.33 -> 6.86, 256 x 4095 10.36 -> 7.39,
  // 200 x 3001 9.57 -> 7.08, 2 x 65537 9.00 -> 7.44; a bias and no weight 12.17 -> 7.62,
  // 12.03 -> 6.90, 11.78 -> 7.33, 10.27 -> 7.12, 9.46 -> 7.39 (bench/results/
  // 2026-11-28T1455-h200-lean-no-weight).
  int fwd_realign_lean_general = 2;
  // ... and there, as a persistent grid whose slots hold rows of one head each
  // (plan_fwd_realigned_slots, rms_norm_fwd_realigned_slots: the weight and bias shifted once
  // per slot) where one CTA holds the row (NK_TUNE_FWD_REALIGN_SLOTS; 0: the realigned kernel
  // of one row per CTA). Measured (twenty-ninth session, H100): 4096 x 4095 51.7 -> 37.9 us,
  // 8192 x 2049 66.9 -> 41.8, 1024 x 16383 52.4 -> 43.3, 16384 x 4095 183.9 -> 125.1,
  // 300 x 4095 9.6 -> 9.2, 1050 x 1001 9.4 -> 8.8.
  int fwd_realign_slots = 1;
  // ... its CTAs holding rows in groups of threads that share one shifted weight and bias, up to
  // this many threads per CTA (NK_TUNE_FWD_REALIGN_SLOT_CTA_THREADS; 0, the default: one row
  // group per CTA). Tried after ncu showed 4096 x 1001's 2112 CTAs each shifting them for about
  // 2 rows; measured no faster (thirtieth session: 4096 x 1001 15.1 us at 256 threads against
  // 15.0, 16384 x 1001 41.8 at 512 against 38.1): the shift is not what those rows wait on.
  int fwd_realign_slot_cta_threads = 0;
  // The persistent realigned kernels of both passes, and the few-row realigned backward,
  // compiled for a weight with no bias, not zero-centred (backward: dweight, no dbias; the
  // few-row one a weight, not zero-centred), taken where a call is such
  // (NK_TUNE_REALIGN_WEIGHT_ONLY, default 1; 0: the general kernels, which test those at run
  // time per element). Thirtieth session: those tests cost about a third of the forward's
  // instructions in its output loop, and the kernels are short of issue slots.
  int realign_weight_only = 1;
  // The persistent realigned forward's rows at this many vectors per thread where 256 threads
  // at that many hold the row (NK_TUNE_FWD_REALIGN_SLOT_ITEMS: 2 or 4; 0, the default: 4 where
  // the row then takes more than one warp, else 2). Thirtieth session, H100: at 4, 0.90-0.95x
  // the time of 2 from 2049 columns (4095 on 128 threads as the aligned forward's 4096, not
  // 256; 16384 x 4095 117 -> 105 us), 1.04x at 4096 x 1001 (one warp per row); 4 had measured
  // slower when that kernel took 117-123 registers (its weight-only form takes 64).
  int fwd_realign_slot_items = 0;
  // The persistent realigned backward's rows at 4 vectors per thread where the row then takes
  // more than a warp (NK_TUNE_BWD_REALIGN_SLOT_ITEMS: 2 everywhere, or 4 on every such row,
  // unlike the forward's 4, which takes one-warp rows too; 0, the default, the rule
  // of bwd_realign_four_items_by_rule: 4 where the plan of 2 would not be pinned, or would be
  // pinned at one row per CTA under kBwdRealignPinnedOneRowMinRows rows). The kernel of 4 is not
  // pinned (122 registers, weight-only: one CTA of 512 threads per SM). Thirty-first session,
  // H100, us (2 / 4): unpinned plans of 2 4096 x 1025 34.6 / 28.0, 16384 x 1025 109.2 / 74.9,
  // 1024 x 8191 53.9 / 42.8, 1024 x 2049 19.7 / 19.1; pinned, one row per CTA 2048 x 8191
  // 79.9 / 68.4, 3000 x 5001 74.2 / 64.3, 4096 x 4097 80.9 / 77.7, but 8192 x 8191 203 / 218,
  // 16384 x 7167 350 / 390; pinned, several rows per CTA 4096 x 4095 62.7 / 67.2, 8192 x 2049
  // 67.4 / 77.9, 4096 x 1537 33.4 / 34.9.
  int bwd_realign_slot_items = 0;
  // The backward of at most this many elements takes one cluster whose CTAs own columns of
  // every row (plan_bwd_columns) where the rows fit its shared memory
  // (NK_TUNE_BWD_COLUMNS_MAX_ELEMENTS; 0: never). Off: measured slower than the default plans
  // on most few-row shapes in all three versions (docs/notes.md, fifth and sixth sessions; v3,
  // 2026-11-23: 128 x 4096 18.8 us against 9.9, 29 x 17389 23.1 against 18.4), faster only on
  // single misaligned rows (1 x 17389 8.8 against 28.2) and at 2 x 17389 and 8 x 4095 (0.88x).
  int64_t bwd_columns_max_elements = 0;
  // The backward of at most bwd_column_sums_max_rows rows and this many elements sums
  // dweight/dbias down the columns in a kernel beside the main one (apply_column_sums,
  // rms_norm_bwd_column_sums) instead of per-slot partial sums and a reduction kernel after it
  // (NK_TUNE_BWD_COLUMN_SUMS_MAX_ELEMENTS; 0: never). Its kernel reads x and dy a second time,
  // which few rows can afford: their backward waits on latency, not on bytes. Measured
  // (twenty-sixth session, H100, bf16, twice each in one call), against the slots' partial sums:
  // 0.75-0.90x the time at every shape of up to 1M elements (29 x 17389 16.4 -> 13.0 us, 128 x
  // 4096 9.5 -> 7.7-8.3, 256 x 2048 11.4 -> 8.5), 0.58-0.83x with dbias; past that 256 x 8192
  // 0.93x and 200 x 10000 1.00x (2M elements), but 256 x 16384 1.06x, 128 x 32768 1.03x (4M)
  // and 256 x 65536 1.39x slower. With the groups of a warp added by shuffles (10:11): 128 x
  // 4096 7.90, 256 x 2048 8.1 (0.71x), 0.54-0.83x with dbias.
  int64_t bwd_column_sums_max_elements = int64_t(2) << 20;
  // ... and at most this many rows (NK_TUNE_BWD_COLUMN_SUMS_MAX_ROWS), or with dbias, whose
  // slots cost more, this many (NK_TUNE_BWD_COLUMN_SUMS_MAX_ROWS_DBIAS). Measured past 256 rows
  // (twenty-sixth session, H100, bf16): without dbias 512 x 4096 1.08x, 2048 x 1024 1.15x,
  // 1024 x 1024 0.96x; with it 2048 x 1024 0.93x, 512 x 4096 0.85x, 1024 x 1024 0.78x,
  // 2048 x 2048 0.87x but 1024 x 4096 1.03x; past 2048 rows 1.2-2.2x slower either way (the
  // column kernel's batches of rows run one after another).
  int64_t bwd_column_sums_max_rows = 256;
  int64_t bwd_column_sums_max_rows_dbias = 2048;
  // Whether the backward takes 16-bit rows misaligned alike for x, dy, dx and dresidual_out (or
  // aligned rows that 8-element vectors do not cover) as a head and aligned 8-element vectors,
  // dx alone (plan_bwd_realigned, rms_norm_bwd_realigned;
  // NK_TUNE_BWD_REALIGN=0: element by element; 2: rows of whole vectors too, instead of the
  // pipelined kernel), within bwd_realign_sums_max_rows and _max_elements (below); its CTAs of
  // bwd_realign_threads threads (NK_TUNE_BWD_REALIGN_THREADS) at about bwd_realign_items vectors
  // per thread (NK_TUNE_BWD_REALIGN_ITEMS; 0: two where the grid still fills the SMs, else one),
  // a row split over a cluster as far as that needs. Measured (twenty-seventh session, H100,
  // bf16, against element by element): 29 x 17389 12.9 -> 9.9 us, 256 x 4095 26.0 -> 12.0,
  // 200 x 10001 52.2 -> 21.7, 2 x 65537 15.1 -> 10.8, 32 x 8191 12.9 -> 8.7; 64 x 1001 and 9 x
  // 1003 unchanged.
  int bwd_realign = 1;
  int bwd_realign_threads = 256;
  int bwd_realign_items = 0;
  // ... within these bounds of rows and elements, with or without dbias
  // (NK_TUNE_BWD_REALIGN_SUMS_MAX_ROWS, _MAX_ELEMENTS), wider than the column sums' own beside
  // the other kernels. Measured (twenty-eighth session, H100, bf16, against
  // plan_bwd_realigned_slots): 300 x 4095 25.9 -> 14.9 us, 512 x 4095 30.1 -> 19.3, 1024 x 2049
  // 26.1 -> 24.0, 2048 x 1001 33.1 -> 30.1, 512 x 17389 82.3 -> 72.1 (element by element);
  // 1024 x 4095 37.3 -> 38.8; 1024 x 16383 (16.8M elements) 90.8 -> 131.9, 4096 x 4095 85 -> 295.
  int64_t bwd_realign_sums_max_rows = 2048;
  int64_t bwd_realign_sums_max_elements = int64_t(9) << 20;
  // ... but where the persistent realigned kernel (below) takes the rows, it comes first past
  // this many rows, or past half as many rows and this many elements
  // (NK_TUNE_BWD_REALIGN_SLOTS_FIRST_ROWS, _FIRST_ELEMENTS). Measured (twenty-ninth session,
  // H100, bf16, rows in groups; column sums against slots, us): 2048 x 4095 96.9 / 48.0,
  // 2048 x 2049 52.1 / 33.7, 1024 x 4095 38.7 / 30.0, 1024 x 8191 71.4 / 59.2, 1536 x 1001
  // 24.9 / 19.2, 2048 x 1001 29.9 / 20.1, 2048 x 513 19.6 / 16.8, 1024 x 2049 23.8 / 21.7; the
  // column sums faster at 512 x 8191 32.9 / 40.3, 1024 x 1001 14.5 / 15.4, 1024 x 513
  // 11.0 / 13.1, 512 x 4095 19.1 / 20.5, 512 x 1001 10.2 / 13.3, 300 x 4095 14.9 / 19.3,
  // 256 x 4095 12.0 / 16.0; 512 x 16383 66.1 / 64.7 (the column sums: the few rows past 8191
  // columns wait for the next measurement).
  int64_t bwd_realign_slots_first_rows = 1024;
  int64_t bwd_realign_slots_first_elements = int64_t(2) << 20;
  // ... and rows of whole vectors too (instead of the pipelined kernel) from this many columns
  // (NK_TUNE_BWD_REALIGN_WHOLE_MIN_COLUMNS; 0: never) up to bwd_realign_whole_max_elements
  // elements. Measured (twenty-seventh session, bf16, against the pipelined kernel; H200 at
  // 12:05, H100 at 11:54 where named): 1M elements 0.81-0.87x the time (16 x 65536, 8 x 131072,
  // 32 x 32768, 31 x 32768; H100 31 x 32768 0.83-0.86x), 2-4 x 65536 0.92-0.96x; 2M elements
  // 1.10-1.12x (64 x 32768, 16 x 131072, 128 x 16384); rows of up to 8192 columns 1.04-1.19x
  // (H100: 128 x 4096, 64 x 4096, 256 x 2048, 32 x 8192, 150 x 3000, 256 x 8192).
  int64_t bwd_realign_whole_min_columns = 32768;
  int64_t bwd_realign_whole_max_elements = int64_t(1) << 20;
  // Whether 16-bit rows that 16-byte vectors do not cover take the persistent realigned kernel
  // (plan_bwd_realigned_slots: each slot's rows share their head, so each thread sums dweight/
  // dbias of the same columns in every row) where the column sums' plan above does not apply
  // (1, the default), also instead of it (2), or never (0: element by element)
  // (NK_TUNE_BWD_REALIGN_SLOTS).
  int bwd_realign_slots = 1;
  // ... whose CTAs take rows in groups of threads, a row (and a slot) each, up to this many
  // threads (NK_TUNE_BWD_REALIGN_SLOT_CTA_THREADS; 0: one row per CTA) and rows
  // (NK_TUNE_BWD_REALIGN_SLOT_CTA_ROWS, at most kRealignSlotRowsMax) per CTA. With one row per
  // CTA, the 264 CTAs that the workspace's slots allow held 64 threads each at 1001 columns.
  // Measured (twenty-ninth session, H100; one row per CTA / 256 threads / 512 threads up to 8
  // rows, us): 4096 x 1001 55.0 / 29.3 / 29.1, 8192 x 1001 99.8 / 46.7 / 47.3, 16384 x 1001
  // 185.3 / 79.9 / 82.4, 8192 x 513 93.5 / 35.9 / 37.0, 4096 x 2049 63.8 / 63.8 / 54.4,
  // 4096 x 4095 86.1 / 86.0 / 82.9, 2100 x 4095 55.7 / 55.6 / 51.3 (element by element: 42.5,
  // 73.8, 136.7, 62.6, 180.6, 241.3, 129.7).
  int bwd_realign_slot_cta_threads = 512;
  int bwd_realign_slot_cta_rows = 4;
  // ... its kernel of up to 2 vectors per thread held to 64 registers (a few spilled; two CTAs
  // of 512 threads fit an SM rather than one at 103) from 2048 rows of 128 or more threads (1,
  // the default), everywhere (2), or never (0) (NK_TUNE_BWD_REALIGN_SLOT_PINNED). Measured
  // (twenty-ninth session, H100, bf16, us, 103 registers / 64): 4096 x 4095 81.9 / 71.9,
  // 4096 x 4097 114.4 / 88.0, 8192 x 2049 94.4 / 76.9, 4096 x 2049 53.7 / 47.5, 2100 x 4095
  // 51.3 / 45.2, 2048 x 4095 47.5 / 45.0; slower at 1024 rows (1024 x 8191 58.8 / 65.2,
  // 1024 x 2049 21.5 / 23.0, 1024 x 4095 29.6 / 30.5) and on rows of 64 threads (4096 x 1001
  // 29.1 / 31.3, 16384 x 1001 79.0 / 85.6, 8192 x 513 35.6 / 36.6).
  int bwd_realign_slot_pinned = 1;
  // Quantized forward, registers kernel (16-byte vectors, 16-bit weights): where the weight is
  // loaded (NK_TUNE_QUANT_WEIGHT_FIRST). 1 (the default): with x, before the row reduction, in
  // every mode but TOKEN at the small register budget (there it costs a CTA per SM); 0: TOKEN and
  // BLOCK load it per item after the reduction, as before docs/notes.md "fifth session" (the
  // SASS showed each such load waiting behind the previous item's code stores); 2: with x in
  // TOKEN's small budget too. Measured (sixth session, H100): 1 against 0, BLOCK 0.92-0.99x
  // the time, TOKEN 0.93x at 1024 x 32768 and 1.00x elsewhere, TENSOR and MXFP8 1.00x; 2 was
  // 1.10-1.43x slower for TOKEN with a bias.
  int quant_weight_first = 1;
  // Quantized forward, registers kernels: amax added per CTA after two barriers (0, the
  // default), or per warp without barriers (1: warp_amax_to_global; NK_TUNE_QUANT_AMAX_PER_WARP).
  // Measured (twelfth session, H100, each twice in one call): 1 against 0, tensor 4096 x 4096
  // 1.11x the time, 8192 x 2048 1.11x, 8192 x 4096 1.05x, 8192 x 8192 1.01x (token up to 1.20x
  // at 4096 x 1024), but 1024 x 32768 0.95x and 32768 x 8192 0.98x: the first wave's warps all
  // update the one word (their amax_seen reads 0). Again (twenty-first session, with the wide
  // rows on clusters): 1.01-1.15x at every shape timed, 2048 x 16384 and 1024 x 32768 included.
  int quant_amax_per_warp = 0;
  // Quantized forward, registers kernels whose row sum spans warps (threads per row past 32),
  // without quant_amax_per_warp: 1 adds the CTA's amax without barriers, each warp folding its
  // maximum into shared memory and the last to arrive adding the CTA's to the global one
  // (cta_amax_by_ticket; NK_TUNE_QUANT_AMAX_TICKET); 0 after two barriers (cta_amax_to_global).
  // The same value either way. Per-block at 8192 columns spent 33 instructions per warp and two
  // barriers on it (ncu, forty-fifth session).
  int quant_amax_ticket = 1;
  // Quantized forward, MXFP8's e4m3 kernel (quant_mxfp8_e4m3): 1 quantizes its items in pairs,
  // as BLOCK's (E4m3BlockItems::quantize_pair: the two block maxima in 2 shuffles instead of 4,
  // one scale and factor per lane instead of two), where one CTA holds each row; 2 on cluster
  // plans too; 0 item by item (NK_TUNE_QUANT_MXFP8_PAIRS). Measured (forty-seventh session,
  // two H100s, against 0): 0.98-0.99x at 2048 x 16384 and 4096 x 12288, 0.99-1.00x at
  // 16384 x 4096, level at 8192 x 8192 and above; on clusters level (1024 x 32768, 4 CTAs per
  // row) to 1.01x slower (256 x 65536, 8 CTAs), hence 1 (bench/results/2026-11-28T0536-*).
  int quant_mxfp8_pairs = 1;
  // Quantized forward, the pinned 56-register kernels of plans of exactly kSmallItems vectors
  // per thread (LaunchConfig::full_items; TOKEN's folded kernel at that count) whose rows span
  // warps: 1 reads the warps' partial sums of the row sum (TOKEN: and of its maximum) four at a
  // time (block_sum_by_quads: 2 shared loads and 8 additions for 8 warps, where cta_row_sum's
  // loop over the runtime count executed 44 instructions per warp of 625 in MXFP8's kernel at
  // 8192 x 8192: ncu, forty-seventh session), bit for bit the same results; 0 cta_row_sum
  // (NK_TUNE_QUANT_ROW_SUM_QUADS). Measured (forty-eighth session, H200, four runs each, against
  // 0): 0.95-0.99x from 16-32M elements in TENSOR, TOKEN and BLOCK, 0.98-0.99x in MXFP8 (but
  // 1.01x at 8192 x 2048), hence 1 (bench/results/2026-11-28T0800-h200-row-sum-quads). The
  // ticketed grid with y_t (rms_norm_fwd_quant_ticketed) takes it too: 0.97-0.99x from 16M
  // elements against 0 (T0835-h200-rows-quads-ticketed).
  int quant_row_sum_quads = 1;
  // Backward on rms_norm_bwd_lean (LaunchConfig::lean) of rows that span warps: 1 sums each
  // row's dot product over its warps by row_group_sum<true> (bit for bit; the lean kernel's
  // rows of 8-16 values per thread spend a larger share on that loop than the forwards do);
  // 0 row_group_sum (NK_TUNE_BWD_ROW_SUM_QUADS). Measured (forty-eighth session, H200, four runs
  // each, against 0): 0.98x at 8192 x 2048, 32768 x 8192 and 16384 x 7168, 0.99-1.00x at the
  // other 4096-8192-column shapes, level elsewhere, hence 1.
  int bwd_row_sum_quads = 1;
  // Backward on rms_norm_bwd_pipelined of 16-bit x, weight and dy without dbias (neither the
  // pending row in registers nor the weight in shared memory), rows whose CTA spans warps: 1 sums
  // each CTA's part of the row's dot product by row_group_sum<true>, as bwd_row_sum_quads does on
  // the lean kernel (bit for bit); 0 row_group_sum (NK_TUNE_BWD_PIPELINED_ROW_SUM_QUADS). Aimed
  // at the split rows of 12288-65536 columns (clusters of 2-8 CTAs of 8-16 warps). Measured
  // (forty-eighth session, H200, four runs each, against 0): 0.963x at 256 x 65536, 0.971-0.973x
  // at 1024 x 32768, 2048 x 16384 and 4096 x 12288, level elsewhere, hence 1
  // (bench/results/2026-11-28T0818-h200-bwd-pipelined-quads).
  int bwd_pipelined_row_sum_quads = 1;
  // Forward of 16-bit x, weight and y on the EXACT registers kernels of one row per row group
  // (rms_norm_fwd_registers_exact_small, and rms_norm_fwd_registers of more vectors: not the
  // lean, weight-with-x, rows-per-group or register-bound kernels) whose rows span warps: 1 sums
  // the row by cta_row_sum<true> (bit for bit), as quant_row_sum_quads; 0 cta_row_sum
  // (NK_TUNE_FWD_ROW_SUM_QUADS). Measured (forty-eighth session, H200, four runs each, against
  // 0): 0.99x at 2048 x 16384, 0.98x at 4096 x 12288, level at every other sweep shape, hence 1.
  int fwd_row_sum_quads = 1;
  // Forward on rms_norm_fwd_registers_rows, two rows per row group at 2-4 vectors per thread, of
  // calls without extras (16-bit x, weight and y), rows that span warps: 1 sums both rows by
  // block_sums<2, true> (each warp's slots read four at a time, bit for bit); 0 block_sums
  // (NK_TUNE_FWD_ROWS_ROW_SUM_QUADS). The sweep's 2048-8192-column forwards. Measured
  // (forty-eighth session, H200, four runs each, against 0): 0.995-0.997x at 8192 x 8192,
  // 16384 x 4096 and 32768 x 8192 (runs apart), level elsewhere; 1 for one form of row sum
  // throughout (bench/results/2026-11-28T0835-h200-rows-quads-ticketed).
  int fwd_rows_row_sum_quads = 1;
  // Forward on rms_norm_fwd_lean (LaunchConfig::lean: one wave of one-row CTAs of the common
  // call) with its 64-byte parameter block and the default stores, rows that span warps: 1 sums
  // the row by cta_row_sum_once<true> (the warp sums read four at a time, bit for bit); 0 warp by
  // warp (NK_TUNE_FWD_LEAN_ROW_SUM_QUADS). The few-row shapes (1 x 4096, 128 x 4096), where the
  // loop sits on the single round trip's chain: H200, four runs each, 0.974x at 1 x 4096 and
  // 0.989x at 128 x 4096, within the runs' spread; 1 for one form of row sum throughout
  // (bench/results/2026-11-28T0939-h200-lean-quads).
  int fwd_lean_row_sum_quads = 1;
  // Quantized forward, pinned plans of exactly kSmallItems vectors per thread (every sweep
  // shape): 1 (the default) launches kernels compiled for that count, so that no per-item test
  // of the runtime count is left (LaunchConfig::full_items); 0 the kernels of up to kSmallItems
  // (NK_TUNE_QUANT_FULL_ITEMS, for A/B runs and for the tests of those kernels). Measured
  // (fourteenth session, H100, twice each): tensor 0.97-0.98x the time from 16M elements,
  // block and MXFP8 0.98-0.99x at the largest shapes (up to 1.02x at 8192 x 2048); TOKEN's folded
  // kernel spilled 56 bytes at the 56-register cap and ran 1.02-1.09x: TOKEN keeps the other.
  int quant_full_items = 1;
  // Quantized forward, TOKEN's pinned plans: 1 (the default) launches its folded kernel compiled
  // for e4m3 codes where y is e4m3 (LaunchConfig::fixed_format: the per-vector tests of the
  // runtime format, a compare and up to three branches, leave the SASS); 0 the runtime-format
  // kernel (NK_TUNE_QUANT_FIXED_FORMAT, for A/B runs and for the tests of that kernel with e4m3).
  // Measured (fifteenth session, H100, twice each in one call): token 0.97-0.99x the time at
  // every shape from 8M elements (16384 x 4096 75.9 -> 74.0 us). The other modes' pinned kernels
  // compiled so spilled more (per-tensor 20 bytes against 12) and ran slower (per-tensor 1.01-1.04x,
  // MXFP8 1.01-1.02x, per-block level): they have no such variant.
  int quant_fixed_format = 1;
  // Quantized forward, BLOCK's pinned plans of 128-column blocks: a kernel compiled for e4m3
  // codes in such blocks where y is e4m3 (LaunchConfig::fixed_format, with quant_fixed_format;
  // NK_TUNE_QUANT_BLOCK_E4M3): no runtime format or block width, the scale without a division
  // (bit for bit: src/cuda/block_scale_e4m3.h), scale and code addresses stepped per item; 416
  // SASS instructions per thread from rstd to the last code store against 567 (0.94 warp
  // instructions per value against 1.09). 1 (the default) takes it without the fused residual,
  // and with it from quant_block_e4m3_residual_min_columns columns; 2 always, 0 never (the
  // runtime-format kernel). Measured (eighteenth session, H100, twice each in one call): 0.89-0.96x
  // the time over the sweep without the residual (8192 x 8192 85.5 -> 79.9 us, 32768 x 8192
  // 307.8 -> 286.8); with it 0.94-0.96x from 16384 columns (256 x 65536, 1024 x 32768,
  // 2048 x 16384), 0.98-1.00x at 8192-12288, 1.01-1.03x at 7168 columns and fewer (16384 x 4096
  // 1.03x: the kernel's spills sit on the residual's path).
  int quant_block_e4m3 = 1;
  // The fewest columns from which BLOCK's e4m3 kernel takes rows with the fused residual under
  // quant_block_e4m3 1 (NK_TUNE_QUANT_BLOCK_E4M3_RESIDUAL_MIN_COLUMNS; figures above).
  int quant_block_e4m3_residual_min_columns = 8192;
  // Quantized forward, MXFP8's pinned plans: 1 (the default) launches a kernel compiled for e4m3
  // codes in 32-column blocks where y is e4m3 (LaunchConfig::fixed_format, with
  // quant_fixed_format; NK_TUNE_QUANT_MXFP8_E4M3), as quant_block_e4m3's: no runtime format or
  // block width, the e8m0 scale without the runtime emax, clamps and subnormal case (bit for
  // bit: src/cuda/block_scale_e4m3.h), scale and code addresses stepped per item; 332 SASS
  // instructions per thread from rstd to the last code store against 419 (0.86 warp
  // instructions per value against 0.95). 0: the runtime-format kernel. Measured (eighteenth
  // session, H100, twice each in one call): 0.93-0.99x the time over the sweep (8192 x 8192
  // 79.6 -> 75.7 us, 32768 x 8192 286.8 -> 274.5), with the fused residual 0.90-1.00x.
  int quant_mxfp8_e4m3 = 1;
  // Quantized forward: 1 (the default) also pins the EXACT cluster plans of wide rows (rows
  // split over a cluster at up to kSmallItems vectors per thread, pin_quant_registers), 0 pins
  // one-CTA-per-row plans only (NK_TUNE_QUANT_PIN_CLUSTERS). Measured (fourteenth session,
  // H100, twice in one call): 256 x 65536 tensor 0.90x the time, block 0.91x, MXFP8 0.91-0.92x,
  // token 0.98x; 1024 x 32768 (the dynamic modes' clusters of two) block 0.90x, MXFP8 0.91x,
  // token 0.97x; every other sweep shape 1.00x (not cluster plans).
  int quant_pin_clusters = 1;
  // Quantized forward of 16-bit x: rows of more than kFwdMaxThreadsPerRow x kSmallItems vectors
  // (past 16384 bf16 columns) split over a cluster of CTAs of this many threads in every mode
  // (NK_TUNE_QUANT_WIDE_ROW_THREADS; 0, or fwd_split_wide_rows 0: as fwd_split_wide_rows says,
  // per-tensor rows of such width then one 512-thread CTA at the large register budget where
  // there are 4 x SMs rows).
  // The plans are those of NK_TUNE_FWD_SPLIT_WIDE_ROWS=1 NK_TUNE_FWD_CLUSTER_THREADS=256, measured
  // (fourteenth session, 05:00, with the pinned clusters) against the pinned default of then:
  // 1024 x 32768 tensor 56.4 -> 48.0 us, token 50.4 -> 49.3, block 57.1 -> 56.3, MXFP8 54.1 ->
  // 52.6; 256 x 65536 tensor 31.9 -> 29.1, token 32.4 -> 30.2, block 36.7 -> 34.7, MXFP8 34.6 ->
  // 32.7 (those knobs also split narrower rows, measured slower: 4096 x 12288 1.02-1.08x).
  int quant_wide_row_threads = 256;
  // Forward registers/cluster plans (plain and quantized): 1 takes the EXACT kernels where the
  // plan covers the rows exactly (chunks_exact), 0 never (NK_TUNE_FWD_EXACT, for A/B runs and
  // for the tests of the general kernels at such shapes); 2 also gives the quantized
  // forward's rows that a power of two threads would cover with some empty vectors a count of
  // whole warps that covers them exactly (16384 x 7168: 224 threads x 4 vectors, not 256 x 4).
  // Measured (seventh session, H100, bf16): 1 against 0, forward 1024 x 32768 0.87x the time,
  // quantized 0.85-1.00x (block 0.85-0.93x from 16M elements); 2 against 1, quantized 16384 x
  // 7168 tensor 0.98x, token 0.95x, block 0.90x (4096 x 5120 block 0.81x), but the plain
  // forward 4096 x 5120 1.21x (160 x 4 against 256 x 3), so the plain forward keeps powers of two.
  // 3 (the default) also gives the plain forward's one-CTA-per-row plans of 512 threads the
  // fewest whole warps that cover the row exactly at up to kSmallItems vectors
  // (fewest_whole_warps: 12288 columns as 384 x 4; measured 4096 x 12288 75.8 -> 73.5 us).
  // 4 (the default) also pins the quantized forward's small register budget for 16-bit x and
  // weights to 56 registers, with the same whole-warp shapes (pin_quant_registers). Measured
  // (twelfth session, H100, bf16, 4 against 3, twice in one call): 4096 x 12288 tensor 74.2 ->
  // 62.7 us, token 75.0 -> 60.3, MXFP8 80.7 -> 67.0; 16384 x 7168 tensor 139.6 -> 129.7, token
  // 135.2 -> 125.8, MXFP8 149.2 -> 137.6; 1-2% faster at most other shapes.
  int fwd_exact = 4;
  // The plain forward's one-CTA-per-row registers plans of under 512 threads (a power of two)
  // that leave some vectors of the row empty: 1 (the default) reshapes them to the whole warps
  // that cover the row exactly at the most vectors per thread from kSmallItems down to 3
  // (5120 columns, 640 vectors: 160 x 4 rather than 256 x 3; 5376: 224 x 3; 2304: 96 x 3), so
  // that the EXACT kernels apply; 2 at the fewest from 2 up (5120: 320 x 2); 0 keeps them
  // (NK_TUNE_FWD_WHOLE_WARPS). Why (thirty-second session, ncu, 8192 x 5120): the general kernel
  // at 256 x 3 issues an instruction on 80% of cycles (the EXACT kernel at 8192 x 4096: 54%),
  // 1.9x the instructions per element, and reaches 64% of DRAM bandwidth against 77%.
  // Measured (same session, H100, bf16, twice each in one call, against 0): 1: 8192 x 2304
  // 35.9 -> 30.9 us, 4096 x 5376 38.8 -> 35.4, 8192 x 5120 68.1 -> 61.9, 16384 x 7168 (224 x 4)
  // level; 2: also 8192 x 2304 and 4096 x 5376 faster, but every shape it gives 2 vectors per
  // thread slower (8192 x 2560 as 160 x 2 1.21x, 8192 x 3584 as 224 x 2 1.15x, 16384 x 7168 as
  // 448 x 2 1.21x, 8192 x 5120 as 320 x 2 1.02x): fewer bytes in flight per SM.
  int fwd_whole_warps = 1;
  // Plain forward rows of at most a warp (per-head norms, 64-1024 bf16 columns) at 2 or 4 rows
  // per row group (NK_TUNE_FWD_ROWS_PER_GROUP; 4 only at up to 2 vectors per thread, else 2;
  // 4 at 2 vectors not measured yet): each thread loads every row before it reduces any, and
  // the grid is that many times smaller. EXACT plans of 8-element vectors with 16-bit x,
  // weight and y, where the rows divide into whole CTAs of that many rows per group and fill 2
  // CTAs per SM; not with a residual at more than 2 vectors per thread (both rules in
  // plan_fwd_with_reads). 1: one row per group. Inductor's forward at 256 columns is this
  // shape: 4 rows of 1 vector per thread.
  // Measured (thirty-third session, 23:30, H100, bf16, twice, against 1): 2 at 4 vectors per
  // thread 16384 x 512 16.6 -> 15.2 us, 8192 x 1024 16.6 -> 15.2, 65536 x 256 0.97-0.98x,
  // 32768 x 512 0.97-0.98x, the other short rows level; with the residual 1.01-1.06x slower
  // (the second row's residual loads wait for the first row's residual_out stores). 4 rows at
  // 1 vector: 1.32-1.64x slower from 512 columns (rows of 64-112 threads).
  int fwd_rows_per_group = 2;
  // The most threads per row that fwd_rows_per_group takes
  // (NK_TUNE_FWD_ROWS_PER_GROUP_MAX_THREADS). Up to a warp the sums stay in shuffles; past one
  // the rows' block sums share their two barriers (block_sums), and rows must be whole warps.
  // Measured (thirty-fourth session, 01:38, H100, bf16, twice, against 32): at 512, rows of
  // 64-256 threads (2048-8192 bf16 columns, 3.9 waves of CTAs halved) 8192 x 2048 28.0 -> 27.3
  // us, 4096 x 4096 27.6 -> 27.2-27.4, 8192 x 4096 50.0 -> 49.2, 8192 x 5120 61.8 -> 60.6,
  // 4096 x 6144 0.99x, the rest level; rows of 384 threads (4096 x 12288) 1.01x slower, of 512
  // level: hence 256.
  int fwd_rows_per_group_max_threads = 256;
  // Plain forward rows of at most kFwdShortRowVectors vectors (128 bf16 columns: per-head
  // norms): the vectors per thread the plan aims for instead of fwd_items_target
  // (NK_TUNE_FWD_SHORT_ROW_ITEMS; 0: fwd_items_target). Measured (same call, with 2 rows per
  // group, against 4 vectors on one row per group): 131072 x 128 29.1 -> 28.1 us, 32768 x 128
  // 9.1 -> 8.5, 2048 x 128 6.8 -> 6.2, 262144 x 64 32.7 -> 28.9; with the residual 0.91-0.97x.
  // At 2 vectors on one row per group (40 registers) 32768 x 128 was 1.09-1.14x slower; at 1
  // vector 1.10x; rows of 256-1024 columns at 2 vectors 1.00-1.25x slower.
  int fwd_short_row_items = 2;
  // EXACT plain forward plans of 8-element vectors at up to 2 vectors per thread on kernels
  // held to fewer registers (NK_TUNE_FWD_TINY_REGISTERS): 1 = 40 (6 CTAs of 256 threads per
  // SM), 2 = 32 (8: every warp slot; ptxas spills 16-28 bytes), 0 = the 56 of the kernels
  // compiled for 4 vectors. Why: ncu (thirty-third session) had torch.compile's forward at
  // 131072 x 128 on 64-thread programs of 2 vectors per thread at 32 registers, 81% achieved
  // occupancy, 20.2 us; ours 4 vectors per thread at 56 registers, 41%, 23.5 us. The same
  // bytes in flight per SM, half the warps to hide the latency with. With NK_TUNE_FWD_ITEMS=2
  // alone the 2 vectors ran on the 56-register kernels (thirty-second session: 0.98x at
  // 131072 x 128, 1.03-1.15x slower at 32768 x 128, 16384 x 512, 16384 x 256).
  int fwd_tiny_registers = 0;
  // EXACT plain forward registers plans of 16-bit types, one row per CTA (and per group), on at
  // most this many CTAs per SM (NK_TUNE_FWD_WEIGHT_FIRST; 0 never): the weight loaded with x,
  // before the row reduction, rather than prefetched to L2 and read after it. On one wave of
  // CTAs nothing hides that second round trip; on many rows the weight's registers would cost
  // CTAs per SM. Measured (thirty-sixth session, H100, twice in one call): 512 x 4096 (512 CTAs
  // of 128 threads) 8.86-9.09 -> 7.01-7.12 us; on the registers plans of 1-256 rows 0.88-0.91x
  // (1 x 4096 6.18-6.24 -> 5.38-5.50), which leaves them level with the pipelined plans there
  // (within 0.2 us either way over 8 shapes), so those stay pipelined (fwd_pipeline_max_rows)
  // but for the lean calls (fwd_lean_pipeline_max_rows).
  int fwd_weight_first = 4;
  // Those plans (LaunchConfig::weight_first) on rms_norm_fwd_lean where the call is the common
  // one: 16-bit types, a weight not zero-centered, no bias, no residual (NK_TUNE_FWD_LEAN; 0
  // never): compile-time vectors per thread, 32-bit offsets, one barrier. Measured
  // (thirty-seventh session, H100, twice in one call, against the weight-with-x kernel):
  // 0.86-0.93x on the plans it takes (512 x 4096 7.07-7.09 -> 6.40-6.62 us, 512 x 2048
  // 6.21-6.24 -> 5.31-5.52, 300 x 1024 5.41-5.55 -> 4.90-5.04), the same bits.
  int fwd_lean = 1;
  // The common call's forward takes the pipelined kernel for at most this many rows, rather
  // than fwd_pipeline_max_rows, where the lean plan applies (plan_fwd;
  // NK_TUNE_FWD_LEAN_PIPELINE_MAX_ROWS). Measured (thirty-seventh session, H100, twice, lean
  // kernel against pipelined): 1 x 4096 5.38-5.44 -> 4.77-5.02 us, 128 x 4096 6.02-6.54 ->
  // 5.06-5.25, 256 x 4096 6.50-6.59 -> 5.79-5.97, 1 x 8192 5.76-5.81 -> 4.98-5.25, 132 x 2048
  // 5.82-6.27 -> 5.44-5.57.
  int fwd_lean_pipeline_max_rows = 0;
  // The lean calls' EXACT registers plans of whole warps per row (up to 256 threads) become one
  // row per CTA on rms_norm_fwd_lean where their rows fill at most this many waves of those
  // CTAs (lean_rows_per_cta; NK_TUNE_FWD_LEAN_WAVES, 0 never). Measured (thirty-seventh
  // session, H100, twice, against the default plans of several rows per CTA): one wave
  // 1024 x 1024 7.62-7.65 -> 5.82-5.86 us, 4096 x 1024 9.09 -> 8.45-8.58, 2048 x 2048
  // 9.31-9.42 -> 8.30-8.51, 1024 x 4096 9.87-10.05 -> 8.24-8.35; four waves level or slower
  // (16384 x 1024 27.10-27.15 -> 27.50-27.55, 8192 x 2048 level, 4096 x 4096 27.42-27.46 ->
  // 27.57-27.90).
  int fwd_lean_waves = 1;
  // rms_norm_fwd_lean's parameters: 0 the launchers' FwdParams (about 230 bytes), 1 the 64
  // bytes of LeanFwdParams (NK_TUNE_FWD_LEAN_PARAMS). Why: 256 bytes of parameters measured
  // 0.06-0.23 us slower than 24 in a plain RMSNorm kernel at 1-1024 rows of 4096 columns
  // (thirty-seventh session, bench/launch_probe.cu). Measured on the lean kernel (thirty-ninth
  // session, H100, twice, 0 -> 1): 1 x 4096 5.15-5.22 -> 4.99-5.02 us, 128 x 4096 5.57-5.66 ->
  // 5.07-5.33, 132 x 2048 5.66-5.98 -> 5.34-5.41, 1024 x 1024 5.86-6.22 -> 5.57-5.60,
  // 4096 x 1024 8.45-8.48 -> 8.27-8.30, 512 x 4096 and 1024 x 4096 level.
  int fwd_lean_params = 1;
  // rms_norm_fwd_lean (on LeanFwdParams) and rms_norm_fwd_registers_rows (calls without a bias
  // or a zero-centered weight) store y by plain, weak st.global (1) instead of __stcg, a strong
  // GPU-scope store (0; NK_TUNE_FWD_WEAK_STORES). Why: on the same geometry and
  // read policy torch.compile's Triton kernel, whose stores are weak, read ~3 us faster at
  // 16384 x 1024 after the flush, and no faster under ncu's clean flush (forty-first session).
  // Measured (forty-second session, H100, twice): 0.99-1.01x at 12 shapes; that lead was the
  // flush leaving x in L2 (nk_cuda_demote_l2), not the stores.
  int fwd_weak_stores = 0;
  // The backward's unsplit pipelined plans of 1-2 whole 16-byte vectors per thread covering the
  // row exactly, on rms_norm_bwd_lean where the call has 16-bit x, weight and dy, a weight, no
  // dbias (but bwd_lean_dbias) and no dresidual_out (LaunchConfig::lean; NK_TUNE_BWD_LEAN: 0
  // off, 1 on). Why:
  // the forward's lean kernel took 7-23% off the small shapes; the pipelined backward's row
  // loop is 654 instructions (static, nvdisasm) at 2 vectors per thread, the lean one's 519, and
  // the pipelined kernel's 100 registers leave 16 warps per SM. Measured (thirty-ninth session,
  // H100, twice, against the pipelined kernel): setting 1 4096 x 1024 18.27 -> 17.66-17.76 us,
  // 8192 x 2048 45.07-45.97 -> 44.70-44.83, 1024 x 1024 11.31-11.46 -> 11.04-11.17,
  // 4096 x 2048 28.83-28.93 -> 28.35, 4096 x 4096, 8192 x 4096, 32768 x 1024 level. Dropped
  // register budgets (rms_norm_bwd_lean.cuh): two CTAs' at 2 vectors 1.02-1.19x slower (spills);
  // 256-thread CTAs on three CTAs' 1.04x slower at 4096 columns, 1.10x at 16384 x 128 (fortieth
  // session).
  int bwd_lean = 1;
  // ... for calls with dbias too (NK_TUNE_BWD_LEAN_DBIAS; 0: those on rms_norm_bwd_pipelined).
  // Why: from 1M elements a bias costs the backward 2.7-3.7 us (H200: 1024 x 4096 17.07 ->
  // 20.70 us, 4096 x 4096 34.85 -> 39.63, 8192 x 2048 36.19 -> 39.02), most of it in the main
  // kernel, which leaves the lean kernel (and its row sum by quads; at 2048 columns its one
  // vector per thread, three CTAs per SM) for the pipelined one at 120 registers (ncu,
  // fifty-second session: bench/results/2026-11-28T1517-h200-bwd-bias). The lean kernel with
  // dbias's sums compiles to 123-128 registers at 2 vectors, 64 at 1, no spills. Not yet measured:
  // off until an A/B says otherwise.
  int bwd_lean_dbias = 0;
  // Lean backward rows that one CTA of this many threads covers at one 16-byte vector per
  // thread (2048 16-bit columns at 256) take that plan rather than two vectors per thread, when
  // NK_TUNE_BWD_ITEMS leaves the choice to the planner (plan_bwd_rows;
  // NK_TUNE_BWD_LEAN_ONE_ITEM_THREADS, 0 never). Why: at 64 registers three such CTAs fit per
  // SM where two of the 2-vector plan's did (113 registers). Measured (thirty-ninth session,
  // H100, twice, 2 vectors -> 1): 2048 columns 0.93-0.97x at every row count from 1024 to
  // 32768 (8192 x 2048 44.80-44.82 -> 43.42-43.54 us); 1536 columns 1.07x, 2560 and 3072
  // level, 1024 columns 1.04-1.06x, 4096 columns 1.00-1.02x.
  int bwd_lean_one_item_threads = 256;
  // Forward registers plans (plain and quantized): the vectors per thread that the thread
  // count aims for (NK_TUNE_FWD_ITEMS, 1-4). Measured (eighth session, H100): 2 and 1 slower
  // than 4 nearly everywhere (8192 x 8192 96.5 -> 111 us), 4096 x 12288 unchanged.
  int fwd_items_target = 4;
  // The quantized forward with y_t in one kernel (rms_norm_fwd_quant_transposed) where it
  // applies (plan_fwd_quant_transposed); 0: the forward, then transpose_bytes
  // (NK_TUNE_QUANT_FUSED_TRANSPOSE). 1: one run per cluster, measured slower (docs/notes.md,
  // eighth session); 2: the persistent, double-buffered kernel, measured 2x slower (ninth
  // session). 3 (the default): forward and transpose units in one grid, each band of 64 rows
  // transposed from L2 soon after its forward units (rms_norm_fwd_quant_ticketed,
  // transpose_tickets.h), where the pinned plan and the operands allow it (else 0). Measured
  // (thirteenth session, H100, one slice, against 0, twice each in one call): 8192 x 8192
  // 132.5 -> 112.2 us, 32768 x 8192 494.3 -> 416.2, 16384 x 7168 221.7 -> 188.8, 4096 x 12288
  // 102.8 -> 87.3 (ncu: DRAM reads x alone, so y comes back from L2).
  int quant_fused_transpose = 3;
  // Setting 3's lag: the rows that the forward units ahead of a band's transposes cover, in
  // percent of the rows the device's resident CTAs hold (NK_TUNE_QUANT_TICKET_LAG). Measured
  // (thirteenth session): 50, 75, 150 and 200 within +-3% of 100 (8192 x 8192: 100 112.2 us,
  // 75 113.7, 150 112.2; 16384 x 7168: 188.8, 191.7, 190.7), none better everywhere.
  int quant_ticket_lag_percent = 100;
  // Setting 3's transpose units: 1 or 2 slices of the CTA's threads in columns each
  // (NK_TUNE_QUANT_TICKET_SLICES; 2 halves the units and their waits for the band's count).
  // Measured (thirteenth session, H100, twice each in one call): 2 against 1, 32768 x 8192
  // 419.1 -> 411.1 us, 16384 x 7168 190.3 -> 185.1, 8192 x 8192 112.9 -> 111.1; 4096 x 1024
  // 14.5 -> 15.0 (the smaller shapes within +-0.5 us).
  int quant_ticket_slices = 2;
  // The quantized forward with y_t (every setting above): CTAs of several short rows up to this
  // many threads, in place of quant_cta_threads (NK_TUNE_QUANT_TICKET_CTA_THREADS; the ticketed
  // grid's forward and transpose units both take their size from it). Measured (sixteenth
  // session, H100, against the fourteenth session's final run): with quant_cta_threads' 128,
  // 8192 x 4096 61.2 -> 62.9 us, 16384 x 4096 111.2 -> 115.3, 4096 x 4096 36.2 -> 38.0, 8192 x
  // 2048 36.7 -> 37.7 (transpose units of 256 columns instead of 512): 256 keeps the plans of
  // the fourteenth session's measurement.
  int quant_ticket_cta_threads = 256;
  // The forward with y_t as two kernels (the forward, then transpose_bytes reading y back: the
  // plans the ticketed grid does not take, 1024 x 32768, 256 x 65536, 29 x 17389 and float32 x
  // among them): 1 reads x evict-first instead of evict-last (keep_y_for_transpose), so that y,
  // written at normal priority, is what L2 keeps for the transpose rather than x, which nothing
  // reads again (NK_TUNE_QUANT_TRANSPOSE_EVICT_FIRST). Measured (seventeenth session, H100,
  // twice in one call), 1 against 0: 256 x 65536 43.1 -> 40.8 us, 1024 x 32768 75.5 -> 73.0,
  // 128 x 4096 10.9 -> 10.4; the ticketed shapes 0.98-1.00x (predicted 1024 x 32768 ~63-65:
  // the transpose gained less than y's 32 MB in L2 suggested).
  int quant_transpose_evict_first = 1;
  // Vectors per thread that plan's thread count aims for (NK_TUNE_QUANT_FUSED_ITEMS, 1-4): 1 =
  // up to 512 threads, one CTA per SM at 8192 columns; 4 = fewer threads, two CTAs per SM.
  int quant_fused_items_target = 1;
  // The forwards (plain and quantized) and the pipelined backward read x, residual, dy and
  // dresidual_out once; their L2 priority (read_policy.cuh) by the MiB the kernel reads of them.
  // Evict-first up to evict_first_max_mib (NK_TUNE_EVICT_FIRST_MAX_MIB; 0: never): tenth
  // session, 4096 x 1024 backward 22.3 -> 21.7 us, but 1-3% slower from 64 MB. Evict-last from
  // evict_last_min_mib (NK_TUNE_EVICT_LAST_MIN_MIB; 0: never), as Inductor marks its first read
  // of x: eleventh session, against evict-first up to 32 MiB, both twice in one run: forward
  // 32768 x 8192 363.1 -> 358.2 us, 8192 x 8192 97.2 -> 94.9, 16384 x 7168 164.8 -> 160.5,
  // 4096 x 1024 11.3 -> 9.7; backward 8192 x 2048 49.7 -> 47.9, 4096 x 4096 45.7 -> 44.1; level
  // elsewhere; a GEMM run after the norm no slower (bench/l2_aftermath.py). Where both
  // thresholds cover the bytes, evict-first wins.
  int evict_first_max_mib = 0;
  int evict_last_min_mib = 1;
};

struct LaunchConfig {
  RowPlan plan = RowPlan::kRegisters;
  int vec = 1;               // elements per vector access
  int threads_per_row = 32;  // blockDim.x
  int rows_per_block = 1;    // blockDim.y
  int items = 1;             // vectors per thread per row (<= items_max(vec)); kColumns: row groups
  // Plain forward, registers plans: rows per row group, blockDim.y rows apart
  // (KernelFacts::fwd_rows_per_group); a CTA covers rows_per_block * rows_per_group rows.
  int rows_per_group = 1;
  // Plain forward, EXACT plans of up to 2 vectors per thread: the register bound of their
  // kernels (KernelFacts::fwd_tiny_registers; 0: the usual kernels). 16-bit x, weight and y
  // only (plan_fwd_with_reads).
  int register_bound = 0;
  // Plain forward, EXACT registers plans of 16-bit types, one row per CTA: the weight loaded
  // with x (KernelFacts::fwd_weight_first; rms_norm_fwd_registers_weight_first).
  bool weight_first = false;
  // ... and on rms_norm_fwd_lean where the call has a plain weight, no bias and no residual
  // (KernelFacts::fwd_lean). Backward: a pipelined plan on rms_norm_bwd_lean
  // (KernelFacts::bwd_lean).
  bool lean = false;
  int cluster_size = 1;      // CTAs per row
  int64_t cols_per_cta = 0;  // columns each CTA of a cluster covers (multiple of vec)
  int64_t grid = 1;          // CTAs
  int64_t slots = 0;         // backward: rows of dweight/dbias partial sums (0 = none)
  int64_t smem_bytes = 0;    // dynamic shared memory per CTA (kPipelined: the stages)
  // Forward registers/cluster plans of 8-element vectors over rows misaligned for them: each
  // row's body from its first 16-byte boundary (rms_norm_fwd_realigned).
  bool realigned = false;
  // ... on rms_norm_fwd_realigned_lean (KernelFacts::fwd_realign_lean; calls of a weight alone,
  // and the others of fwd_lean_general_call).
  bool realigned_lean = false;
  // Quantized forward: KernelFacts::quant_weight_first (printed only when not 0).
  int quant_weight_first = 0;
  // Quantized forward: KernelFacts::quant_amax_per_warp.
  bool amax_per_warp = false;
  // Quantized forward: KernelFacts::quant_amax_ticket, where the plan's rows span warps.
  bool amax_ticket = false;
  // Quantized forward, MXFP8 on its e4m3 kernel (fixed_format): KernelFacts::quant_mxfp8_pairs.
  bool mx_pairs = false;
  // The row's warp sums read four at a time, where the rows span warps: set by
  // apply_row_sum_quads (quantized forward: KernelFacts::quant_row_sum_quads),
  // apply_bwd_row_sum_quads (backward: bwd_row_sum_quads, bwd_pipelined_row_sum_quads) and
  // apply_fwd_row_sum_quads (forward: fwd_row_sum_quads, fwd_rows_row_sum_quads,
  // fwd_lean_row_sum_quads).
  bool row_sum_quads = false;
  // Forward registers/cluster plans: every row of every CTA valid and every vector below
  // `items` of every thread whole and inside the row (chunks_exact): the kernels then skip
  // their per-item range checks (RowChunk's EXACT).
  bool exact = false;
  // Quantized forward, EXACT plans of 16-byte vectors of 16-bit x at up to kSmallItems vectors
  // per thread (KernelFacts::fwd_exact 4): the kernels held to 56 registers
  // (rms_norm_fwd_quant_registers_exact_small), rather than the 64 of the 512-thread bound.
  // The realigned slots backward at up to 2 vectors per thread: held to 64 registers, two CTAs
  // of 512 threads per SM (KernelFacts::bwd_realign_slot_pinned).
  bool pinned_registers = false;
  // Pinned plans of exactly kSmallItems vectors per thread, with KernelFacts::quant_full_items:
  // the kernels compiled for that count.
  bool full_items = false;
  // TOKEN's pinned plans, with KernelFacts::quant_fixed_format: the kernel compiled for e4m3
  // codes where y is e4m3 (the launcher checks the dtype; e5m2 and int8 keep the runtime format);
  // BLOCK's of 128-column blocks too with KernelFacts::quant_block_e4m3, MXFP8's with
  // KernelFacts::quant_mxfp8_e4m3.
  bool fixed_format = false;
  // plan_fwd_quant_transposed: each CTA's rows of a 32-row run (4-32), else 0; tiles of them
  // in shared memory (2: the persistent kernel, double-buffered).
  int tile_rows = 0;
  int tile_buffers = 0;
  // Backward registers/pipelined plans of several slots: KernelFacts::bwd_reduce_in_grid,
  // bwd_reduce_kernel, bwd_early_dependent.
  bool reduce_in_grid = false;
  int reduce_kernel = 0;
  bool early_dependent = false;
  bool dependent_after_rows = false;  // bwd_early_dependent 2
  // KernelFacts::bwd_group_sums_by_cta (the pipelined kernel).
  bool group_sums_by_cta = true;
  // Backward plans with dweight/dbias summed down the columns beside the main kernel
  // (apply_column_sums): that kernel's CTAs and the column vectors each covers; 0 = none (the
  // slots' partial sums and their reduction instead). `slots` still says how the main kernel's
  // CTAs walk the rows.
  int64_t column_sums_grid = 0;
  int column_sums_lanes = 0;
  // The column-sums kernel's vector width: the main kernel's, or 1 beside a realigned one (whose
  // rows start at different offsets).
  int column_sums_vec() const { return realigned ? 1 : vec; }
  // Pipelined split rows of more than kClusterDeferMaxItems vectors per thread:
  // KernelFacts::bwd_pending_in_registers and bwd_smem_weight, where apply_split_row_extras
  // says they apply (smem_bytes then includes the weight's chunk).
  bool pending_in_registers = false;
  bool smem_weight = false;
  // Cluster-streaming plans (KernelFacts::cluster_streaming_prefetch, _prefetch_kb): each CTA
  // asks for the first prefetch_bytes of its chunk of its next row (per tensor) in L2 once it
  // has read the current one; 0: no prefetch.
  int64_t prefetch_bytes = 0;
  // Cluster-streaming backward: some of a CTA's column sums accumulate in its slot of the
  // workspace, where shared memory does not hold them all.
  bool slot_sums = false;
  // Realigned backward (with `realigned`) that walks rows persistently and keeps dweight/dbias
  // partial sums per slot itself (plan_bwd_realigned_slots, rms_norm_bwd_realigned_slots);
  // without it a realigned plan writes dx only, one row per cluster.
  bool realigned_slots = false;
  // Realigned plans: launch the kernels compiled for a weight only where the call has one, no
  // bias, no zero-centring (slots backward: dweight, no dbias; the few-row backward, which
  // writes dx only: a weight, no zero-centring) (KernelFacts::realign_weight_only).
  bool weight_only_kernels = false;
  // Inputs read once go through L2 as evict-first or evict-last (KernelFacts::
  // evict_first_max_mib, evict_last_min_mib; apply_read_policy).
  bool evict_first_reads = false;
  bool evict_last_reads = false;

  std::string describe() const;
};

// Register budget per thread, in elements of a row: forward holds x; backward x and dy plus
// dweight/dbias accumulators.
constexpr int kFwdElemsPerThread = 64;
constexpr int kBwdElemsPerThread = 32;
constexpr int kFwdMaxThreadsPerRow = 512;
constexpr int kBwdMaxThreadsPerRow = 256;
// The largest CTA of the forward that loads the weight with x (LaunchConfig::weight_first):
// its kernel is bound to 4 such CTAs per SM (64 registers a thread), so that the 4 CTAs per SM
// of KernelFacts::fwd_weight_first's default run in one wave.
constexpr int kFwdWeightFirstMaxThreads = 256;
// The threads per SM of rms_norm_fwd_lean (its 64 registers a thread: 65536 / 64), and the most
// CTAs of any size an SM holds (Hopper): one wave of its CTAs (KernelFacts::fwd_lean_waves).
constexpr int kFwdLeanThreadsPerSm = 1024;
constexpr int kMaxCtasPerSm = 32;
constexpr int kStreamingThreads = 512;
// Vectors per thread past which the forward prefers the pipelined clusters to one CTA per row
// (plan_fwd).
constexpr int kFwdHeavyItems = 8;

// Pipelined kernels: shared-memory stages per row group (one row each; stages - 1 rows in
// flight), vectors per thread per row (bound), and threads per row group (bound).
constexpr int kPipelineStages = 3;
// Pipelined split rows of at most kClusterDeferMaxItems vectors per thread complete each row one
// row late (its cluster sum arrives meanwhile): one more stage holds the pending row.
constexpr int kClusterPipelineStages = 4;
constexpr int kClusterDeferMaxItems = 2;
constexpr int kPipelineItems = 4;
constexpr int kPipelineMaxThreads = 512;

// Vectors per thread per row that the register kernels hold (a compile-time bound). Narrow
// vectors get fewer elements: each needs its own address arithmetic, which would spill.
constexpr int kSmallItems = 4;
// The realigned backward's (rms_norm_bwd_realigned) most vectors per thread, by its knob only:
// 512 threads x 6 vectors of 8 columns hold a row of 24576 in one CTA, no cluster.
constexpr int kRealignMaxItems = 6;
// The most rows at once (one per group of threads, each group a slot) of a CTA of the realigned
// backward's persistent kernel (rms_norm_bwd_realigned_slots).
constexpr int kRealignSlotRowsMax = 8;
constexpr int fwd_items_max(int vec) { return vec >= 4 ? kFwdElemsPerThread / vec : 16; }
constexpr int bwd_items_max(int vec) { return vec >= 4 ? kBwdElemsPerThread / vec : 8; }

// The registers backward's most vectors per thread for a misaligned row of `hidden` 16-bit
// values (1-element vectors): facts.bwd_narrow_items where bwd_items_max(1) would need more than
// facts.max_cluster CTAs, else bwd_items_max(1).
int bwd_narrow_items(int64_t hidden, const KernelFacts& facts);

// The backward's split rows of more than kClusterDeferMaxItems vectors per thread: sets
// c.pending_in_registers (KernelFacts::bwd_pending_in_registers) only without dbias and
// dresidual_out (their registers would spill), and c.smem_weight (KernelFacts::bwd_smem_weight)
// where there is a weight (weight_bytes: its element size, 0 without one) and room for the
// CTA's chunk of it beside the stages and the kernel's ~0.5 KB of static shared memory (then
// c.smem_bytes includes the chunk).
void apply_split_row_extras(LaunchConfig& c, int64_t weight_bytes, bool dbias, bool dresidual,
                            const KernelFacts& facts);

// A backward streaming plan as a cluster per row (KernelFacts::bwd_cluster_streaming), with
// the dweight (and, with dbias, dbias) sums of as many of a CTA's columns in its shared memory
// as fit, the others in the workspace: up to
// max(max_cluster, max_cluster_pipelined) CTAs of kStreamingThreads threads, as many clusters as
// fit the SMs once (the launcher caps them to those resident), one slot each.
void apply_cluster_streaming(LaunchConfig& c, int64_t rows, int64_t hidden, bool dbias,
                             const KernelFacts& facts);

// A forward streaming plan as a cluster per row (KernelFacts::fwd_cluster_streaming): as the
// backward's, without shared memory, fwd_ctas_per_sm CTAs per SM.
void apply_fwd_cluster_streaming(LaunchConfig& c, int64_t rows, int64_t hidden,
                                 const KernelFacts& facts);

// Sets c.prefetch_bytes of a cluster-streaming plan (0 otherwise) whose reads are x_bytes and
// other_bytes elements (dy, or the forward's residual): where KernelFacts::
// cluster_streaming_prefetch asks and both are 16-byte vectors, the first
// cluster_streaming_prefetch_kb of each CTA's chunk, or by default as much as fits with the
// plan's CTAs' chunks of the current row (x and the other, all in flight at once) within
// cluster_streaming_l2_percent of L2.
void apply_streaming_prefetch(LaunchConfig& c, int64_t x_bytes, int64_t other_bytes,
                              bool backward, const KernelFacts& facts);

// Sets c.evict_first_reads (or else c.evict_last_reads) where c's kernel honors it (the
// pipelined plans, and the forwards' registers and cluster plans of whole vectors that are not
// realigned) and the inputs it reads once total at most facts.evict_first_max_mib MiB (at least
// facts.evict_last_min_mib MiB).
void apply_read_policy(LaunchConfig& c, int64_t read_bytes, bool backward,
                       const KernelFacts& facts);
// The bytes a forward (plain or quantized) reads once: x, and the residual where there is one.
inline int64_t fwd_read_once_bytes(int64_t rows, int64_t hidden, int64_t x_bytes,
                                   bool with_residual) {
  return rows * hidden * x_bytes * (with_residual ? 2 : 1);
}

// vec: the widest access (in elements, power of two <= 16 / smallest element size) that every
// row of every matrix operand allows; computed by the launcher from pointers and strides.
// staged_bytes_per_col: bytes per column of one row that the pipelined forward copies into
// shared memory (x, and residual when there is one), 0 when cp.async cannot be used (accesses
// under 4 bytes). Without it (or where it does not apply), the registers/cluster/streaming
// plans of plan_fwd_registers. lean_call: 16-bit x, weight and y, a plain weight, no bias, no
// residual (the calls of rms_norm_fwd_lean, LaunchConfig::lean; KernelFacts::fwd_lean).
LaunchConfig plan_fwd(int64_t rows, int64_t hidden, int vec, const KernelFacts& facts,
                      int64_t staged_bytes_per_col = 0, bool lean_call = false);
LaunchConfig plan_fwd_registers(int64_t rows, int64_t hidden, int vec, const KernelFacts& facts);
// The facts that plan_fwd takes for the plain forward of x elements of x_bytes bytes: setting 2
// of fwd_split_wide_rows (the default) splits float32 rows as setting 1 does
// (KernelFacts::fwd_split_wide_rows).
KernelFacts plain_fwd_facts(const KernelFacts& facts, size_t x_bytes);
// Rows of 16-bit elements misaligned for 16-byte vectors whose x and y share the misalignment
// (the launcher checks the pointers; no residual): plan_fwd_registers at 8-element vectors,
// realigned; grid 0 where that plan would stream or hold more than kSmallItems vectors per
// thread (weight and bias lanes beside x's would spill), for rows under 2 vectors, and under
// facts.fwd_realign_min_elements elements but where one of these rules takes the rows:
// - facts.fwd_realign_clusters: rows that plan splits over a cluster (then split to fill the
//   device);
// - rows one CTA holds, fwd_realign_rows_min_rows of them or more, reaching
//   fwd_realign_long_rows_min_elements (past 2048 columns) or fwd_realign_short_rows_min_elements;
// - rows past 2048 columns, fwd_realign_lean_rows_min_rows of them or more, where the plan is
//   rms_norm_fwd_realigned_lean's.
// The rules serve calls of a weight alone (weight_only_call: no bias, not zero-centred), whose
// kernel form is the one measured faster, and the calls of fwd_lean_general_call
// (lean_general_call) where rms_norm_fwd_realigned_lean covers the plan.
LaunchConfig plan_fwd_realigned(int64_t rows, int64_t hidden, const KernelFacts& facts,
                                bool weight_only_call = false, bool lean_general_call = false);
// Whether a call other than of a weight alone (weight_only_call false) may take the general form
// of rms_norm_fwd_realigned_lean (plan_fwd_realigned's lean_general_call): a weight with a bias
// or zero-centring from KernelFacts::fwd_realign_lean_general 1, no weight (with or without a
// bias) from 2.
bool fwd_lean_general_call(bool weight, bool weight_only_call, const KernelFacts& facts);
// Whether a realigned plan's threads (over its cluster) cover every 16-byte aligned vector that
// a row of `hidden` 16-bit elements overlaps, wherever it starts (ceil(hidden / 8) + 1 of them),
// one row per CTA, as rms_norm_fwd_realigned_lean needs.
bool realigned_lean_covers(const LaunchConfig& c, int64_t hidden);
// staged_bytes_per_col: bytes per column of one row that the pipelined backward copies into
// shared memory (x, dy and dresidual_out); 0 when the operands don't allow cp.async (accesses
// under 4 bytes). The pipelined plan is taken when hidden is a multiple of vec, a row group
// has at least 32 threads and kPipelineStages rows fit in shared memory.
LaunchConfig plan_bwd(int64_t rows, int64_t hidden, int vec, const KernelFacts& facts,
                      int64_t staged_bytes_per_col = 0);

// Whether the backward plan c (of plan_bwd) runs on rms_norm_bwd_lean for a call that allows it
// (16-bit x, weight and dy, a weight, no dresidual_out, dbias only under bwd_lean_dbias: the
// launcher's part): a pipelined plan of 16-byte vectors, rows not split, 1-2 vectors per thread
// covering the row exactly, no pending row or weight in shared memory; facts.bwd_lean on.
bool bwd_lean_plan(const LaunchConfig& c, int64_t hidden, const KernelFacts& facts);

// Whether the lean backward plan c (c.lean) is planned again at one vector per thread (with
// bwd_items_target 1; the caller keeps that plan where bwd_lean_plan still holds): the planner
// chooses the vectors per thread (no NK_TUNE_BWD_ITEMS) and one CTA of
// facts.bwd_lean_one_item_threads threads covers the row at one vector each.
bool bwd_lean_one_item(const LaunchConfig& c, int64_t hidden, const KernelFacts& facts);

// Whether plan c (registers or cluster, not realigned) covers rows x hidden exactly: rows a
// multiple of rows_per_block, and each CTA's chunk threads_per_row * items whole vectors, the
// cluster's chunks the whole row. plan_fwd and plan_fwd_quant set LaunchConfig::exact from it.
bool chunks_exact(const LaunchConfig& c, int64_t rows, int64_t hidden);

// The forward with a quantized output: plan_fwd_registers, adjusted for block scales (block > 0, a power
// of two dividing hidden, with block / vec <= 32) so that every iteration of a row starts on a
// block boundary (threads_per_row * vec a multiple of the block, cols_per_cta too) and a
// block is held by block / vec consecutive lanes of one warp. When block / vec > 32 (rows
// misaligned for wider vectors) it returns vec = 0: one 256-thread CTA per row, element by
// element (rms_norm_fwd_quant_blocks_unaligned). dynamic_scales: the mode computes its scales
// from the rows (TOKEN, BLOCK, MXFP8; facts.fwd_split_wide_rows 2 splits their wide rows).
LaunchConfig plan_fwd_quant(int64_t rows, int64_t hidden, int vec, int block, bool dynamic_scales,
                            const KernelFacts& facts);

// plan_fwd_quant's EXACT registers plans of 16-byte vectors at up to kSmallItems vectors per
// thread, where the launcher has 56-register kernels (the caller decides: quant_backend.cu,
// pinnable), with facts.fwd_exact 4: pinned_registers, and the CTA's vectors as the fewest whole
// warps that cover them at up to kSmallItems (12288 columns as 384 x 4 rather than 512 x 3:
// three CTAs per SM instead of two). full_items_kernels: whether the launcher has kernels for
// exactly kSmallItems vectors per thread for this mode (LaunchConfig::full_items; not TOKEN's);
// e4m3_kernels: whether it has kernels for e4m3 codes alone (LaunchConfig::fixed_format; TOKEN's,
// BLOCK's of 128-column blocks under KernelFacts::quant_block_e4m3, MXFP8's under
// KernelFacts::quant_mxfp8_e4m3).
void pin_quant_registers(LaunchConfig& c, int64_t rows, int64_t hidden, const KernelFacts& f,
                         bool full_items_kernels = true, bool e4m3_kernels = false);

// pin_quant_registers's e4m3_kernels for a quantized forward in `mode` of rows of `hidden`
// columns (scale_block: BLOCK's block, MXFP8's 32, else 0; with_residual: the fused residual
// add): TOKEN's, BLOCK's of 128-column blocks as facts.quant_block_e4m3 and
// quant_block_e4m3_residual_min_columns say, and MXFP8's with facts.quant_mxfp8_e4m3 (the
// launcher has no others).
bool quant_e4m3_kernels(nk_quant_mode mode, int scale_block, bool with_residual, int64_t hidden,
                        const KernelFacts& facts);

// Sets c.amax_ticket (a quantized forward's final plan): with KernelFacts::quant_amax_ticket,
// where c's rows span warps (their row sum's barrier orders the ticket's zeroing) and amax is not
// added per warp. The kernels test their CTA's width again (add_amax).
void apply_amax_ticket(LaunchConfig& c, const KernelFacts& facts);

// Sets c.mx_pairs (a quantized forward's final plan): MXFP8 (`mode`) on its e4m3 kernel
// (c.fixed_format) with KernelFacts::quant_mxfp8_pairs: 1 where one CTA holds each row, 2 on
// cluster plans too.
void apply_mxfp8_pairs(LaunchConfig& c, nk_quant_mode mode, const KernelFacts& facts);

// Sets c.row_sum_quads (a quantized forward's final plan): with
// KernelFacts::quant_row_sum_quads, on the pinned kernels of plans of exactly kSmallItems
// vectors per thread (c.full_items, or TOKEN's folded kernel at that count: compiled with quads,
// the others spilled 4-8 bytes more), where the row spans warps.
void apply_row_sum_quads(LaunchConfig& c, nk_quant_mode mode, const KernelFacts& facts);

// Sets c.row_sum_quads for a backward's final plan where the row spans warps: with
// KernelFacts::bwd_row_sum_quads on rms_norm_bwd_lean (c.lean); with
// KernelFacts::bwd_pipelined_row_sum_quads on rms_norm_bwd_pipelined (without the pending row
// in registers or the weight in shared memory) for a call of 16-bit x, weight and dy
// (`sixteen_bit`) without dbias.
void apply_bwd_row_sum_quads(LaunchConfig& c, bool sixteen_bit, bool dbias,
                             const KernelFacts& facts);

// Sets c.row_sum_quads for a plain forward's final plan (all_16_bit: x, weight and y) on the
// EXACT registers or cluster plans of 16-byte vectors whose rows span warps: with
// KernelFacts::fwd_row_sum_quads on fwd_registers_row's plans of one row per row group; with
// KernelFacts::fwd_rows_row_sum_quads on rms_norm_fwd_registers_rows's plans of two rows per
// group and 2-4 vectors per thread, for a `common_call` (a weight, no zero-centered add, no
// bias); with KernelFacts::fwd_lean_row_sum_quads on the lean plans (c.lean) that the launcher
// runs on rms_norm_fwd_lean's 64-byte parameter block with the default stores.
void apply_fwd_row_sum_quads(LaunchConfig& c, bool all_16_bit, bool common_call,
                             const KernelFacts& facts);

// The facts that the per-tensor quantized forward plans with when it also writes y_t: facts with
// quant_cta_threads set to quant_ticket_cta_threads.
KernelFacts facts_with_transposed_output(const KernelFacts& facts);

// c for the forward whose y a transpose kernel reads next: with
// KernelFacts::quant_transpose_evict_first, x evict-first where c reads it with a policy.
LaunchConfig keep_y_for_transpose(LaunchConfig c, const KernelFacts& facts);

// The per-tensor quantized forward with y_t in one kernel (rms_norm_fwd_quant_transposed): a
// cluster of cluster_size CTAs (1, 2, 4 or 8) per run of kTransposedRun rows, tile_rows =
// 32 / cluster_size rows each: the fewest CTAs whose rows' codes fit kTransposedTileBytes of
// shared memory, more while the runs leave SMs without a CTA. With facts.quant_fused_transpose
// 2, the persistent kernel: two tiles per CTA, clusters of 2 or more (tile_buffers 2; its
// launcher caps the grid to the resident clusters). Threads: facts.quant_fused_items_target
// vectors each up to 512, at most kSmallItems vectors. grid 0 where it does not apply: the
// knob neither 1 nor 2, vectors of x other than 16 bytes (vec x x_bytes), hidden not a multiple
// of 32, rows too long. The launcher also needs y_t and its row stride 16-byte aligned.
constexpr int kTransposedRun = 32;
constexpr int64_t kTransposedTileBytes = 112 * 1024;
LaunchConfig plan_fwd_quant_transposed(int64_t rows, int64_t hidden, int vec, int x_bytes,
                                       const KernelFacts& facts);

// The backward of few rows in one kernel (rms_norm_bwd_columns): one cluster of up to
// max(max_cluster, max_cluster_pipelined) CTAs of kColumnsThreads threads, CTA r owning columns
// [r * cols_per_cta, (r + 1) * cols_per_cta) of every row (cols_per_cta a multiple of 8), its
// rows staged in shared memory; items = row groups of its dx pass. grid 0 where it does not
// apply: no clusters, more than facts.bwd_columns_max_elements elements, or rows that do not fit
// shared memory. vec: the vector width that dx's rows allow (the other operands are staged
// whatever their alignment). element_bytes: x, dy and dresidual_out (0 without it); outputs:
// how many of dweight and dbias are wanted.
constexpr int kColumnsThreads = 512;
LaunchConfig plan_bwd_columns(int64_t rows, int64_t hidden, int vec, const KernelFacts& facts,
                              const int64_t (&element_bytes)[3], int outputs);

// The column-sums kernel of the backward (rms_norm_bwd_column_sums): CTAs of kColumnSumsThreads
// threads, `column_sums_lanes` column vectors by kColumnSumsThreads / lanes row groups, each
// thread with column_sums_batch(vec) rows in flight (about 128 bytes of x and dy for 16-byte
// vectors of 16-bit data, 64 for 2-byte ones).
constexpr int kColumnSumsThreads = 256;
constexpr int column_sums_batch(int vec) { return vec >= 8 ? 4 : vec >= 4 ? 8 : 16; }
// Sets c.column_sums_grid and column_sums_lanes where the column sums apply: a registers,
// cluster or pipelined plan of several slots (not reduced in the grid) on a device with
// programmatic dependent launch (sm_90, as cluster_launch), at most
// facts.bwd_column_sums_max_rows rows (bwd_column_sums_max_rows_dbias with dbias) and
// bwd_column_sums_max_elements elements (beside a realigned plan: bwd_realign_sums_max_rows and
// _max_elements). Row groups: the fewest (a power of two) whose batches
// hold every row at once, so that one round of loads covers the column; at most 256, or 128 for
// vectors of 4 or more elements (two lanes, 32 bytes or more, per row in a warp's loads), the
// rest in further batches. Vectors of c.column_sums_vec() elements.
void apply_column_sums(LaunchConfig& c, int64_t rows, int64_t hidden, bool dbias,
                       const KernelFacts& facts);

// The backward's dx over 16-bit rows misaligned alike for x, dy, dx and dresidual_out, or
// aligned but not whole vectors (rms_norm_bwd_realigned; the backend checks the pointers):
// 8-element vectors from each row's first 16-byte boundary, one row per cluster of CTAs of
// facts.bwd_realign_threads threads (fewer where the row is short) at about
// facts.bwd_realign_items vectors per thread (0: two where rows x cluster still covers the SMs,
// else one; up to kSmallItems where the largest cluster needs more; up to kRealignMaxItems by
// the knob), dweight/dbias (where
// `sums`) by the column sums of 1-element vectors beside it. grid 0 where it does not apply:
// facts.bwd_realign off, no clusters, rows under 16 columns or longer than the largest cluster
// holds, more than facts.bwd_realign_sums_max_rows or _max_elements (with or without sums: the
// bounds it was measured within), or sums wanted that the column sums cannot take.
LaunchConfig plan_bwd_realigned(int64_t rows, int64_t hidden, bool sums, bool dbias,
                                const KernelFacts& facts);

// The backward's dx and per-slot dweight/dbias partial sums over 16-bit rows misaligned alike
// for x, dy, dx and dresidual_out, or aligned but not whole vectors (rms_norm_bwd_realigned_slots;
// the backend checks the pointers): persistent, each group of threads a slot walking rows slot,
// slot + groups, ..., with groups all the rows or a multiple of 8 (every row of a slot then has
// the same head); a row per group of facts.bwd_realign_threads (fewer on short rows) at 2 or 4
// vectors per thread (facts.bwd_realign_slot_items, by default bwd_realign_four_items_by_rule),
// then 512 threads at 2, then 512 at 4 (no clusters); rows_per_block groups per CTA,
// as many as facts.bwd_realign_slot_cta_threads holds. One slot of partial sums per CTA, at
// most bwd_max_slots(rows); the launcher caps the grid to the CTAs resident at once (keeping
// it a multiple of 8). grid 0 where it does
// not apply: facts.bwd_realign or facts.bwd_realign_slots off, rows under 16 columns or longer
// than one CTA holds (16384 columns).
LaunchConfig plan_bwd_realigned_slots(int64_t rows, int64_t hidden, bool dbias,
                                      const KernelFacts& facts);

// From this many rows the backward's realigned slots keep 2 vectors per thread where that plan
// is pinned at one row per CTA (KernelFacts::bwd_realign_slot_items): measured faster at 8192
// rows (8192 x 8191 203 against 218 us), slower at 4096 and under (4096 x 4097 80.9 against 77.7).
constexpr int64_t kBwdRealignPinnedOneRowMinRows = 8192;

// Whether the rule (KernelFacts::bwd_realign_slot_items 0) takes 4 vectors per thread over
// `two`, the plan of 2 for `rows` rows: where `two` is not pinned, or pinned at one row per CTA
// under kBwdRealignPinnedOneRowMinRows rows (each slot then few rows: the pinned kernel's
// 512-thread rows and twice the slots' partial sums cost more than the unpinned kernel's single
// CTA per SM).
bool bwd_realign_four_items_by_rule(int64_t rows, const LaunchConfig& two);

// The dynamic shared memory of rms_norm_bwd_realigned_slots, in bytes: per column of the CTA,
// its weight (shifted into place) and float32 dweight and dbias sums, where wanted.
inline int64_t bwd_realigned_slots_smem_bytes(int64_t cols_per_cta, bool weight, bool dweight,
                                              bool dbias) {
  return cols_per_cta * ((weight ? 2 : 0) + (dweight ? 4 : 0) + (dbias ? 4 : 0));
}

// The dynamic shared memory of rms_norm_fwd_realigned_slots, in bytes: per column of the CTA,
// its weight and bias (shifted into place), where given.
inline int64_t fwd_realigned_slots_smem_bytes(int64_t cols_per_cta, bool weight, bool bias) {
  return cols_per_cta * ((weight ? 2 : 0) + (bias ? 2 : 0));
}

// The CTAs of a forward realigned_slots plan of `groups` row groups per CTA sharing one offset
// (rms_norm_fwd_realigned_slots): a multiple of 8, one row per group where `resident` CTAs
// allow, else as many as are resident (rounded down to 8); 0 where fewer than 8 fit.
int64_t realigned_shared_offset_ctas(int64_t rows, int64_t groups, int64_t resident);

// The slots of a realigned_slots plan whose launch fits `resident` slots at once: all the rows,
// or the most that are a multiple of 8 (0 where fewer than 8 fit).
int64_t realigned_slots_fitting(int64_t rows, int64_t resident);

// The forward over 16-bit rows misaligned alike for x and y (rms_norm_fwd_realigned_slots; the
// backend checks the pointers), persistent: CTA `slot` walks rows slot, slot + slots, ..., the
// grid all the rows or a multiple of 8 CTAs (every row of a CTA then has the same head), a row
// per group of 256 threads at 2 vectors per thread, else 512 at 2, else 512 at 4; one group per
// CTA, or as many as facts.fwd_realign_slot_cta_threads holds (then the grid always a multiple
// of 8: realigned_shared_offset_ctas); at most the CTAs of 2048 threads per SM (the launcher
// caps the grid to those resident at once, keeping the rule). facts.fwd_realign_slot_items
// (by default, rows of more than 32 x 4 vectors) puts rows of up to 256 x 4 vectors on half the
// threads at 4 vectors each. grid 0
// where it does not apply: facts.fwd_realign or fwd_realign_slots off, fewer than
// facts.fwd_realign_min_elements elements, rows under 16 columns or past 16384.
LaunchConfig plan_fwd_realigned_slots(int64_t rows, int64_t hidden, const KernelFacts& facts);

// Whether rows of whole 16-byte vectors take plan_bwd_realigned too (facts.bwd_realign 2, or
// wide rows of few elements: facts.bwd_realign_whole_min_columns, _max_elements).
bool bwd_realign_whole_vectors(int64_t rows, int64_t hidden, const KernelFacts& facts);

// Upper bound on the slots of the backward's plans other than the pipelined one.
int64_t bwd_max_slots(int64_t rows, const KernelFacts& facts);

// Upper bound on the pipelined backward's slots (KernelFacts::bwd_pipelined_ctas_per_sm).
int64_t bwd_pipelined_max_slots(int64_t rows, const KernelFacts& facts);

// Upper bound on plan_bwd(...).slots for any vec and plan, the slots that the workspace holds:
// the workspace query cannot know the alignment of the pointers that a later call will pass.
int64_t bwd_workspace_slots(int64_t rows, const KernelFacts& facts);

// Bytes of dweight/dbias partial sums a backward call on `rows` x `hidden` needs.
int64_t bwd_workspace_bytes(int64_t rows, int64_t hidden, const KernelFacts& facts,
                            bool want_dweight, bool want_dbias);

}  // namespace normkit::cuda
