// The launch configuration is a pure function; these invariants must hold for every shape,
// on devices with and without thread-block clusters.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <tuple>
#include <utility>

#include "cuda/grid_reduce_columns.h"
#include "cuda/launch_config.h"
#include "cuda/transpose_tickets.h"

namespace {

using normkit::cuda::KernelFacts;
using normkit::cuda::LaunchConfig;
using normkit::cuda::RowPlan;

// The most vectors per thread that the backward's registers kernels of vec hold.
int bwd_items_bound(int vec) {
  return vec == 1 ? normkit::cuda::kBwdNarrowItemsWide : normkit::cuda::bwd_items_max(vec);
}

void expect_covers(const LaunchConfig& c, int64_t rows, int64_t hidden, int items_max,
                   bool persistent, const KernelFacts& f) {
  SCOPED_TRACE(c.describe());
  EXPECT_GE(c.grid, 1);
  EXPECT_LE(c.threads_per_row * c.rows_per_block, 1024);
  if (c.plan == RowPlan::kStreaming) {
    EXPECT_EQ(c.cluster_size, 1);
  } else if (c.plan == RowPlan::kPipelined) {
    EXPECT_LE(c.cluster_size,
              f.cluster_launch ? std::max(f.max_cluster, f.max_cluster_pipelined) : 1);
    if (c.cluster_size > 1) {
      EXPECT_EQ(c.rows_per_block, 1);
    }
    // The forward's cluster instantiation holds 2 vectors per thread.
    if (c.cluster_size > 1 && !persistent) {
      EXPECT_LE(c.items, 2);
    }
    EXPECT_EQ(hidden % c.vec, 0);
    if (c.threads_per_row < 32) {  // several rows per warp (KernelFacts::bwd_sub_warp_rows)
      EXPECT_EQ(c.threads_per_row & (c.threads_per_row - 1), 0);
      EXPECT_EQ(c.threads_per_row * c.rows_per_block % 32, 0);  // whole warps
    } else {
      EXPECT_EQ(c.threads_per_row % 32, 0);
      EXPECT_LE(c.rows_per_block, 8);  // named barriers 1..8
    }
    EXPECT_LE(c.items, normkit::cuda::kPipelineItems);
    EXPECT_EQ(c.cols_per_cta, int64_t(c.threads_per_row) * c.items * c.vec);
    EXPECT_GE(c.cols_per_cta * c.cluster_size, hidden);
    EXPECT_EQ(c.grid % c.cluster_size, 0);
    EXPECT_GT(c.smem_bytes, 0);
    EXPECT_LE(c.smem_bytes, f.smem_per_block);
  } else {
    EXPECT_LE(c.items, items_max);
    // The backward (persistent) may take the non-portable cluster sizes for narrow vectors.
    const int most = persistent ? std::max(f.max_cluster, f.max_cluster_pipelined)
                                : std::max(f.fwd_max_cluster, f.fwd_wide_row_cluster);
    EXPECT_LE(c.cluster_size, f.cluster_launch ? most : 1);
    EXPECT_EQ(c.cols_per_cta % c.vec, 0);
    // Every column is covered: CTAs of the cluster x threads x items x vector width.
    EXPECT_GE(c.cols_per_cta * c.cluster_size, hidden);
    EXPECT_GE(int64_t(c.threads_per_row) * c.items * c.vec, c.cols_per_cta);
    if (c.cluster_size > 1) {
      EXPECT_EQ(c.rows_per_block, 1);
    }
    if (!persistent) {
      EXPECT_GE(c.grid / c.cluster_size * c.rows_per_block * c.rows_per_group, rows);
    }
    if (c.rows_per_group > 1) {  // (KernelFacts::fwd_rows_per_group: EXACT, whole CTAs)
      EXPECT_TRUE(c.exact);
      EXPECT_LE(c.threads_per_row, f.fwd_rows_per_group_max_threads);
      if (c.threads_per_row > 32) {
        EXPECT_EQ(c.threads_per_row % 32, 0);  // (block_sums: whole warps)
      }
      EXPECT_EQ(c.grid * c.rows_per_block * c.rows_per_group, rows);
    }
  }
  // A pipelined forward is persistent too, but needs no slots: at most one CTA (or cluster)
  // per row group.
  if (!persistent && c.plan == RowPlan::kPipelined) {
    EXPECT_LE((c.grid / c.cluster_size - 1) * c.rows_per_block, rows);
  }
  if (persistent) {
    EXPECT_GE(c.slots, 1);
    EXPECT_LE(c.slots, normkit::cuda::bwd_workspace_slots(rows, f));
    EXPECT_EQ(c.grid, c.slots * c.cluster_size);
  }
}

TEST(LaunchConfig, CoversEveryShapeWithAndWithoutClusters) {
  for (const auto& [clusters, sub_warp] :  // (sub_warp: KernelFacts::bwd_sub_warp_rows, and
       {std::pair{true, 0}, {true, 1}, {true, 2}, {false, 0}, {false, 1}, {false, 2}}) {
    KernelFacts f;  // the forward's rows per group at 2 where sub_warp is 2)
    f.sm_count = clusters ? 132 : 108;
    f.cluster_launch = clusters;
    f.bwd_sub_warp_rows = sub_warp;
    f.fwd_rows_per_group = sub_warp == 2 ? 2 : 1;
    for (int64_t rows : {1, 3, 29, 128, 4096, 32768}) {
      for (int64_t hidden :
           {1, 29, 71, 128, 200, 1024, 4096, 17389, 65536, 65537, 262144, 1 << 20}) {
        for (int vec : {1, 2, 4, 8}) {
          SCOPED_TRACE(testing::Message() << rows << "x" << hidden << " vec " << vec
                                          << (clusters ? " clusters" : " no clusters")
                                          << (sub_warp ? " sub-warp rows" : ""));
          expect_covers(normkit::cuda::plan_fwd(rows, hidden, vec, f), rows, hidden,
                        normkit::cuda::fwd_items_max(vec), false, f);
          expect_covers(normkit::cuda::plan_bwd(rows, hidden, vec, f), rows, hidden,
                        bwd_items_bound(vec), true, f);
          for (int64_t staged : {2, 4, 8}) {  // bytes per column: bf16 x ... fp32 x+residual
            expect_covers(normkit::cuda::plan_fwd(rows, hidden, vec, f, staged), rows, hidden,
                          normkit::cuda::fwd_items_max(vec), false, f);
          }
          for (int64_t staged : {4, 6, 12, 24}) {  // bytes per column: bf16 x+dy ... fp32 x+dy+dres
            expect_covers(normkit::cuda::plan_bwd(rows, hidden, vec, f, staged), rows, hidden,
                          bwd_items_bound(vec), true, f);
          }
          // The huge-row clusters off (NK_TUNE_BWD_HUGE_ROW_CLUSTER=0): streaming past 64K.
          KernelFacts no_huge_clusters = f;
          no_huge_clusters.max_cluster_pipelined = 0;
          expect_covers(normkit::cuda::plan_bwd(rows, hidden, vec, no_huge_clusters, 4), rows,
                        hidden, bwd_items_bound(vec), true, no_huge_clusters);
        }
      }
    }
  }
}

TEST(LaunchConfig, CoversEveryShapeWithSmallerClusterCtas) {
  // The tuning knobs for the CTA size of split rows (NK_TUNE_*_CLUSTER_THREADS) and the
  // forward's largest cluster.
  for (int threads : {256, 128, 64}) {
    KernelFacts f;
    f.fwd_cluster_threads = f.bwd_cluster_threads = threads;
    f.fwd_max_cluster = threads == 128 ? 16 : 8;  // and NK_TUNE_FWD_MAX_CLUSTER
    for (int64_t rows : {1, 29, 256, 1024}) {
      for (int64_t hidden : {17389, 32768, 65536, 131072, 262144}) {
        for (int vec : {1, 2, 4, 8}) {
          SCOPED_TRACE(testing::Message() << rows << "x" << hidden << " vec " << vec << " threads "
                                          << threads);
          expect_covers(normkit::cuda::plan_fwd(rows, hidden, vec, f, 2), rows, hidden,
                        normkit::cuda::fwd_items_max(vec), false, f);
          expect_covers(normkit::cuda::plan_bwd(rows, hidden, vec, f, 4), rows, hidden,
                        bwd_items_bound(vec), true, f);
        }
      }
    }
  }
}

TEST(LaunchConfig, CoversEveryShapeAtFewerVectorsPerThread) {
  // NK_TUNE_FWD_ITEMS: more threads per row, as many vectors in all.
  for (int items_target : {1, 2}) {
    KernelFacts f;
    f.fwd_items_target = items_target;
    for (int64_t rows : {1, 29, 4096}) {
      for (int64_t hidden : {29, 1024, 4096, 7168, 12288, 17389, 65536}) {
        for (int vec : {1, 8}) {
          SCOPED_TRACE(testing::Message() << rows << "x" << hidden << " vec " << vec
                                          << " items " << items_target);
          const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, vec, f);
          expect_covers(c, rows, hidden, normkit::cuda::fwd_items_max(vec), false, f);
          for (int block : {0, 128}) {
            if (block > 0 && hidden % block != 0) continue;
            for (bool dynamic : {false, true}) {
              if (block > 0 && !dynamic) continue;
              expect_covers(normkit::cuda::plan_fwd_quant(rows, hidden, vec, block, dynamic, f),
                            rows, hidden, normkit::cuda::fwd_items_max(vec), false, f);
            }
          }
        }
      }
    }
    // 4096 x 4096 at vec 8: 512 vectors, 256 threads x 2 (not 128 x 4).
    const LaunchConfig c = normkit::cuda::plan_fwd(4096, 4096, 8, f);
    EXPECT_EQ(c.threads_per_row, items_target == 2 ? 256 : 512);
    EXPECT_TRUE(c.exact);
  }
}

TEST(LaunchConfig, WorkspaceBoundsTheSlotsOfEveryVectorWidth) {
  KernelFacts f;
  for (int64_t rows : {1, 7, 300, 100000}) {
    const int64_t bytes = normkit::cuda::bwd_workspace_bytes(rows, 4096, f, true, true);
    for (int vec : {1, 2, 4, 8}) {
      for (int64_t staged : {0, 4}) {
        const LaunchConfig c = normkit::cuda::plan_bwd(rows, 4096, vec, f, staged);
        EXPECT_LE(2 * c.slots * 4096 * int64_t(sizeof(float)), bytes);
      }
    }
  }
  EXPECT_EQ(normkit::cuda::bwd_workspace_bytes(100, 4096, f, false, false), 0);
}

// Under NK_TUNE_BWD_REDUCE_IN_GRID=1, persistent backward plans of several slots sum them in
// the main kernel (a grid barrier, then each CTA sums some columns: grid_reduce.cuh); one slot
// writes dweight directly, and the streaming kernel accumulates in the workspace, so
// reduce_slots follows it. Off by default (measured slower).
TEST(LaunchConfig, BackwardReducesItsSlotsInTheGridWhereItHasSeveral) {
  KernelFacts f;
  EXPECT_FALSE(normkit::cuda::plan_bwd(4096, 1024, 8, f, 4).reduce_in_grid);
  f.bwd_reduce_in_grid = 1;
  int planned = 0;
  for (int64_t rows : {1, 2, 29, 128, 4096, 100000}) {
    for (int64_t hidden : {1, 1000, 1024, 4096, 17389, 65536, 262144, 1 << 20}) {
      for (int vec : {1, 2, 4, 8}) {
        for (int64_t staged : {0, 4, 8}) {
          const LaunchConfig c = normkit::cuda::plan_bwd(rows, hidden, vec, f, staged);
          SCOPED_TRACE(c.describe());
          const bool expected = c.slots > 1 && c.plan != RowPlan::kStreaming;
          EXPECT_EQ(c.reduce_in_grid, expected);
          planned += c.reduce_in_grid;
          EXPECT_EQ(c.describe().find("reduce-in-grid") != std::string::npos, expected);
        }
      }
    }
  }
  EXPECT_GT(planned, 100);
  f.bwd_reduce_in_grid = 0;
  EXPECT_FALSE(normkit::cuda::plan_bwd(4096, 1024, 8, f, 4).reduce_in_grid);
  EXPECT_FALSE(normkit::cuda::plan_bwd(29, 17389, 1, f, 0).reduce_in_grid);
}

// Every column of [0, hidden) is summed by exactly one CTA of the grid, in whole 16-byte
// vectors of a power-of-two count.
TEST(LaunchConfig, GridReductionColumnsCoverTheRowOnce) {
  for (int64_t ctas : {1, 2, 120, 132, 261, 264}) {
    for (int64_t hidden : {1, 7, 8, 1000, 1024, 4096, 17389, 65536, 262144}) {
      const int64_t chunk = normkit::cuda::grid_reduce_columns_per_cta(hidden, ctas);
      EXPECT_GE(chunk, 8);
      EXPECT_EQ(chunk & (chunk - 1), 0) << chunk;
      EXPECT_GE(chunk * ctas, hidden);
      EXPECT_TRUE(chunk == 8 || (chunk / 2) * ctas < hidden) << "the smallest such chunk";
    }
  }
  EXPECT_EQ(normkit::cuda::grid_reduce_smem_bytes(512), 8192);
}

// The column sums' plan of one backward shape, checked against apply_column_sums' rule; true
// where it applies.
bool expect_column_sums_rule(int64_t rows, int64_t hidden, int vec, bool dbias,
                             const KernelFacts& f) {
  using normkit::cuda::column_sums_batch;
  using normkit::cuda::kColumnSumsThreads;
  LaunchConfig c = normkit::cuda::plan_bwd(rows, hidden, vec, f, 4);
  normkit::cuda::apply_column_sums(c, rows, hidden, dbias, f);
  SCOPED_TRACE(c.describe() + (dbias ? " with dbias" : ""));
  const int64_t max_rows = dbias ? f.bwd_column_sums_max_rows_dbias : f.bwd_column_sums_max_rows;
  const bool expected = c.slots > 1 && c.plan != RowPlan::kStreaming &&
                        c.plan != RowPlan::kColumns && rows <= max_rows &&
                        rows * hidden <= f.bwd_column_sums_max_elements;
  EXPECT_EQ(c.column_sums_grid > 0, expected);
  EXPECT_EQ(c.describe().find("column-sums") != std::string::npos, expected);
  if (!expected || c.column_sums_grid == 0) return false;
  const int lanes = c.column_sums_lanes;
  const int groups = kColumnSumsThreads / lanes;
  EXPECT_EQ(lanes * groups, kColumnSumsThreads);
  const int max_groups = vec >= 4 ? kColumnSumsThreads / 2 : kColumnSumsThreads;
  EXPECT_LE(groups, max_groups);
  EXPECT_TRUE(groups == max_groups || int64_t(groups) * column_sums_batch(vec) >= rows)
      << "one batch holds every row where the groups allow";
  EXPECT_TRUE(groups == 1 || int64_t(groups / 2) * column_sums_batch(vec) < rows)
      << "the fewest such groups";
  const int64_t vectors = (hidden + vec - 1) / vec;
  EXPECT_GE(c.column_sums_grid * lanes, vectors);
  EXPECT_LT((c.column_sums_grid - 1) * lanes, vectors) << "no CTA without a column";
  return true;
}

// Few rows sum dweight/dbias down the columns beside the main kernel: every column vector in one
// CTA, every row in one batch of loads where the row groups allow, and only where the slots would
// otherwise be reduced after the main kernel; more rows with dbias.
TEST(LaunchConfig, FewRowsSumTheirColumnsBesideTheMainKernel) {
  using normkit::cuda::apply_column_sums;
  KernelFacts f;
  EXPECT_EQ(f.bwd_column_sums_max_rows, 256);
  EXPECT_EQ(f.bwd_column_sums_max_rows_dbias, 2048);
  int applied = 0;
  for (int64_t rows : {2, 7, 29, 64, 128, 255, 256, 257, 1024, 2048, 2049, 4096}) {
    for (int64_t hidden : {1, 100, 1000, 4096, 17389, 65536}) {
      for (int vec : {1, 2, 4, 8}) {
        for (bool dbias : {false, true}) {
          applied += expect_column_sums_rule(rows, hidden, vec, dbias, f);
        }
      }
    }
  }
  EXPECT_GT(applied, 20);
  // plan_bwd then the column sums, without dbias, as the backend plans them.
  auto planned = [](int64_t rows, int64_t hidden, int vec, const KernelFacts& facts) {
    LaunchConfig c = normkit::cuda::plan_bwd(rows, hidden, vec, facts, vec == 1 ? 0 : 4);
    apply_column_sums(c, rows, hidden, false, facts);
    return c;
  };
  // Past one batch: at most 128 row groups of 16-byte vectors (two lanes per row in a warp's
  // loads), 256 of narrower ones.
  KernelFacts many = f;
  many.bwd_column_sums_max_rows = many.bwd_column_sums_max_elements = int64_t(1) << 30;
  for (int vec : {1, 2, 4, 8}) {
    const LaunchConfig c = planned(4096, 1024, vec, many);
    EXPECT_EQ(c.column_sums_lanes, vec >= 4 ? 2 : 1) << vec;
    EXPECT_EQ(c.column_sums_grid, 1024 / vec / c.column_sums_lanes) << vec;
  }
  // The sweep's few-row shapes, as `normkit bench --explain` shows them.
  EXPECT_EQ(planned(128, 4096, 8, f).column_sums_lanes, 8);  // 32 groups of 4 rows, 64 columns
  EXPECT_EQ(planned(128, 4096, 8, f).column_sums_grid, 64);
  EXPECT_EQ(planned(29, 17389, 1, f).column_sums_lanes, 128);  // 2 groups of up to 16 rows
  EXPECT_EQ(planned(29, 17389, 1, f).column_sums_grid, 136);
  // Off by the knob, without programmatic dependent launch, or with the reduction in the grid.
  KernelFacts off = f, old_device = f, in_grid = f;
  off.bwd_column_sums_max_elements = 0;
  old_device.cluster_launch = false;
  in_grid.bwd_reduce_in_grid = 1;
  for (const KernelFacts& facts : {off, old_device, in_grid}) {
    EXPECT_EQ(planned(128, 4096, 8, facts).column_sums_grid, 0);
  }
}

// Misaligned few-row backwards write dx from 16-byte vectors (rms_norm_bwd_realigned): one row
// per cluster, every vector of the row covered once, the CTA no wider than its share; the column
// sums beside it read 1-element vectors, and where they cannot run (too many rows or elements
// for them) while dweight or dbias is wanted, the plan does not apply.
TEST(LaunchConfig, MisalignedFewRowsWriteDxFromAlignedVectors) {
  using normkit::cuda::kSmallItems;
  using normkit::cuda::plan_bwd_realigned;
  const KernelFacts f;
  EXPECT_EQ(f.bwd_realign, 1);
  int planned = 0;
  for (int64_t rows : {1, 2, 29, 128, 256, 257, 2048, 2049}) {
    for (int64_t hidden : {15, 16, 17, 1001, 4095, 4609, 17389, 65537, 262143}) {
      for (bool sums : {false, true}) {
        for (bool dbias : {false, true}) {
          if (dbias && !sums) continue;
          const LaunchConfig c = plan_bwd_realigned(rows, hidden, sums, dbias, f);
          SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + " sums " +
                       std::to_string(sums) + " dbias " + std::to_string(dbias) + ": " +
                       c.describe());
          // (the realigned plan's own bounds, with or without dbias)
          const int64_t largest_cluster = std::max(f.max_cluster, f.max_cluster_pipelined);
          const bool within = hidden >= 16 && rows <= f.bwd_realign_sums_max_rows &&
                              rows * hidden <= f.bwd_realign_sums_max_elements &&
                              (hidden + 7) / 8 <= largest_cluster * f.bwd_realign_threads *
                                                      kSmallItems;  // (not 262143 columns)
          EXPECT_EQ(c.grid > 0, within);
          if (c.grid == 0) continue;
          ++planned;
          EXPECT_TRUE(c.realigned);
          EXPECT_EQ(c.vec, 8);
          EXPECT_EQ(c.rows_per_block, 1);
          EXPECT_EQ(c.grid, rows * c.cluster_size);
          EXPECT_LE(c.cluster_size, std::max(f.max_cluster, f.max_cluster_pipelined));
          EXPECT_EQ(c.plan, c.cluster_size > 1 ? RowPlan::kCluster : RowPlan::kRegisters);
          EXPECT_GE(c.items, 1);
          EXPECT_LE(c.items, kSmallItems);
          EXPECT_EQ(c.threads_per_row % 32, 0);
          EXPECT_LE(c.threads_per_row, f.bwd_realign_threads);
          const int64_t vectors = (hidden + 7) / 8;
          EXPECT_GE(c.cols_per_cta * c.cluster_size, vectors * 8) << "the row covered";
          EXPECT_LT(c.cols_per_cta * (c.cluster_size - 1), vectors * 8) << "no idle CTA";
          EXPECT_GE(int64_t(c.threads_per_row) * c.items * 8, c.cols_per_cta);
          EXPECT_EQ(c.column_sums_grid > 0, sums);
          if (sums) {
            EXPECT_EQ(c.column_sums_vec(), 1);
            EXPECT_GE(c.column_sums_grid * c.column_sums_lanes, hidden);
          }
        }
      }
    }
  }
  EXPECT_GT(planned, 30);
  // The sweep's misaligned shape: clusters of 5 CTAs of 224 threads, two vectors each (145 CTAs
  // fill the SMs); 32 x 8191 at two would leave SMs idle (64 CTAs), so one (128 CTAs).
  const LaunchConfig odd = plan_bwd_realigned(29, 17389, true, false, f);
  EXPECT_EQ(odd.cluster_size, 5);
  EXPECT_EQ(odd.threads_per_row, 224);  // 435 vectors per CTA
  EXPECT_EQ(odd.items, 2);
  EXPECT_EQ(odd.column_sums_grid, 136);
  const LaunchConfig few = plan_bwd_realigned(32, 8191, true, false, f);
  EXPECT_EQ(few.items, 1);
  EXPECT_EQ(few.cluster_size, 4);
  KernelFacts one = f;
  one.bwd_realign_items = 1;
  EXPECT_EQ(plan_bwd_realigned(29, 17389, true, false, one).cluster_size, 9);
  // Up to kRealignMaxItems by the knob: a row of 17389 in one CTA of 512 threads, no cluster.
  KernelFacts whole_cta = f;
  whole_cta.bwd_realign_threads = 512;
  whole_cta.bwd_realign_items = normkit::cuda::kRealignMaxItems;
  const LaunchConfig single = plan_bwd_realigned(29, 17389, true, false, whole_cta);
  EXPECT_EQ(single.cluster_size, 1);
  EXPECT_EQ(single.plan, RowPlan::kRegisters);
  EXPECT_EQ(single.grid, 29);
  EXPECT_EQ(single.threads_per_row, 384);  // 2174 vectors at up to 6 per thread
  EXPECT_EQ(single.items, 6);
  // Rows of whole vectors: from 32768 columns up to 1M elements (measured faster there, slower
  // on narrower or more rows), all of them at setting 2, none at 0.
  using normkit::cuda::bwd_realign_whole_vectors;
  EXPECT_TRUE(bwd_realign_whole_vectors(32, 32768, f));
  EXPECT_TRUE(bwd_realign_whole_vectors(8, 131072, f));
  EXPECT_TRUE(bwd_realign_whole_vectors(1, 65536, f));
  EXPECT_FALSE(bwd_realign_whole_vectors(64, 32768, f));  // 2M elements
  EXPECT_FALSE(bwd_realign_whole_vectors(128, 4096, f));  // narrower rows
  EXPECT_FALSE(bwd_realign_whole_vectors(64, 16384, f));
  KernelFacts all = f, none_whole = f;
  all.bwd_realign = 2;
  none_whole.bwd_realign_whole_min_columns = 0;
  EXPECT_TRUE(bwd_realign_whole_vectors(128, 4096, all));
  EXPECT_FALSE(bwd_realign_whole_vectors(32, 32768, none_whole));
  // Off by the knob or without clusters.
  KernelFacts off = f, old_device = f;
  off.bwd_realign = 0;
  EXPECT_FALSE(bwd_realign_whole_vectors(32, 32768, off));
  old_device.cluster_launch = false;
  EXPECT_EQ(plan_bwd_realigned(29, 17389, true, false, off).grid, 0);
  EXPECT_EQ(plan_bwd_realigned(29, 17389, false, false, old_device).grid, 0);
}

TEST(LaunchConfig, ManyMisalignedRowsKeepOneHeadPerSlot) {
  using normkit::cuda::plan_bwd_realigned_slots;
  using normkit::cuda::realigned_slots_fitting;
  const KernelFacts f;
  int planned = 0;
  for (int64_t rows : {1, 7, 8, 100, 263, 264, 265, 300, 2100, 100000}) {
    for (int64_t hidden : {15, 16, 33, 1001, 4095, 4097, 16383, 17389, 32767, 65537}) {
      const LaunchConfig c = plan_bwd_realigned_slots(rows, hidden, rows % 2 == 0, f);
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
      const int64_t vectors = (hidden + 7) / 8;
      // One CTA of up to 512 threads x 4 vectors (no clusters).
      EXPECT_EQ(c.grid > 0, hidden >= 16 && vectors <= 4 * 512);
      if (c.grid == 0) continue;
      ++planned;
      EXPECT_TRUE(c.realigned && c.realigned_slots);
      EXPECT_EQ(c.vec, 8);
      EXPECT_EQ(c.cluster_size, 1);
      EXPECT_EQ(c.plan, RowPlan::kRegisters);
      EXPECT_LE(c.items, normkit::cuda::kSmallItems);
      EXPECT_EQ(c.threads_per_row % 32, 0);
      EXPECT_LE(c.threads_per_row, 512);
      EXPECT_GE(c.cols_per_cta, vectors * 8) << "the row covered";
      EXPECT_EQ(c.cols_per_cta % 8, 0);
      EXPECT_GE(int64_t(c.threads_per_row) * c.items * 8, c.cols_per_cta);
      // Rows in groups of threads_per_row threads, as many as 512 threads hold (at most 4, at
      // most the rows), each group a slot: every row its own group, or CTAs a multiple of 8
      // (one head per group); one slot of partial sums per CTA, within the workspace that
      // bwd_workspace_bytes sizes.
      const int64_t groups = std::min<int64_t>(rows, std::clamp(512 / c.threads_per_row, 1, 4));
      EXPECT_EQ(c.rows_per_block, groups);
      EXPECT_TRUE(c.grid * groups >= rows || c.grid % 8 == 0) << c.grid;
      EXPECT_LT((c.grid - 1) * groups, rows) << "no CTA without a row";
      EXPECT_LE(c.slots, normkit::cuda::bwd_max_slots(rows, f));
      EXPECT_EQ(c.grid, c.slots);
      EXPECT_EQ(c.smem_bytes % 16, 0);
      EXPECT_EQ(c.column_sums_grid, 0);
    }
  }
  EXPECT_GT(planned, 50);
  const LaunchConfig odd = plan_bwd_realigned_slots(4096, 4095, false, f);
  EXPECT_EQ(odd.threads_per_row, 256);
  EXPECT_EQ(odd.items, 2);
  EXPECT_EQ(odd.slots, 264);
  EXPECT_EQ(odd.rows_per_block, 2);
  // 1001 columns: 64 threads a row, four rows per CTA.
  const LaunchConfig narrow = plan_bwd_realigned_slots(4096, 1001, false, f);
  EXPECT_EQ(narrow.threads_per_row, 64);
  EXPECT_EQ(narrow.rows_per_block, 4);
  EXPECT_EQ(narrow.slots, 264);
  EXPECT_EQ(plan_bwd_realigned_slots(100, 1001, false, f).grid, 25);
  KernelFacts eight = f;
  eight.bwd_realign_slot_cta_rows = 8;
  EXPECT_EQ(plan_bwd_realigned_slots(4096, 1001, false, eight).rows_per_block, 8);
  // Held to 64 registers from 2048 rows of 128 threads or more, at up to 2 vectors per thread.
  EXPECT_FALSE(narrow.pinned_registers);
  EXPECT_TRUE(odd.pinned_registers);
  EXPECT_TRUE(plan_bwd_realigned_slots(2048, 2049, false, f).pinned_registers);
  EXPECT_FALSE(plan_bwd_realigned_slots(2047, 4095, false, f).pinned_registers);
  EXPECT_FALSE(plan_bwd_realigned_slots(4096, 16383, false, f).pinned_registers)
      << "4 vectors per thread: not pinned";
  KernelFacts pinned = f;
  pinned.bwd_realign_slot_pinned = 2;
  EXPECT_TRUE(plan_bwd_realigned_slots(4096, 1001, false, pinned).pinned_registers);
  pinned.bwd_realign_slot_pinned = 0;
  EXPECT_FALSE(plan_bwd_realigned_slots(4096, 4095, false, pinned).pinned_registers);
  KernelFacts one_row = f;
  one_row.bwd_realign_slot_cta_threads = 0;
  EXPECT_EQ(plan_bwd_realigned_slots(4096, 1001, false, one_row).rows_per_block, 1);
  EXPECT_EQ(plan_bwd_realigned_slots(4096, 16383, false, f).items, 4);
  EXPECT_EQ(plan_bwd_realigned_slots(4096, 17389, false, f).grid, 0);  // no clusters
  // The launch's cap keeps the rule: all rows, or a multiple of 8.
  EXPECT_EQ(realigned_slots_fitting(100, 132), 100);
  EXPECT_EQ(realigned_slots_fitting(300, 132), 128);
  EXPECT_EQ(realigned_slots_fitting(300, 7), 0);
  KernelFacts off = f;
  off.bwd_realign_slots = 0;
  EXPECT_EQ(plan_bwd_realigned_slots(4096, 4095, false, off).grid, 0);
}

// The forward's persistent realigned plan (on by default; the knob turns it off).
TEST(LaunchConfig, ForwardSlotsOfMisalignedRowsKeepOneHeadPerCta) {
  using normkit::cuda::plan_fwd_realigned_slots;
  KernelFacts off;
  off.fwd_realign_slots = 0;
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 4095, off).grid, 0);
  const KernelFacts f;
  EXPECT_EQ(f.fwd_realign_slots, 1);
  int planned = 0;
  for (int64_t rows : {1, 64, 257, 1000, 4096, 100000}) {
    for (int64_t hidden : {15, 33, 1001, 4095, 4097, 16383, 16385, 17389}) {
      const LaunchConfig c = plan_fwd_realigned_slots(rows, hidden, f);
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
      const int64_t vectors = (hidden + 7) / 8;
      EXPECT_EQ(c.grid > 0, hidden >= 16 && vectors <= 4 * 512 &&
                                rows * hidden >= f.fwd_realign_min_elements);
      if (c.grid == 0) continue;
      ++planned;
      EXPECT_TRUE(c.realigned && c.realigned_slots);
      EXPECT_EQ(c.cluster_size, 1);
      EXPECT_EQ(c.threads_per_row % 32, 0);
      EXPECT_LE(c.threads_per_row, 512);
      EXPECT_LE(c.items, normkit::cuda::kSmallItems);
      EXPECT_GE(int64_t(c.threads_per_row) * c.items * 8, vectors * 8) << "the row covered";
      EXPECT_TRUE(c.grid == rows || c.grid % 8 == 0) << c.grid;
      EXPECT_LE(c.grid, int64_t(f.sm_count) * (2048 / c.threads_per_row));
    }
  }
  EXPECT_GT(planned, 10);
  const LaunchConfig odd = plan_fwd_realigned_slots(4096, 4095, f);
  EXPECT_EQ(odd.threads_per_row, 128);
  EXPECT_EQ(odd.items, 4);
  EXPECT_EQ(odd.grid, 2112);  // 132 SMs x 16 CTAs of 128 threads, a multiple of 8
  EXPECT_EQ(odd.rows_per_block, 1);
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 1001, f).rows_per_block, 1) << "off by default";
}

// Where asked, the forward's CTAs hold several row groups that share one offset: CTAs always a
// multiple of 8, one row per group where they fit.
TEST(LaunchConfig, ForwardRowGroupsShareOneOffsetPerCta) {
  using normkit::cuda::plan_fwd_realigned_slots;
  using normkit::cuda::realigned_shared_offset_ctas;
  EXPECT_EQ(realigned_shared_offset_ctas(4096, 4, 10000), 1024);
  EXPECT_EQ(realigned_shared_offset_ctas(10, 4, 10000), 8);
  EXPECT_EQ(realigned_shared_offset_ctas(4099, 4, 10000), 1032);
  EXPECT_EQ(realigned_shared_offset_ctas(100000, 4, 1059), 1056);
  EXPECT_EQ(realigned_shared_offset_ctas(100000, 4, 7), 0);
  KernelFacts f;
  f.fwd_realign_slot_cta_threads = 256;
  const LaunchConfig narrow = plan_fwd_realigned_slots(4096, 1001, f);
  EXPECT_EQ(narrow.threads_per_row, 64);
  EXPECT_EQ(narrow.items, 2);
  EXPECT_EQ(narrow.rows_per_block, 4);
  EXPECT_EQ(narrow.grid, 1024);
  EXPECT_EQ(narrow.smem_bytes, 1008 * 4) << "one weight and bias for the CTA";
  EXPECT_EQ(plan_fwd_realigned_slots(100000, 1001, f).grid, 132 * 8);
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 8191, f).rows_per_block, 1) << "256-thread rows";
  for (int64_t rows : {300, 1050, 4097, 100000}) {
    for (int64_t hidden : {23, 513, 1001, 2049}) {
      const LaunchConfig c = plan_fwd_realigned_slots(rows, hidden, f);
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
      if (c.grid == 0) continue;
      EXPECT_LE(int64_t(c.threads_per_row) * c.rows_per_block, 256);
      if (c.rows_per_block > 1) {
        EXPECT_EQ(c.grid % 8, 0);
      }
    }
  }
}

// The persistent realigned plans of both passes, and the few-row realigned backward, take the
// kernels compiled for a weight only (where the call is such) unless the knob is off.
TEST(LaunchConfig, RealignedSlotsPlansTakeWeightOnlyKernels) {
  KernelFacts f;
  EXPECT_TRUE(normkit::cuda::plan_fwd_realigned_slots(4096, 4095, f).weight_only_kernels);
  EXPECT_TRUE(normkit::cuda::plan_bwd_realigned_slots(4096, 4095, false, f).weight_only_kernels);
  const LaunchConfig few = normkit::cuda::plan_bwd_realigned(29, 17389, true, false, f);
  ASSERT_GT(few.grid, 0);
  EXPECT_TRUE(few.weight_only_kernels);
  f.realign_weight_only = 0;
  EXPECT_FALSE(normkit::cuda::plan_bwd_realigned(29, 17389, true, false, f).weight_only_kernels);
  EXPECT_FALSE(normkit::cuda::plan_fwd_realigned_slots(4096, 4095, f).weight_only_kernels);
  EXPECT_FALSE(normkit::cuda::plan_bwd_realigned_slots(4096, 4095, false, f).weight_only_kernels);
}

// A persistent realigned plan for rows of `hidden` columns: launched, at most 4 vectors per
// thread, and its threads' vectors cover the row's body (all but the head's up to 7 elements).
void expect_slots_cover_the_row(const LaunchConfig& c, int64_t hidden) {
  SCOPED_TRACE(std::to_string(hidden) + ": " + c.describe());
  ASSERT_GT(c.grid, 0);
  EXPECT_LE(c.items, 4);
  EXPECT_GE(int64_t(c.threads_per_row) * c.items * 8, hidden - 7) << "the body covered";
}

// The persistent realigned forward's rows take 4 vectors per thread where the row then takes
// more than a warp (by default), or everywhere, or never (2).
TEST(LaunchConfig, ForwardRealignedSlotsAtFourVectorsPerThread) {
  using normkit::cuda::plan_fwd_realigned_slots;
  KernelFacts f;
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 4095, f).threads_per_row, 128);
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 4095, f).items, 4);
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 2049, f).threads_per_row, 96);
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 1001, f).threads_per_row, 64) << "one warp at 4";
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 1001, f).items, 2);
  EXPECT_EQ(plan_fwd_realigned_slots(8192, 1025, f).threads_per_row, 64) << "129 vectors";
  EXPECT_EQ(plan_fwd_realigned_slots(8192, 1025, f).items, 3);
  f.fwd_realign_slot_items = 2;
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 4095, f).threads_per_row, 256);
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 4095, f).items, 2);
  f.fwd_realign_slot_items = 4;
  const LaunchConfig odd = plan_fwd_realigned_slots(4096, 4095, f);
  EXPECT_EQ(odd.threads_per_row, 128);
  EXPECT_EQ(odd.items, 4);
  EXPECT_EQ(plan_fwd_realigned_slots(4096, 1001, f).threads_per_row, 32);
  EXPECT_EQ(plan_fwd_realigned_slots(1024, 16383, f).threads_per_row, 512) << "as before";
  for (int64_t hidden : {23, 513, 1001, 2049, 8191, 16383}) {
    const int64_t rows = std::max<int64_t>(4096, f.fwd_realign_min_elements / hidden + 1);
    expect_slots_cover_the_row(plan_fwd_realigned_slots(rows, hidden, f), hidden);
  }
}

// Where asked, the persistent realigned backward's rows take 4 vectors per thread (unpinned)
// where the row then takes more than a warp; 2 where asked.
TEST(LaunchConfig, BackwardRealignedSlotsAtFourVectorsPerThreadWhereAsked) {
  using normkit::cuda::plan_bwd_realigned_slots;
  KernelFacts f;
  f.bwd_realign_slot_items = 2;
  const LaunchConfig two = plan_bwd_realigned_slots(4096, 4095, false, f);
  EXPECT_EQ(two.threads_per_row, 256);
  EXPECT_EQ(two.items, 2);
  EXPECT_TRUE(two.pinned_registers);
  EXPECT_EQ(plan_bwd_realigned_slots(4096, 1025, false, f).items, 2);
  f.bwd_realign_slot_items = 4;
  const LaunchConfig four = plan_bwd_realigned_slots(4096, 4095, false, f);
  EXPECT_EQ(four.threads_per_row, 128);
  EXPECT_EQ(four.items, 4);
  EXPECT_FALSE(four.pinned_registers) << "only the kernel of 2 is pinned";
  EXPECT_EQ(four.rows_per_block, 4);
  EXPECT_EQ(plan_bwd_realigned_slots(4096, 1001, false, f).items, 2) << "one warp at 4";
  for (int64_t hidden : {513, 1025, 2049, 8191, 16383}) {
    expect_slots_cover_the_row(plan_bwd_realigned_slots(4096, hidden, false, f), hidden);
  }
}

// By default (the rule), the plan of 2 vectors per thread stays where it is pinned at several
// rows per CTA, or at one row per CTA from kBwdRealignPinnedOneRowMinRows rows; elsewhere, past
// a warp, 4.
TEST(LaunchConfig, BackwardRealignedSlotsTakeFourVectorsWhereTheRuleSays) {
  using normkit::cuda::plan_bwd_realigned_slots;
  const KernelFacts f;
  ASSERT_EQ(f.bwd_realign_slot_items, 0);
  struct Case {
    int64_t rows, hidden;
    int items;  // 2: the plan of 2; 3 or 4: the plan of 4 (3 where fewer cover the row)
    bool pinned;
  };
  for (const Case k : {Case{4096, 4095, 2, true}, Case{8192, 2049, 2, true},
                       Case{4096, 1537, 2, true}, Case{8192, 8191, 2, true},
                       Case{16384, 7167, 2, true}, Case{4096, 1001, 2, false},
                       Case{4096, 1025, 3, false}, Case{16384, 1025, 3, false},
                       Case{1024, 8191, 4, false}, Case{1024, 4095, 4, false},
                       Case{2048, 8191, 4, false}, Case{4096, 4097, 4, false},
                       Case{8191, 7167, 4, false}}) {
    const LaunchConfig c = plan_bwd_realigned_slots(k.rows, k.hidden, false, f);
    SCOPED_TRACE(std::to_string(k.rows) + "x" + std::to_string(k.hidden) + ": " + c.describe());
    ASSERT_GT(c.grid, 0);
    EXPECT_EQ(c.items, k.items);
    EXPECT_EQ(c.pinned_registers, k.pinned);
  }
}

TEST(LaunchConfig, PipelinesTheBackwardOfAlignedRowsThatFitSharedMemory) {
  KernelFacts f;
  const LaunchConfig c = normkit::cuda::plan_bwd(16384, 4096, 8, f, 4);
  EXPECT_EQ(c.plan, RowPlan::kPipelined) << c.describe();
  // (At most bwd_pipelined_ctas_per_sm CTAs per SM; the launcher caps that to the resident.)
  EXPECT_LE(c.grid, f.bwd_pipelined_ctas_per_sm * f.sm_count);
  // Odd hidden sizes are not.
  EXPECT_NE(normkit::cuda::plan_bwd(16384, 4095, 8, f, 4).plan, RowPlan::kPipelined);
  // 64K columns of 8 bytes (3 stages of 512 KB) do not fit one CTA: split over a cluster.
  EXPECT_GT(normkit::cuda::plan_bwd(256, 65536, 4, f, 8).cluster_size, 1);
  EXPECT_NE(normkit::cuda::plan_bwd(16384, 4096, 8, f, 0).plan, RowPlan::kPipelined);
}

// The pipelined backward aims for KernelFacts::bwd_pipelined_ctas_per_sm CTAs per SM, each a
// slot, which the workspace holds; 0 takes bwd_ctas_per_sm, as the other plans do.
TEST(LaunchConfig, PipelinedBackwardAimsForItsOwnCtasPerSm) {
  KernelFacts f;
  ASSERT_EQ(f.bwd_pipelined_ctas_per_sm, 3);
  const LaunchConfig c = normkit::cuda::plan_bwd(8192, 2304, 8, f, 4);
  ASSERT_EQ(c.plan, RowPlan::kPipelined) << c.describe();
  EXPECT_EQ(c.threads_per_row * c.rows_per_block, 160) << c.describe();
  EXPECT_EQ(c.grid, 3 * f.sm_count) << c.describe();
  EXPECT_EQ(c.slots, c.grid);
  EXPECT_EQ(normkit::cuda::bwd_workspace_slots(8192, f), 3 * f.sm_count);
  EXPECT_EQ(normkit::cuda::bwd_workspace_bytes(8192, 2304, f, true, false),
            int64_t(3) * f.sm_count * 2304 * int64_t(sizeof(float)));
  // Few rows: a slot per row group at most.
  EXPECT_EQ(normkit::cuda::plan_bwd(300, 2304, 8, f, 4).grid, 300);
  f.bwd_pipelined_ctas_per_sm = 0;
  EXPECT_EQ(normkit::cuda::plan_bwd(8192, 2304, 8, f, 4).grid, 2 * f.sm_count);
  EXPECT_EQ(normkit::cuda::bwd_workspace_slots(8192, f), 2 * f.sm_count);
}

// KernelFacts::bwd_sub_warp_rows: rows of fewer than 64 vectors take a power of two threads
// under a warp, several rows per warp: at 1 (the default) rows of under 32 vectors (idle lanes
// in a warp per row) with rows for 256-thread CTAs on a third of the SMs (2048 x 128, not
// 1024 x 128) and rows of 32-63 vectors with 3 rows per row group of 2 such CTAs per SM (65536
// and 16384 x 256, not 8192 x 256), at 2 wherever the rows fill one such CTA; a warp per row
// otherwise, and at 0.
TEST(LaunchConfig, PipelinedBackwardPutsSeveralShortRowsInAWarpWhereAsked) {
  KernelFacts f;
  ASSERT_EQ(f.bwd_sub_warp_rows, 1);
  EXPECT_EQ(normkit::cuda::plan_bwd(131072, 128, 8, f, 4).threads_per_row, 8);
  f.bwd_sub_warp_rows = 0;
  EXPECT_EQ(normkit::cuda::plan_bwd(131072, 128, 8, f, 4).threads_per_row, 32);
  struct Case {
    int setting;
    int64_t rows, hidden;
    int threads, items;
  };
  for (const Case& k : {Case{2, 131072, 128, 8, 2}, Case{2, 65536, 256, 16, 2},
                        Case{2, 262144, 64, 4, 2}, Case{2, 1000, 200, 16, 2},
                        Case{2, 999, 72, 8, 2}, Case{2, 2048, 128, 8, 2},
                        Case{2, 16384, 512, 32, 2}, Case{1, 131072, 128, 8, 2},
                        Case{1, 262144, 64, 4, 2}, Case{1, 65536, 256, 16, 2},
                        Case{1, 16384, 256, 16, 2}, Case{1, 8192, 256, 32, 1},
                        Case{1, 2048, 128, 8, 2}, Case{1, 1024, 128, 32, 1},
                        Case{1, 4096, 64, 4, 2}, Case{1, 2048, 64, 32, 1},
                        Case{1, 9000, 72, 8, 2}}) {
    f.bwd_sub_warp_rows = k.setting;
    const LaunchConfig c = normkit::cuda::plan_bwd(k.rows, k.hidden, 8, f, 4);
    SCOPED_TRACE(std::to_string(k.rows) + "x" + std::to_string(k.hidden) + " setting " +
                 std::to_string(k.setting) + ": " + c.describe());
    EXPECT_EQ(c.plan, RowPlan::kPipelined);
    EXPECT_EQ(c.threads_per_row, k.threads);
    EXPECT_EQ(c.items, k.items);
    EXPECT_EQ(c.threads_per_row * c.rows_per_block, 256);
    expect_covers(c, k.rows, k.hidden, normkit::cuda::kPipelineItems, true, f);
  }
  // Too few rows to fill 256 threads of 8-thread rows: a warp per row.
  f.bwd_sub_warp_rows = 2;
  EXPECT_EQ(normkit::cuda::plan_bwd(20, 128, 8, f, 4).threads_per_row, 32);
}

// KernelFacts::fwd_rows_per_group: EXACT plans of 16-byte vectors whose rows have at most
// fwd_rows_per_group_max_threads threads (256; whole warps past one) take 2 rows per row group
// (the default) on half the CTAs, where the rows divide into such CTAs and fill 2 per SM; every
// other plan keeps one row per group, as every plan does at 1.
// (fwd_short_row_items 0 here: rows of 4 vectors per thread.)
TEST(LaunchConfig, ForwardShortRowsTakeTwoRowsPerGroupWhereAsked) {
  KernelFacts f;
  ASSERT_EQ(f.fwd_rows_per_group, 2);
  f.fwd_short_row_items = 0;
  f.fwd_rows_per_group = 1;
  EXPECT_EQ(normkit::cuda::plan_fwd(131072, 128, 8, f).rows_per_group, 1);
  f.fwd_rows_per_group = 2;
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{131072, 128}, {65536, 256},
                                     {262144, 64}, {32768, 1024}}) {
    KernelFacts one = f;
    one.fwd_rows_per_group = 1;
    const LaunchConfig before = normkit::cuda::plan_fwd(rows, hidden, 8, one);
    const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, 8, f);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
    EXPECT_EQ(c.rows_per_group, 2);
    EXPECT_EQ(c.grid * 2, before.grid);
    EXPECT_EQ(c.threads_per_row, before.threads_per_row);
    EXPECT_EQ(c.rows_per_block, before.rows_per_block);
    EXPECT_NE(c.describe().find("rows/group=2"), std::string::npos);
    expect_covers(c, rows, hidden, normkit::cuda::fwd_items_max(8), false, f);
  }
  // 4 rows per group at up to 2 vectors per thread (KernelFacts::fwd_short_row_items, rows of
  // up to kFwdShortRowVectors); at more vectors per thread 2 rows instead.
  f.fwd_rows_per_group = 4;
  EXPECT_EQ(normkit::cuda::plan_fwd(131072, 128, 8, f).rows_per_group, 2);
  f.fwd_short_row_items = 2;
  EXPECT_EQ(normkit::cuda::plan_fwd(131072, 128, 8, f).items, 2);
  EXPECT_EQ(normkit::cuda::plan_fwd(131072, 128, 8, f).rows_per_group, 4);
  f.fwd_short_row_items = 1;
  for (const auto& [rows, hidden, threads] :
       {std::tuple<int64_t, int64_t, int>{131072, 128, 16}, {67584, 64, 8}}) {
    const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, 8, f);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
    EXPECT_EQ(c.items, 1);
    EXPECT_EQ(c.threads_per_row, threads);
    EXPECT_EQ(c.rows_per_group, 4);
    expect_covers(c, rows, hidden, normkit::cuda::fwd_items_max(8), false, f);
  }
  // Rows past kFwdShortRowVectors keep fwd_items_target (65536 x 256: 32 vectors), and so 2
  // rows per group.
  EXPECT_EQ(normkit::cuda::plan_fwd(65536, 256, 8, f).items, 4);
  EXPECT_EQ(normkit::cuda::plan_fwd(65536, 256, 8, f).rows_per_group, 2);
  f.fwd_short_row_items = 0;
  f.fwd_rows_per_group = 2;
  // Rows of up to fwd_rows_per_group_max_threads threads (256 by default) that are whole warps
  // take two rows per group; wider rows (4096 x 12288: 384 threads) keep one, unless the bound
  // is raised; lowered to a warp, rows of 64 threads keep one.
  ASSERT_EQ(f.fwd_rows_per_group_max_threads, 256);
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{8192, 2048}, {4096, 4096},
                                     {8192, 4096}, {16384, 1536}, {4096, 6144}}) {
    const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, 8, f);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
    EXPECT_GT(c.threads_per_row, 32);
    EXPECT_EQ(c.threads_per_row % 32, 0);
    EXPECT_EQ(c.rows_per_group, 2);
    expect_covers(c, rows, hidden, normkit::cuda::fwd_items_max(8), false, f);
  }
  EXPECT_EQ(normkit::cuda::plan_fwd(4096, 12288, 8, f).rows_per_group, 1);
  {
    KernelFacts wide = f;
    wide.fwd_rows_per_group_max_threads = 512;
    const LaunchConfig c = normkit::cuda::plan_fwd(4096, 12288, 8, wide);
    SCOPED_TRACE(c.describe());
    EXPECT_EQ(c.threads_per_row, 384);
    EXPECT_EQ(c.rows_per_group, 2);
    expect_covers(c, 4096, 12288, normkit::cuda::fwd_items_max(8), false, wide);
    KernelFacts warp = f;
    warp.fwd_rows_per_group_max_threads = 32;
    EXPECT_EQ(normkit::cuda::plan_fwd(8192, 2048, 8, warp).rows_per_group, 1);
  }
  // Too few rows for 2 CTAs per SM (2048 x 128), rows that do not divide into whole CTAs
  // (131071 x 128), rows wider than 256 threads (4096 x 16384), 4-element vectors (float32
  // x), and misaligned rows (not EXACT): one row per group.
  for (const auto& [rows, hidden, vec] :
       {std::tuple<int64_t, int64_t, int>{2048, 128, 8}, {131071, 128, 8}, {4096, 16384, 8},
        {131072, 128, 4}, {131072, 130, 2}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + " vec " + std::to_string(vec));
    EXPECT_EQ(normkit::cuda::plan_fwd(rows, hidden, vec, f).rows_per_group, 1);
  }
}

// KernelFacts::fwd_tiny_registers: EXACT plans of 8-element vectors at up to 2 vectors per
// thread name the register bound of their kernels (40 at 1, 32 at 2); other plans none.
TEST(LaunchConfig, ForwardOfTwoVectorsPerThreadNamesItsRegisterBoundWhereAsked) {
  KernelFacts f;
  ASSERT_EQ(f.fwd_tiny_registers, 0);
  f.fwd_rows_per_group = 1;  // (the bound is for one row per group)
  f.fwd_items_target = 2;
  EXPECT_EQ(normkit::cuda::plan_fwd(131072, 128, 8, f).register_bound, 0);
  for (const auto& [setting, bound] : {std::pair{1, 40}, {2, 32}}) {
    f.fwd_tiny_registers = setting;
    for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{131072, 128}, {65536, 256},
                                       {16384, 512}}) {
      const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, 8, f);
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
      EXPECT_EQ(c.items, 2);
      EXPECT_TRUE(c.exact);
      EXPECT_EQ(c.register_bound, bound);
      EXPECT_NE(c.describe().find("registers<=" + std::to_string(bound)), std::string::npos);
    }
    // 4-element vectors, and misaligned rows (not EXACT): no bound.
    EXPECT_EQ(normkit::cuda::plan_fwd(131072, 128, 4, f).register_bound, 0);
    EXPECT_EQ(normkit::cuda::plan_fwd(4096, 130, 2, f).register_bound, 0);
  }
  // Plans of more vectors per thread: none.
  f.fwd_items_target = 4;
  f.fwd_short_row_items = 0;
  EXPECT_EQ(normkit::cuda::plan_fwd(131072, 128, 8, f).register_bound, 0);
}

// KernelFacts::fwd_weight_first: EXACT registers plans of one row per CTA (and per group) of
// up to kFwdWeightFirstMaxThreads, without clusters, on at most that many CTAs per SM (4 by
// default) load the weight with x; plans of several rows per CTA, larger CTAs, more CTAs,
// misaligned or split rows, and the pipelined plans of few rows do not, nor does any plan at 0.
TEST(LaunchConfig, ForwardLoadsTheWeightWithXOnFewCtas) {
  KernelFacts f;
  ASSERT_EQ(f.fwd_weight_first, 4);
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{512, 4096}, {300, 8192},
                                     {520, 2048}}) {
    const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, 8, f, 2);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
    EXPECT_EQ(c.plan, RowPlan::kRegisters);
    EXPECT_TRUE(c.exact);
    EXPECT_EQ(c.rows_per_block, 1);
    EXPECT_LE(c.grid, 4 * f.sm_count);
    EXPECT_TRUE(c.weight_first);
    EXPECT_NE(c.describe().find("weight-with-x"), std::string::npos);
  }
  // Several rows per CTA (4096 x 1024: 8), more CTAs, misaligned rows (not EXACT), rows split
  // over a cluster, the pipelined plans of few rows: no.
  const LaunchConfig several = normkit::cuda::plan_fwd(4096, 1024, 8, f, 2);
  EXPECT_GT(several.rows_per_block, 1);
  EXPECT_FALSE(several.weight_first);
  EXPECT_FALSE(normkit::cuda::plan_fwd(4096, 4096, 8, f, 2).weight_first);
  EXPECT_FALSE(normkit::cuda::plan_fwd(512, 4095, 1, f, 2).weight_first);
  const LaunchConfig split = normkit::cuda::plan_fwd(512, 65536, 8, f, 2);
  EXPECT_GT(split.cluster_size, 1);
  EXPECT_FALSE(split.weight_first);
  const LaunchConfig pipelined = normkit::cuda::plan_fwd(128, 4096, 8, f, 2);
  EXPECT_EQ(pipelined.plan, RowPlan::kPipelined);
  EXPECT_FALSE(pipelined.weight_first);
  // CTAs of more than kFwdWeightFirstMaxThreads (its kernel's bound): no.
  const LaunchConfig wide = normkit::cuda::plan_fwd(512, 16384, 8, f, 2);
  EXPECT_GT(wide.threads_per_row, normkit::cuda::kFwdWeightFirstMaxThreads);
  EXPECT_FALSE(wide.weight_first);
  // Those rows on the registers kernel take it; at 0, nothing does.
  f.fwd_pipeline_max_rows = 0;
  EXPECT_TRUE(normkit::cuda::plan_fwd(128, 4096, 8, f, 2).weight_first);
  EXPECT_TRUE(normkit::cuda::plan_fwd(1, 4096, 8, f, 2).weight_first);
  f.fwd_weight_first = 0;
  EXPECT_FALSE(normkit::cuda::plan_fwd(512, 4096, 8, f, 2).weight_first);
  EXPECT_FALSE(normkit::cuda::plan_fwd(128, 4096, 8, f, 2).weight_first);
}

// KernelFacts::fwd_lean: of the lean calls (16-bit types, a plain weight, no bias, no
// residual), the plans that load the weight with x, and only those, are marked for
// rms_norm_fwd_lean; other calls' plans never are, nor any plan at 0.
TEST(LaunchConfig, ForwardMarksTheWeightWithXPlansOfLeanCallsLean) {
  KernelFacts f;
  ASSERT_EQ(f.fwd_lean, 1);
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{512, 4096}, {300, 8192},
                                     {4096, 1024}, {4096, 4096}, {1024, 4096}, {512, 16384}}) {
    const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, 8, f, 2, true);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
    EXPECT_EQ(c.lean, c.weight_first);
    EXPECT_EQ(c.describe().find("lean") != std::string::npos, c.lean);
    EXPECT_FALSE(normkit::cuda::plan_fwd(rows, hidden, 8, f, 2, false).lean);
  }
  EXPECT_TRUE(normkit::cuda::plan_fwd(512, 4096, 8, f, 2, true).lean);
  f.fwd_lean = 0;
  EXPECT_FALSE(normkit::cuda::plan_fwd(512, 4096, 8, f, 2, true).lean);
}

// KernelFacts::fwd_lean_pipeline_max_rows: the lean calls of few rows take the lean plan where
// there is one (0 rows pipelined by default), the other calls the pipelined plan up to
// fwd_pipeline_max_rows; few rows that no lean plan takes (CTAs of more than
// kFwdWeightFirstMaxThreads) keep the other calls' plan.
TEST(LaunchConfig, ForwardLeanCallsOfFewRowsTakeTheLeanPlan) {
  KernelFacts f;
  ASSERT_EQ(f.fwd_lean_pipeline_max_rows, 0);
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{1, 4096}, {128, 4096},
                                     {256, 4096}, {1, 8192}, {132, 2048}, {264, 1024}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden));
    ASSERT_LE(rows, f.fwd_pipeline_max_rows);
    const LaunchConfig lean = normkit::cuda::plan_fwd(rows, hidden, 8, f, 2, true);
    EXPECT_EQ(lean.plan, RowPlan::kRegisters) << lean.describe();
    EXPECT_TRUE(lean.lean) << lean.describe();
    EXPECT_EQ(lean.grid, rows);
    const LaunchConfig other = normkit::cuda::plan_fwd(rows, hidden, 8, f, 2, false);
    EXPECT_EQ(other.plan, RowPlan::kPipelined) << other.describe();
  }
  for (const int64_t hidden : {12288, 16384}) {
    const LaunchConfig wide = normkit::cuda::plan_fwd(128, hidden, 8, f, 2, true);
    EXPECT_FALSE(wide.lean);
    EXPECT_EQ(wide.describe(), normkit::cuda::plan_fwd(128, hidden, 8, f, 2, false).describe());
  }
  // Up to the setting, the lean calls stay pipelined too; at fwd_lean 0, all do.
  f.fwd_lean_pipeline_max_rows = 128;
  EXPECT_EQ(normkit::cuda::plan_fwd(128, 4096, 8, f, 2, true).plan, RowPlan::kPipelined);
  EXPECT_TRUE(normkit::cuda::plan_fwd(129, 4096, 8, f, 2, true).lean);
  f.fwd_lean_pipeline_max_rows = 0;
  f.fwd_lean = 0;
  EXPECT_EQ(normkit::cuda::plan_fwd(128, 4096, 8, f, 2, true).plan, RowPlan::kPipelined);
}

// KernelFacts::fwd_lean_waves: a lean call's registers plan of several rows per CTA (whole warps
// per row) becomes one row per CTA on the lean kernel where the rows fill one wave of those CTAs
// (32 per SM up to 32 threads, 1024 threads per SM past that); more rows, rows of under a warp,
// other calls and setting 0 keep their plan.
TEST(LaunchConfig, ForwardLeanCallsOfOneWaveTakeOneRowPerCta) {
  KernelFacts f;
  ASSERT_EQ(f.fwd_lean_waves, 1);
  struct Case {
    int64_t rows, hidden;
    int threads;
    int64_t past;  // the next whole CTA of rows (of the other calls' plan) past one wave
  };
  for (const Case& k : {Case{1024, 1024, 32, 4232}, Case{4224, 1024, 32, 4232},
                        Case{2048, 2048, 64, 2116}, Case{1056, 4096, 128, 1058}}) {
    SCOPED_TRACE(std::to_string(k.rows) + "x" + std::to_string(k.hidden));
    const LaunchConfig c = normkit::cuda::plan_fwd(k.rows, k.hidden, 8, f, 2, true);
    EXPECT_EQ(c.threads_per_row, k.threads) << c.describe();
    EXPECT_EQ(c.rows_per_block, 1) << c.describe();
    EXPECT_EQ(c.rows_per_group, 1);
    EXPECT_EQ(c.grid, k.rows);
    EXPECT_TRUE(c.exact);
    EXPECT_TRUE(c.weight_first);
    EXPECT_TRUE(c.lean);
    const LaunchConfig other = normkit::cuda::plan_fwd(k.rows, k.hidden, 8, f, 2, false);
    EXPECT_GT(other.rows_per_block, 1) << other.describe();
    EXPECT_FALSE(other.lean);
    // Past one wave, or at 0: the plan of the other calls.
    const LaunchConfig past = normkit::cuda::plan_fwd(k.past, k.hidden, 8, f, 2, true);
    EXPECT_FALSE(past.lean) << past.describe();
    EXPECT_TRUE(past.exact) << past.describe();
    EXPECT_EQ(past.describe(),
              normkit::cuda::plan_fwd(k.past, k.hidden, 8, f, 2, false).describe());
    KernelFacts off = f;
    off.fwd_lean_waves = 0;
    EXPECT_EQ(normkit::cuda::plan_fwd(k.rows, k.hidden, 8, off, 2, true).describe(),
              other.describe());
  }
  // Rows of under a warp (4096 x 512: 16 threads) keep several rows per CTA.
  const LaunchConfig narrow = normkit::cuda::plan_fwd(4096, 512, 8, f, 2, true);
  EXPECT_GT(narrow.rows_per_block, 1) << narrow.describe();
  EXPECT_FALSE(narrow.lean);
  // Two waves at setting 2.
  f.fwd_lean_waves = 2;
  EXPECT_TRUE(normkit::cuda::plan_fwd(2112, 4096, 8, f, 2, true).lean);
}

// KernelFacts::fwd_whole_warps: one-row CTAs of a power of two threads that leave vectors of
// the row empty become the whole warps that cover it exactly (EXACT kernels), at the most
// vectors per thread from kSmallItems down to 3 (setting 1, the default) or the fewest from 2
// (setting 2); rows no such shape covers keep their plan, as every row does at 0.
TEST(LaunchConfig, ForwardRowsOfWholeWarpsWhereAPowerOfTwoLeavesVectorsEmpty) {
  KernelFacts f;
  ASSERT_EQ(f.fwd_whole_warps, 1);
  KernelFacts off;
  off.fwd_whole_warps = 0;
  const LaunchConfig before = normkit::cuda::plan_fwd(8192, 5120, 8, off);
  EXPECT_EQ(before.threads_per_row, 256) << before.describe();
  EXPECT_EQ(before.items, 3) << before.describe();
  EXPECT_FALSE(before.exact);
  struct Case {
    int64_t rows, hidden;
    int setting, threads, items, rows_per_block;
  };
  for (const Case& k : {Case{8192, 5120, 1, 160, 4, 1}, Case{4096, 5376, 1, 224, 3, 1},
                        Case{8192, 2304, 1, 96, 3, 2},
                        Case{16384, 7168, 1, 224, 4, 1}, Case{8192, 5120, 2, 320, 2, 1},
                        Case{8192, 2560, 2, 160, 2, 1}, Case{8192, 3584, 2, 224, 2, 1}}) {
    f.fwd_whole_warps = k.setting;
    const LaunchConfig c = normkit::cuda::plan_fwd(k.rows, k.hidden, 8, f);
    SCOPED_TRACE(std::to_string(k.rows) + "x" + std::to_string(k.hidden) + " setting " +
                 std::to_string(k.setting) + ": " + c.describe());
    EXPECT_EQ(c.plan, RowPlan::kRegisters);
    EXPECT_EQ(c.threads_per_row, k.threads);
    EXPECT_EQ(c.items, k.items);
    EXPECT_EQ(c.rows_per_block, k.rows_per_block);
    EXPECT_EQ(c.grid * c.rows_per_group, k.rows / k.rows_per_block);
    EXPECT_TRUE(c.exact);
  }
  // At setting 1: 2560 and 3584 columns (320, 448 vectors) have no whole-warp cover at 3-4
  // vectors, 1152 and 896 none at 2-4; 4096 and 6144 were exact already. 8191 rows of 2304
  // would leave a block of 2 rows short (not EXACT), and 4097 rows of 1024 columns (covered by
  // 32 x 4, only the row count inexact) are no reshape's business.
  f.fwd_whole_warps = 1;
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{8191, 2304}, {4097, 1024}}) {
    const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, 8, f);
    const LaunchConfig d = normkit::cuda::plan_fwd(rows, hidden, 8, off);
    EXPECT_EQ(c.describe(), d.describe());
  }
  for (int64_t hidden : {2560, 3584, 1152, 896, 4096, 6144}) {
    const LaunchConfig c = normkit::cuda::plan_fwd(16384, hidden, 8, f);
    const LaunchConfig d = normkit::cuda::plan_fwd(16384, hidden, 8, off);
    EXPECT_EQ(c.threads_per_row, d.threads_per_row) << hidden;
    EXPECT_EQ(c.items, d.items) << hidden;
    EXPECT_EQ(c.exact, d.exact) << hidden;
  }
}

TEST(LaunchConfig, WideForwardRowsTakeUpToTheirMaxClusterOf256ThreadCtas) {
  KernelFacts f;
  f.fwd_wide_row_large_items = 1;  // the wide-row rule's CTAs as it makes them
  f.fwd_wide_row_max_cluster = 8;  // the former plans: clusters of 512-thread CTAs
  const LaunchConfig before = normkit::cuda::plan_fwd(1024, 131072, 8, f, 2);
  EXPECT_EQ(before.cluster_size, 8) << before.describe();
  EXPECT_EQ(before.threads_per_row, 512);
  f.fwd_wide_row_max_cluster = 16;
  const LaunchConfig wide = normkit::cuda::plan_fwd(1024, 131072, 8, f, 2);
  EXPECT_EQ(wide.plan, RowPlan::kCluster) << wide.describe();
  EXPECT_EQ(wide.cluster_size, 16) << wide.describe();
  EXPECT_EQ(wide.threads_per_row * wide.items * wide.vec * wide.cluster_size, 131072);
  EXPECT_TRUE(wide.exact);
  // As many CTAs as the row needs: 100000 columns, 12500 vectors, on 13.
  EXPECT_EQ(normkit::cuda::plan_fwd(1024, 100000, 8, f, 2).cluster_size, 13);
  // Rows that 8 such CTAs hold, and rows past 16 of them, keep their plans (the latter as
  // fwd_wide_row_large_items says: WidestForwardRowsMayTakeHalfTheThreadsAtTwiceTheItems).
  const LaunchConfig narrow = normkit::cuda::plan_fwd(256, 65536, 8, f, 2);
  EXPECT_EQ(narrow.cluster_size, 8);
  EXPECT_EQ(narrow.threads_per_row, 256);
  f.fwd_wide_row_large_items = 0;
  const LaunchConfig widest = normkit::cuda::plan_fwd(512, 262144, 8, f, 2);
  EXPECT_EQ(widest.cluster_size, 16);
  EXPECT_EQ(widest.threads_per_row, 512);
}

TEST(LaunchConfig, WidestForwardRowsMayTakeHalfTheThreadsAtTwiceTheItems) {
  KernelFacts f;
  f.fwd_wide_row_large_items = 0;  // the former plans: 512 threads x 4 vectors
  const LaunchConfig before = normkit::cuda::plan_fwd(512, 262144, 8, f, 2);
  ASSERT_EQ(before.cluster_size, 16) << before.describe();
  EXPECT_EQ(before.threads_per_row, 512);
  f.fwd_wide_row_large_items = 1;
  const LaunchConfig c = normkit::cuda::plan_fwd(512, 262144, 8, f, 2);
  EXPECT_EQ(c.cluster_size, 16) << c.describe();
  EXPECT_EQ(c.threads_per_row, before.threads_per_row / 2);
  EXPECT_EQ(c.items, 2 * before.items);
  EXPECT_EQ(c.cols_per_cta, before.cols_per_cta);
  EXPECT_TRUE(c.exact);
  // Clusters within fwd_max_cluster, or at the wide-row rule's 256 threads, keep their plans;
  // with 2 the latter take the large budget too where the launch has more than 3.5 CTAs for
  // every SM, with 3 everywhere.
  for (const auto& [rows, hidden] :
       {std::pair<int64_t, int64_t>{1024, 131072}, {256, 65536}, {1024, 32768}}) {
    KernelFacts plain;
    plain.fwd_wide_row_large_items = 0;
    const LaunchConfig small = normkit::cuda::plan_fwd(rows, hidden, 8, plain, 2);
    EXPECT_EQ(normkit::cuda::plan_fwd(rows, hidden, 8, f, 2).describe(), small.describe());
    KernelFacts every = f;
    every.fwd_wide_row_large_items = 2;
    const LaunchConfig large = normkit::cuda::plan_fwd(rows, hidden, 8, every, 2);
    if (hidden > 32768) {
      EXPECT_EQ(large.threads_per_row, small.threads_per_row / 2) << large.describe();
      EXPECT_EQ(large.items, 2 * small.items);
      EXPECT_EQ(large.cluster_size, small.cluster_size);
      EXPECT_EQ(large.exact, small.exact);
    } else {
      EXPECT_EQ(large.describe(), small.describe());  // one CTA per row: not a cluster
    }
  }
  KernelFacts fill = f, every = f;
  fill.fwd_wide_row_large_items = 2;
  every.fwd_wide_row_large_items = 3;
  const LaunchConfig one_row = normkit::cuda::plan_fwd(1, 131072, 8, f, 2);
  ASSERT_EQ(one_row.grid, 16) << one_row.describe();
  EXPECT_EQ(normkit::cuda::plan_fwd(1, 131072, 8, fill, 2).describe(), one_row.describe());
  const LaunchConfig one_row_large = normkit::cuda::plan_fwd(1, 131072, 8, every, 2);
  EXPECT_EQ(one_row_large.threads_per_row, one_row.threads_per_row / 2);
  EXPECT_EQ(one_row_large.items, 2 * one_row.items);
  // 32 rows of 16 CTAs: 512, more than 3.5 CTAs for every SM; 28 rows: 448.
  const LaunchConfig filled = normkit::cuda::plan_fwd(32, 131072, 8, fill, 2);
  EXPECT_EQ(filled.threads_per_row, one_row.threads_per_row / 2) << filled.describe();
  EXPECT_EQ(normkit::cuda::plan_fwd(28, 131072, 8, fill, 2).threads_per_row,
            one_row.threads_per_row);
  EXPECT_EQ(KernelFacts{}.fwd_wide_row_large_items, 2);
}

TEST(LaunchConfig, BackwardCtaThreadsFillLargerCtasWithRowGroups) {
  KernelFacts f;
  f.bwd_mid_row_cta_threads = 256;  // (rows of 64 threads: below)
  const LaunchConfig narrow = normkit::cuda::plan_bwd(4096, 1024, 8, f, 4);
  ASSERT_EQ(narrow.plan, RowPlan::kPipelined) << narrow.describe();
  EXPECT_EQ(narrow.threads_per_row * narrow.rows_per_block, 256) << narrow.describe();
  f.bwd_cta_threads = 512;
  const LaunchConfig wide = normkit::cuda::plan_bwd(4096, 1024, 8, f, 4);
  ASSERT_EQ(wide.plan, RowPlan::kPipelined) << wide.describe();
  EXPECT_EQ(wide.threads_per_row * wide.rows_per_block, 512) << wide.describe();
  EXPECT_EQ(wide.smem_bytes, 2 * narrow.smem_bytes);
  // Few rows keep a CTA per SM rather than filling larger CTAs.
  const LaunchConfig few = normkit::cuda::plan_bwd(128, 4096, 8, f, 4);
  EXPECT_EQ(few.rows_per_block, 1) << few.describe();
  EXPECT_EQ(few.grid, 128);
  // Rows of 512 threads are one group either way.
  EXPECT_EQ(normkit::cuda::plan_bwd(8192, 8192, 8, f, 4).rows_per_block, 1);
}

// KernelFacts::bwd_lean: the unsplit pipelined plans of 1-2 whole 16-byte vectors per thread
// that cover the row exactly go to rms_norm_bwd_lean unless the knob is off; split rows, rows of
// more vectors and rows the threads do not cover exactly keep the pipelined kernel.
TEST(LaunchConfig, BackwardLeanPlansAreExactUnsplitPipelinedRows) {
  KernelFacts on;
  ASSERT_EQ(on.bwd_lean, 1);  // the default since the thirty-ninth session
  KernelFacts off;
  off.bwd_lean = 0;
  const int64_t bf16_x_dy = 4;
  for (const auto& [rows, hidden] :
       {std::pair<int64_t, int64_t>{4096, 1024}, {8192, 2048}, {4096, 4096}, {32768, 128}}) {
    const LaunchConfig c = normkit::cuda::plan_bwd(rows, hidden, 8, on, bf16_x_dy);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
    ASSERT_EQ(c.plan, RowPlan::kPipelined);
    EXPECT_TRUE(normkit::cuda::bwd_lean_plan(c, hidden, on));
    EXPECT_FALSE(normkit::cuda::bwd_lean_plan(c, hidden, off));
    EXPECT_EQ(int64_t(c.threads_per_row) * c.items * 8, hidden);
  }
  // Not covered exactly (896 columns: 112 vectors over 64 threads), split over a cluster, or of
  // more than 2 vectors per thread.
  const LaunchConfig ragged = normkit::cuda::plan_bwd(16384, 896, 8, on, bf16_x_dy);
  EXPECT_FALSE(normkit::cuda::bwd_lean_plan(ragged, 896, on)) << ragged.describe();
  const LaunchConfig split = normkit::cuda::plan_bwd(256, 65536, 8, on, bf16_x_dy);
  ASSERT_GT(split.cluster_size, 1) << split.describe();
  EXPECT_FALSE(normkit::cuda::bwd_lean_plan(split, 65536, on));
  LaunchConfig three = normkit::cuda::plan_bwd(4096, 1024, 8, on, bf16_x_dy);
  three.items = 3;
  EXPECT_FALSE(normkit::cuda::bwd_lean_plan(three, 1024, on));
  // Narrower vectors (float32 x: 4 elements) never.
  const LaunchConfig fp32 = normkit::cuda::plan_bwd(4096, 1024, 4, on, 8);
  EXPECT_FALSE(normkit::cuda::bwd_lean_plan(fp32, 1024, on)) << fp32.describe();
}

// KernelFacts::bwd_lean_one_item_threads: lean rows of 2048 16-bit columns (one CTA of 256
// threads at one vector each) are planned again at one vector per thread, as plan_bwd_rows
// (backend.cu) does; other widths, plans not lean and NK_TUNE_BWD_ITEMS keep theirs.
TEST(LaunchConfig, BackwardLeanRowsOf256VectorsTakeOneVectorPerThread) {
  KernelFacts f;
  ASSERT_EQ(f.bwd_lean_one_item_threads, 256);
  const int64_t bf16_x_dy = 4;
  auto lean_plan = [&](int64_t rows, int64_t hidden, const KernelFacts& facts) {
    LaunchConfig c = normkit::cuda::plan_bwd(rows, hidden, 8, facts, bf16_x_dy);
    c.lean = normkit::cuda::bwd_lean_plan(c, hidden, facts);
    return c;
  };
  for (const int64_t rows : {1024, 8192, 32768}) {
    const LaunchConfig two = lean_plan(rows, 2048, f);
    SCOPED_TRACE(std::to_string(rows) + "x2048: " + two.describe());
    ASSERT_TRUE(two.lean);
    EXPECT_EQ(two.items, 2);
    ASSERT_TRUE(normkit::cuda::bwd_lean_one_item(two, 2048, f));
    KernelFacts one_item = f;
    one_item.bwd_items_target = 1;
    const LaunchConfig one = normkit::cuda::plan_bwd(rows, 2048, 8, one_item, bf16_x_dy);
    EXPECT_TRUE(normkit::cuda::bwd_lean_plan(one, 2048, f)) << one.describe();
    EXPECT_EQ(one.items, 1);
    EXPECT_EQ(one.threads_per_row, 256);
    EXPECT_EQ(one.rows_per_block, 1);
  }
  for (const int64_t hidden : {1024, 1536, 2560, 3072, 4096}) {
    const LaunchConfig c = lean_plan(8192, hidden, f);
    EXPECT_FALSE(normkit::cuda::bwd_lean_one_item(c, hidden, f)) << hidden << ": " << c.describe();
  }
  LaunchConfig not_lean = lean_plan(8192, 2048, f);
  not_lean.lean = false;
  EXPECT_FALSE(normkit::cuda::bwd_lean_one_item(not_lean, 2048, f));
  KernelFacts items_pinned = f;
  items_pinned.bwd_items_target = 2;
  EXPECT_FALSE(normkit::cuda::bwd_lean_one_item(lean_plan(8192, 2048, items_pinned), 2048,
                                                items_pinned));
  KernelFacts never = f;
  never.bwd_lean_one_item_threads = 0;
  EXPECT_FALSE(normkit::cuda::bwd_lean_one_item(lean_plan(8192, 2048, never), 2048, never));
}

// KernelFacts::bwd_mid_row_cta_threads: rows of 33-127 threads (64 or 96) fill CTAs of 512
// threads by default; rows of 32 or fewer and of 128 or more keep bwd_cta_threads (256).
TEST(LaunchConfig, BackwardRowsOfUnder128ThreadsFill512ThreadCtas) {
  KernelFacts f;
  ASSERT_EQ(f.bwd_cta_threads, 256);
  ASSERT_EQ(f.bwd_mid_row_cta_threads, 512);
  const int64_t bf16_x_dy = 4;
  for (const auto& [rows, hidden, threads, groups] :
       {std::tuple<int64_t, int64_t, int, int>{4096, 1024, 64, 8}, {16384, 1152, 96, 5},
        {16384, 1536, 96, 5}, {16384, 896, 64, 8}}) {
    const LaunchConfig c = normkit::cuda::plan_bwd(rows, hidden, 8, f, bf16_x_dy);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
    ASSERT_EQ(c.plan, RowPlan::kPipelined);
    EXPECT_EQ(c.threads_per_row, threads);
    EXPECT_EQ(c.rows_per_block, groups);
    expect_covers(c, rows, hidden, normkit::cuda::bwd_items_max(8), true, f);
  }
  for (const auto& [rows, hidden, threads] :
       {std::tuple<int64_t, int64_t, int>{8192, 2048, 128}, {4096, 4096, 256},
        {16384, 512, 32}, {32768, 128, 8}}) {
    const LaunchConfig c = normkit::cuda::plan_bwd(rows, hidden, 8, f, bf16_x_dy);
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(hidden) + ": " + c.describe());
    EXPECT_EQ(c.threads_per_row, threads);
    EXPECT_LE(c.threads_per_row * c.rows_per_block, 256);
  }
  f.bwd_mid_row_cta_threads = 256;
  const LaunchConfig off = normkit::cuda::plan_bwd(4096, 1024, 8, f, bf16_x_dy);
  EXPECT_EQ(off.threads_per_row * off.rows_per_block, 256) << off.describe();
}

TEST(LaunchConfig, EvictFirstReadsUpToTheThresholdWhereTheKernelHonorsThem) {
  KernelFacts f;
  f.evict_first_max_mib = 32;
  LaunchConfig fwd = normkit::cuda::plan_fwd(8192, 2048, 8, f, 2);
  normkit::cuda::apply_read_policy(fwd, int64_t(32) << 20, false, f);  // x of 8192 x 2048 bf16
  EXPECT_TRUE(fwd.evict_first_reads) << fwd.describe();
  EXPECT_NE(fwd.describe().find("evict-first"), std::string::npos);
  normkit::cuda::apply_read_policy(fwd, (int64_t(32) << 20) + 1, false, f);
  EXPECT_FALSE(fwd.evict_first_reads);
  EXPECT_EQ(fwd.describe().find("evict-first"), std::string::npos);
  LaunchConfig bwd = normkit::cuda::plan_bwd(4096, 1024, 8, f, 4);
  ASSERT_EQ(bwd.plan, RowPlan::kPipelined);
  normkit::cuda::apply_read_policy(bwd, int64_t(16) << 20, true, f);
  EXPECT_TRUE(bwd.evict_first_reads);
  // Not honored: the backward's registers kernel, the forward's streaming and realigned ones.
  LaunchConfig registers_bwd = bwd;
  registers_bwd.plan = RowPlan::kRegisters;
  normkit::cuda::apply_read_policy(registers_bwd, 1024, true, f);
  EXPECT_FALSE(registers_bwd.evict_first_reads);
  LaunchConfig streaming = fwd;
  streaming.plan = RowPlan::kStreaming;
  normkit::cuda::apply_read_policy(streaming, 1024, false, f);
  EXPECT_FALSE(streaming.evict_first_reads);
  LaunchConfig realigned = fwd;
  realigned.realigned = true;
  normkit::cuda::apply_read_policy(realigned, 1024, false, f);
  EXPECT_FALSE(realigned.evict_first_reads);
  f.evict_first_max_mib = 0;
  normkit::cuda::apply_read_policy(fwd, 1024, false, f);
  EXPECT_FALSE(fwd.evict_first_reads);
}

TEST(LaunchConfig, EvictLastReadsFromItsThresholdAndNeverWithEvictFirst) {
  KernelFacts f;
  LaunchConfig fwd = normkit::cuda::plan_fwd(32768, 8192, 8, f, 2);
  f.evict_last_min_mib = 0;
  normkit::cuda::apply_read_policy(fwd, int64_t(512) << 20, false, f);
  EXPECT_FALSE(fwd.evict_last_reads) << "0: never: " << fwd.describe();
  f.evict_last_min_mib = 64;
  normkit::cuda::apply_read_policy(fwd, int64_t(64) << 20, false, f);
  EXPECT_TRUE(fwd.evict_last_reads) << fwd.describe();
  EXPECT_NE(fwd.describe().find("evict-last"), std::string::npos);
  normkit::cuda::apply_read_policy(fwd, (int64_t(64) << 20) - 1, false, f);
  EXPECT_FALSE(fwd.evict_last_reads);
  // Where both thresholds cover the bytes, evict-first wins.
  f.evict_last_min_mib = 1;
  f.evict_first_max_mib = 32;
  normkit::cuda::apply_read_policy(fwd, int64_t(16) << 20, false, f);
  EXPECT_TRUE(fwd.evict_first_reads);
  EXPECT_FALSE(fwd.evict_last_reads);
  LaunchConfig streaming = fwd;
  streaming.plan = RowPlan::kStreaming;
  normkit::cuda::apply_read_policy(streaming, int64_t(512) << 20, false, f);
  EXPECT_FALSE(streaming.evict_last_reads);
}

TEST(LaunchConfig, FewestWholeWarpsForThePlainForwardAtSetting3) {
  KernelFacts f;
  f.fwd_whole_warps = 0;  // (its own test: ForwardRowsOfWholeWarpsWhereAPowerOfTwoLeavesVectorsEmpty)
  f.fwd_exact = 2;
  const LaunchConfig pow2 = normkit::cuda::plan_fwd(4096, 12288, 8, f, 2);
  EXPECT_EQ(pow2.threads_per_row, 512) << pow2.describe();
  EXPECT_EQ(pow2.items, 3);
  f.fwd_exact = 3;
  const LaunchConfig c = normkit::cuda::plan_fwd(4096, 12288, 8, f, 2);
  SCOPED_TRACE(c.describe());
  EXPECT_EQ(c.threads_per_row, 384);
  EXPECT_EQ(c.items, 4);
  EXPECT_TRUE(c.exact);
  expect_covers(c, 4096, 12288, normkit::cuda::fwd_items_max(8), false, f);
  // Plans of fewer than 512 threads keep their powers of two: 7168 columns 256 x 4 (not
  // EXACT), 5120 256 x 3, 8192 256 x 4.
  const LaunchConfig odd = normkit::cuda::plan_fwd(16384, 7168, 8, f, 2);
  EXPECT_EQ(odd.threads_per_row, 256) << odd.describe();
  EXPECT_FALSE(odd.exact);
  EXPECT_EQ(normkit::cuda::plan_fwd(4096, 5120, 8, f, 2).threads_per_row, 256);
  EXPECT_EQ(normkit::cuda::plan_fwd(8192, 8192, 8, f, 2).threads_per_row, 256);
  // 14336 columns (1792 vectors): 448 x 4 rather than 512 x 4 with empty vectors.
  const LaunchConfig wide = normkit::cuda::plan_fwd(4096, 14336, 8, f, 2);
  EXPECT_EQ(wide.threads_per_row, 448) << wide.describe();
  EXPECT_TRUE(wide.exact);
  // Several rows per CTA at 1024 columns stay as they were.
  const LaunchConfig small = normkit::cuda::plan_fwd(4096, 1024, 8, f, 2);
  EXPECT_EQ(small.threads_per_row, 32);
  EXPECT_EQ(small.rows_per_block, 8);
}

TEST(LaunchConfig, SplitsWideBackwardRowsOverPipelinedClusters) {
  KernelFacts f;
  // 32768 columns (4096 vectors, up to bwd_cluster_threads_max_vectors): 8 CTAs of 256 x 2.
  const LaunchConfig c = normkit::cuda::plan_bwd(1024, 32768, 8, f, 4);
  EXPECT_EQ(c.plan, RowPlan::kPipelined) << c.describe();
  EXPECT_EQ(c.cluster_size, 8);
  EXPECT_EQ(c.threads_per_row, 256);
  EXPECT_EQ(c.grid, c.slots * 8);
  // 512-thread CTAs (NK_TUNE_BWD_CLUSTER_THREADS=512): 4 of 512 x 2.
  KernelFacts big_ctas = f;
  big_ctas.bwd_cluster_threads = 512;
  const LaunchConfig four = normkit::cuda::plan_bwd(1024, 32768, 8, big_ctas, 4);
  EXPECT_EQ(four.cluster_size, 4) << four.describe();
  EXPECT_EQ(four.threads_per_row, 512);
  // Longer rows keep 512-thread CTAs: 65536 columns on 8 CTAs of 512 x 2.
  const LaunchConfig longer = normkit::cuda::plan_bwd(256, 65536, 8, f, 4);
  EXPECT_EQ(longer.cluster_size, 8) << longer.describe();
  EXPECT_EQ(longer.threads_per_row, 512);
  // 131072 columns: 2 vectors per thread on 16 CTAs; 262144: 4 on 16; the streaming kernel
  // when the huge-row clusters are off.
  KernelFacts streaming = f;
  streaming.max_cluster_pipelined = 0;
  EXPECT_NE(normkit::cuda::plan_bwd(512, 262144, 8, streaming, 4).plan, RowPlan::kPipelined);
  const LaunchConfig huge = normkit::cuda::plan_bwd(512, 262144, 8, f, 4);
  EXPECT_EQ(huge.plan, RowPlan::kPipelined) << huge.describe();
  EXPECT_EQ(huge.cluster_size, 16);
  EXPECT_EQ(huge.items, 4);
  const LaunchConfig wide = normkit::cuda::plan_bwd(1024, 131072, 8, f, 4);
  EXPECT_EQ(wide.cluster_size, 16) << wide.describe();
  EXPECT_EQ(wide.items, 2);
  KernelFacts no_clusters = f;
  no_clusters.cluster_launch = false;
  EXPECT_NE(normkit::cuda::plan_bwd(1024, 32768, 8, no_clusters, 4).plan, RowPlan::kPipelined);
}

TEST(LaunchConfig, SplitRowExtrasOnlyForSplitRowsOfMoreThanTwoVectors) {
  // apply_split_row_extras: the split rows of 4 vectors per thread (512 x 262144 on 16 CTAs,
  // float32 131072 on 16 CTAs of 4-element vectors), never those of 2 nor unsplit rows.
  KernelFacts f;
  const auto extras = [](LaunchConfig c, int64_t weight_bytes, bool dbias, bool dresidual,
                         const KernelFacts& facts) {
    normkit::cuda::apply_split_row_extras(c, weight_bytes, dbias, dresidual, facts);
    return c;
  };
  const LaunchConfig huge = normkit::cuda::plan_bwd(512, 262144, 8, f, 4);
  ASSERT_EQ(huge.items, 4) << huge.describe();
  // The weight in shared memory (on by default) where its chunk fits beside the 192 KB of
  // stages: a bf16 weight's 32 KB do, a float32 weight's 64 KB do not; no chunk without one.
  const LaunchConfig bf16_weight = extras(huge, 2, false, false, f);
  EXPECT_TRUE(bf16_weight.smem_weight) << bf16_weight.describe();
  EXPECT_EQ(bf16_weight.smem_bytes, huge.smem_bytes + 16384 * 2);
  EXPECT_FALSE(extras(huge, 4, false, false, f).smem_weight);
  EXPECT_FALSE(extras(huge, 0, false, false, f).smem_weight);
  KernelFacts reread = f;
  reread.bwd_smem_weight = 0;
  EXPECT_FALSE(extras(huge, 2, false, false, reread).smem_weight);
  // The pending row in registers (NK_TUNE_BWD_PENDING_IN_REGISTERS=1, off by default), only
  // without dbias and dresidual_out.
  EXPECT_FALSE(extras(huge, 2, false, false, f).pending_in_registers);
  KernelFacts on = f;
  on.bwd_pending_in_registers = 1;
  EXPECT_TRUE(extras(huge, 2, false, false, on).pending_in_registers);
  EXPECT_FALSE(extras(huge, 2, true, false, on).pending_in_registers);
  EXPECT_FALSE(extras(huge, 2, false, true, on).pending_in_registers);
  const LaunchConfig fp32 = normkit::cuda::plan_bwd(64, 131072, 4, on, 8);
  EXPECT_EQ(fp32.cluster_size, 16) << fp32.describe();
  EXPECT_EQ(extras(fp32, 4, false, false, on).pending_in_registers, fp32.items > 2);
  for (const LaunchConfig& other : {normkit::cuda::plan_bwd(1024, 131072, 8, on, 4),
                                    normkit::cuda::plan_bwd(4096, 4096, 8, on, 4)}) {
    const LaunchConfig c = extras(other, 2, false, false, on);
    EXPECT_FALSE(c.pending_in_registers) << c.describe();
    EXPECT_FALSE(c.smem_weight) << c.describe();
    EXPECT_EQ(c.smem_bytes, other.smem_bytes);
  }
}

TEST(LaunchConfig, ClusterStreamingWhereTheColumnSumsFitSharedMemory) {
  // NK_TUNE_BWD_CLUSTER_STREAMING (on by default): a streaming plan becomes one cluster of
  // up to 16 CTAs per row, as many clusters as fit the SMs once, one slot each.
  KernelFacts f;
  f.max_cluster = 8;
  f.max_cluster_pipelined = 16;
  f.bwd_cluster_streaming = 0;
  LaunchConfig off = normkit::cuda::plan_bwd(256, 524288, 8, f, 4);
  ASSERT_EQ(off.plan, RowPlan::kStreaming) << off.describe();
  normkit::cuda::apply_cluster_streaming(off, 256, 524288, false, f);
  EXPECT_EQ(off.cluster_size, 1) << off.describe();
  f.bwd_cluster_streaming = 1;
  LaunchConfig c = normkit::cuda::plan_bwd(256, 524288, 8, f, 4);
  normkit::cuda::apply_cluster_streaming(c, 256, 524288, false, f);
  EXPECT_EQ(c.plan, RowPlan::kStreaming) << c.describe();
  EXPECT_EQ(c.cluster_size, 16);
  EXPECT_EQ(c.cols_per_cta, 32768);
  EXPECT_EQ(c.smem_bytes, 32768 * 4);
  EXPECT_EQ(c.slots, f.sm_count / 16);
  EXPECT_EQ(c.grid, c.slots * 16);
  // The next row's prefetch: what fits beside 128 CTAs' chunks of x and dy (16 MB) in 40% of
  // 50 MB, i.e. 16 KB per tensor; all of 600 x 300000's 37.5 KB chunks (9.4 MB in flight); none
  // at 1048576 columns (32 MB in flight).
  normkit::cuda::apply_streaming_prefetch(c, 2, 2, true, f);
  EXPECT_EQ(c.prefetch_bytes, 16 << 10) << c.describe();
  // With dbias its sums double: of 256 KB, the 7 passes of 4096 columns that fit (224 KB)
  // stay in shared memory, the 8th goes to the workspace.
  LaunchConfig with_bias = normkit::cuda::plan_bwd(256, 524288, 8, f, 4);
  normkit::cuda::apply_cluster_streaming(with_bias, 256, 524288, true, f);
  EXPECT_EQ(with_bias.cluster_size, 16) << with_bias.describe();
  EXPECT_EQ(with_bias.smem_bytes, 7 * 4096 * 8) << with_bias.describe();
  EXPECT_TRUE(with_bias.slot_sums);
  EXPECT_FALSE(c.slot_sums);
  // 1048576 columns: 65536 per CTA, 14 of their 16 passes in shared memory.
  LaunchConfig widest = normkit::cuda::plan_bwd(128, 1048576, 8, f, 4);
  normkit::cuda::apply_cluster_streaming(widest, 128, 1048576, false, f);
  EXPECT_EQ(widest.cluster_size, 16) << widest.describe();
  EXPECT_EQ(widest.cols_per_cta, 65536);
  EXPECT_EQ(widest.smem_bytes, 14 * 4096 * 4) << widest.describe();
  normkit::cuda::apply_streaming_prefetch(widest, 2, 2, true, f);
  EXPECT_EQ(widest.prefetch_bytes, 0) << widest.describe();
  // NK_TUNE_BWD_STREAMING_MAX_CLUSTERS: fewer clusters at once (then room for a prefetch).
  f.bwd_streaming_max_clusters = 5;
  LaunchConfig fewer = normkit::cuda::plan_bwd(128, 1048576, 8, f, 4);
  normkit::cuda::apply_cluster_streaming(fewer, 128, 1048576, false, f);
  EXPECT_EQ(fewer.slots, 5) << fewer.describe();
  EXPECT_EQ(fewer.grid, 5 * 16) << fewer.describe();
  f.bwd_streaming_max_clusters = 0;
  // The sums cover whole passes of the CTA's 512 x 8 columns: 18752 columns take 5 x 4096.
  LaunchConfig ragged = normkit::cuda::plan_bwd(600, 300000, 8, f, 4);
  normkit::cuda::apply_cluster_streaming(ragged, 600, 300000, false, f);
  EXPECT_EQ(ragged.cols_per_cta, 18752) << ragged.describe();
  EXPECT_EQ(ragged.smem_bytes, 5 * 4096 * 4) << ragged.describe();
  normkit::cuda::apply_streaming_prefetch(ragged, 2, 2, true, f);
  EXPECT_EQ(ragged.prefetch_bytes, 18752 * 2) << ragged.describe();
  // float32 (4-element vectors): no prefetch of the next row by default.
  LaunchConfig fp32 = normkit::cuda::plan_bwd(512, 262144, 4, f, 4);
  normkit::cuda::apply_cluster_streaming(fp32, 512, 262144, false, f);
  EXPECT_EQ(fp32.cluster_size, 16) << fp32.describe();
  normkit::cuda::apply_streaming_prefetch(fp32, 4, 4, true, f);
  EXPECT_EQ(fp32.prefetch_bytes, 16 << 10) << fp32.describe();
  // 8-byte vectors (bf16 rows aligned to 8 bytes only) carry no prefetch; a cap from the knob.
  LaunchConfig half = normkit::cuda::plan_bwd(256, 524288, 4, f, 4);
  normkit::cuda::apply_cluster_streaming(half, 256, 524288, false, f);
  normkit::cuda::apply_streaming_prefetch(half, 2, 2, true, f);
  EXPECT_EQ(half.prefetch_bytes, 0) << half.describe();
  f.cluster_streaming_prefetch_kb = 40;
  normkit::cuda::apply_streaming_prefetch(c, 2, 2, true, f);
  EXPECT_EQ(c.prefetch_bytes, 40 << 10) << c.describe();
  // Fewer rows than clusters: a cluster per row. Pipelined plans are left alone.
  LaunchConfig few = normkit::cuda::plan_bwd(3, 524288, 8, f, 4);
  normkit::cuda::apply_cluster_streaming(few, 3, 524288, false, f);
  EXPECT_EQ(few.slots, 3) << few.describe();
  LaunchConfig pipelined = normkit::cuda::plan_bwd(512, 262144, 8, f, 4);
  normkit::cuda::apply_cluster_streaming(pipelined, 512, 262144, false, f);
  EXPECT_EQ(pipelined.plan, RowPlan::kPipelined) << pipelined.describe();
  EXPECT_EQ(pipelined.cols_per_cta, 16384);
}

TEST(LaunchConfig, ForwardClusterStreamingPastTheWidestClusters) {
  // NK_TUNE_FWD_CLUSTER_STREAMING (on by default): the forward's streaming plan as a cluster of
  // up to 16 CTAs per row, fwd_ctas_per_sm CTAs per SM, no shared memory; the next row's
  // prefetch only where asked.
  KernelFacts f;
  f.max_cluster = 8;
  f.max_cluster_pipelined = 16;
  f.fwd_cluster_streaming = 0;
  LaunchConfig off = normkit::cuda::plan_fwd(256, 524288, 8, f, 2);
  ASSERT_EQ(off.plan, RowPlan::kStreaming) << off.describe();
  normkit::cuda::apply_fwd_cluster_streaming(off, 256, 524288, f);
  EXPECT_EQ(off.cluster_size, 1) << off.describe();
  f.fwd_cluster_streaming = 1;
  LaunchConfig c = normkit::cuda::plan_fwd(256, 524288, 8, f, 2);
  normkit::cuda::apply_fwd_cluster_streaming(c, 256, 524288, f);
  EXPECT_EQ(c.plan, RowPlan::kStreaming) << c.describe();
  EXPECT_EQ(c.cluster_size, 16);
  EXPECT_EQ(c.cols_per_cta, 32768);
  EXPECT_EQ(c.smem_bytes, 0);
  EXPECT_EQ(c.slots, f.sm_count * f.fwd_ctas_per_sm / 16);
  EXPECT_EQ(c.grid, c.slots * 16);
  // float32 past 131072 columns: 262144 / 4 = 65536 vectors over 16 CTAs; a row per cluster.
  LaunchConfig fp32 = normkit::cuda::plan_fwd(3, 262144, 4, f, 4);
  normkit::cuda::apply_fwd_cluster_streaming(fp32, 3, 262144, f);
  EXPECT_EQ(fp32.cluster_size, 16) << fp32.describe();
  EXPECT_EQ(fp32.cols_per_cta, 16384);
  EXPECT_EQ(fp32.slots, 3);
  // The next row's prefetch: by default (2) in the backward only.
  normkit::cuda::apply_streaming_prefetch(c, 2, 2, false, f);
  EXPECT_EQ(c.prefetch_bytes, 0);
  f.cluster_streaming_prefetch = 1;
  normkit::cuda::apply_streaming_prefetch(fp32, 4, 4, false, f);
  EXPECT_EQ(fp32.prefetch_bytes, 16384 * 4) << fp32.describe();  // (3 rows: all of the chunk)
  // Capped (NK_TUNE_CLUSTER_STREAMING_PREFETCH_KB): the first 40 KB of each chunk.
  f.cluster_streaming_prefetch_kb = 40;
  normkit::cuda::apply_streaming_prefetch(fp32, 4, 4, false, f);
  EXPECT_EQ(fp32.prefetch_bytes, 40 << 10) << fp32.describe();
}

TEST(LaunchConfig, SplitsBackwardRowsOfMoreThan1024VectorsOverClusters) {
  KernelFacts f;
  // 16384 columns of 8-element vectors are 2048 vectors: 4 CTAs of 256 threads x 2.
  const LaunchConfig c = normkit::cuda::plan_bwd(2048, 16384, 8, f, 4);
  EXPECT_EQ(c.plan, RowPlan::kPipelined) << c.describe();
  EXPECT_EQ(c.cluster_size, 4);
  EXPECT_EQ(c.items, 2);
  EXPECT_EQ(c.threads_per_row, 256);
  const LaunchConfig odd = normkit::cuda::plan_bwd(4096, 12288, 8, f, 4);
  EXPECT_EQ(odd.cluster_size, 3) << odd.describe();
  EXPECT_EQ(odd.cols_per_cta * 3, 12288);
  EXPECT_EQ(normkit::cuda::plan_bwd(8192, 8192, 8, f, 4).cluster_size, 1);
  // The knob at the one-CTA limit (2048 vectors) keeps such rows in one CTA; without cluster
  // launches they stay there too.
  KernelFacts one_cta = f;
  one_cta.bwd_split_vectors = 2048;
  const LaunchConfig whole = normkit::cuda::plan_bwd(2048, 16384, 8, one_cta, 4);
  EXPECT_EQ(whole.cluster_size, 1);
  EXPECT_EQ(whole.items, 4);
  KernelFacts no_clusters = f;
  no_clusters.cluster_launch = false;
  const LaunchConfig alone = normkit::cuda::plan_bwd(2048, 16384, 8, no_clusters, 4);
  EXPECT_EQ(alone.plan, RowPlan::kPipelined) << alone.describe();
  EXPECT_EQ(alone.cluster_size, 1);
}

TEST(LaunchConfig, SplitsMisalignedBackwardRowsOverUpTo16Ctas) {
  // Odd hidden: 2-byte accesses, no cp.async. With 8 vectors per thread (NK_TUNE_BWD_NARROW_ITEMS
  // =8), 17389 columns need 9 CTAs of 256 x 8: a cluster of 9 rather than the two-pass streaming
  // kernel; past 16 CTAs, streaming.
  KernelFacts f;
  f.bwd_narrow_items = normkit::cuda::bwd_items_max(1);
  const LaunchConfig c = normkit::cuda::plan_bwd(29, 17389, 1, f, 0);
  EXPECT_EQ(c.plan, RowPlan::kCluster) << c.describe();
  EXPECT_EQ(c.cluster_size, 9);
  EXPECT_EQ(c.slots, 29);
  EXPECT_EQ(normkit::cuda::plan_bwd(29, 40001, 1, f, 0).plan, RowPlan::kStreaming);
  KernelFacts portable = f;
  portable.max_cluster_pipelined = 0;
  EXPECT_EQ(normkit::cuda::plan_bwd(29, 17389, 1, portable, 0).plan, RowPlan::kStreaming);
}

// KernelFacts::quant_transpose_evict_first: the forward before a transpose kernel reads x
// evict-first (y stays in L2 for the transpose); plans without a read policy keep none, and the
// knob off (NK_TUNE_QUANT_TRANSPOSE_EVICT_FIRST=0) changes nothing.
TEST(LaunchConfig, ForwardBeforeATransposeCanReadXEvictFirst) {
  KernelFacts f;
  EXPECT_EQ(f.quant_transpose_evict_first, 1);
  LaunchConfig c = normkit::cuda::plan_fwd_quant(1024, 32768, 8, 0, false, f);
  normkit::cuda::apply_read_policy(c, int64_t(1024) * 32768 * 2, false, f);
  ASSERT_TRUE(c.evict_last_reads) << c.describe();
  KernelFacts off = f;
  off.quant_transpose_evict_first = 0;
  EXPECT_EQ(normkit::cuda::keep_y_for_transpose(c, off).describe(), c.describe());
  const LaunchConfig kept = normkit::cuda::keep_y_for_transpose(c, f);
  EXPECT_TRUE(kept.evict_first_reads);
  EXPECT_FALSE(kept.evict_last_reads);
  LaunchConfig none = c;
  none.evict_first_reads = none.evict_last_reads = false;  // (a kernel without policies)
  const LaunchConfig still = normkit::cuda::keep_y_for_transpose(none, f);
  EXPECT_FALSE(still.evict_first_reads || still.evict_last_reads);
}

// KernelFacts::bwd_narrow_items (NK_TUNE_BWD_NARROW_ITEMS): up to 16 vectors of one element per
// thread, so that 29 x 17389 takes clusters of 5 (all resident at once on an H100) instead of 9.
TEST(LaunchConfig, MisalignedBackwardRowsTakeFewerCtasWithMoreNarrowItems) {
  KernelFacts f;
  EXPECT_EQ(f.bwd_narrow_items, normkit::cuda::kBwdNarrowItemsWide);
  const LaunchConfig c = normkit::cuda::plan_bwd(29, 17389, 1, f, 0);
  SCOPED_TRACE(c.describe());
  EXPECT_EQ(c.plan, RowPlan::kCluster);
  EXPECT_EQ(c.cluster_size, 5);
  EXPECT_EQ(c.slots, 29);
  EXPECT_EQ(c.threads_per_row, normkit::cuda::kBwdMaxThreadsPerRow);
  EXPECT_GT(c.items, normkit::cuda::bwd_items_max(1));  // (the wide kernel)
  EXPECT_LE(c.items, normkit::cuda::kBwdNarrowItemsWide);
  EXPECT_GE(int64_t(c.threads_per_row) * c.items * c.cluster_size, 17389);
  // Rows that needed more than 16 CTAs of 8 now fit a cluster; past 16 of 16, streaming.
  EXPECT_EQ(normkit::cuda::plan_bwd(29, 40001, 1, f, 0).plan, RowPlan::kCluster);
  EXPECT_EQ(normkit::cuda::plan_bwd(29, 65537, 1, f, 0).plan, RowPlan::kStreaming);
  // Wider vectors, and misaligned rows that fit max_cluster CTAs of 256 x 8 (16384 columns;
  // 16 measured no faster there), are planned as with 8.
  KernelFacts eight = f;
  eight.bwd_narrow_items = normkit::cuda::bwd_items_max(1);
  for (const auto& [rows, hidden, vec] :
       {std::tuple<int64_t, int64_t, int>{29, 17388, 2}, {4096, 4096, 8}, {29, 17392, 8},
        {9, 1003, 1}, {128, 4095, 1}, {1024, 16383, 1}}) {
    const LaunchConfig planned = normkit::cuda::plan_bwd(rows, hidden, vec, f, 0);
    EXPECT_EQ(planned.describe(), normkit::cuda::plan_bwd(rows, hidden, vec, eight, 0).describe())
        << rows << "x" << hidden << " vec " << vec;
    EXPECT_LE(planned.items, normkit::cuda::bwd_items_max(vec));
  }
}

TEST(LaunchConfig, PipelinesTheForwardOfAlignedRowsThatFitSharedMemory) {
  KernelFacts f;
  const LaunchConfig c = normkit::cuda::plan_fwd(128, 4096, 8, f, 2);
  EXPECT_EQ(c.plan, RowPlan::kPipelined) << c.describe();
  EXPECT_LE(c.grid, f.fwd_ctas_per_sm * f.sm_count);
  EXPECT_EQ(c.slots, 0);
  // Many rows: the registers kernel.
  EXPECT_NE(normkit::cuda::plan_fwd(16384, 4096, 8, f, 2).plan, RowPlan::kPipelined);
  // 7168 columns: 448 threads x 2 vectors, no idle thread.
  const LaunchConfig g = normkit::cuda::plan_fwd(100, 7168, 8, f, 2);
  EXPECT_EQ(g.plan, RowPlan::kPipelined) << g.describe();
  EXPECT_EQ(g.threads_per_row * g.items * g.vec, 7168);
  // Odd hidden sizes, no cp.async-sized accesses, and rows past shared memory are not.
  EXPECT_NE(normkit::cuda::plan_fwd(100, 4095, 8, f, 2).plan, RowPlan::kPipelined);
  EXPECT_NE(normkit::cuda::plan_fwd(100, 4096, 8, f, 0).plan, RowPlan::kPipelined);
  EXPECT_NE(normkit::cuda::plan_fwd(100, 1 << 20, 8, f, 2).plan, RowPlan::kPipelined);
  // Wide rows go pipelined over a cluster only when asked (as the backward always does).
  EXPECT_EQ(normkit::cuda::plan_fwd(256, 32768, 8, f, 2).plan, RowPlan::kCluster);
  KernelFacts clusters = f;
  clusters.fwd_pipeline_clusters = 1;
  const LaunchConfig w = normkit::cuda::plan_fwd(256, 32768, 8, clusters, 2);
  EXPECT_EQ(w.plan, RowPlan::kPipelined) << w.describe();
  EXPECT_EQ(w.cluster_size, 4);
}

TEST(LaunchConfig, ForwardOfWideRowsAsMeasured) {
  KernelFacts f;
  // Many rows that fit one CTA at the large budget: no cluster.
  const LaunchConfig one = normkit::cuda::plan_fwd(1024, 32768, 8, f, 2);
  EXPECT_EQ(one.plan, RowPlan::kRegisters) << one.describe();
  EXPECT_EQ(one.items, 8);
  // Rows past 8 CTAs at the small budget: clusters of up to 16, else streaming (vectors of 8
  // bytes or more).
  const LaunchConfig wide = normkit::cuda::plan_fwd(512, 262144, 8, f, 2);
  EXPECT_EQ(wide.plan, RowPlan::kCluster) << wide.describe();
  EXPECT_EQ(wide.cluster_size, 16);
  KernelFacts streaming = f;
  streaming.fwd_wide_row_cluster = 0;
  EXPECT_EQ(normkit::cuda::plan_fwd(512, 262144, 8, streaming, 2).plan, RowPlan::kStreaming);
  EXPECT_EQ(normkit::cuda::plan_fwd(512, 524288, 8, f, 2).plan, RowPlan::kStreaming);
  EXPECT_EQ(normkit::cuda::plan_fwd(1024, 131072, 8, f, 2).plan, RowPlan::kCluster);
  // Narrow vectors keep their clusters (their streaming loop is slow: 29 x 17389, 35 vs 13 us).
  EXPECT_EQ(normkit::cuda::plan_fwd(29, 17389, 1, f, 0).plan, RowPlan::kCluster);
  // By default (NK_TUNE_FWD_SPLIT_WIDE_ROWS=2) the quantized forwards with dynamic scales split
  // them over a cluster of two at the small budget (as measured); per-tensor and the plain
  // forward keep one CTA per row. (Without quant_wide_row_threads, which splits the quantized
  // ones of 16-bit x over 256-thread CTAs: QuantWideRowsSplitOverClustersOf256ThreadCtas.)
  f.quant_wide_row_threads = 0;
  EXPECT_EQ(normkit::cuda::plan_fwd(1024, 32768, 8, f, 2).cluster_size, 1);
  EXPECT_EQ(normkit::cuda::plan_fwd_quant(1024, 32768, 8, 0, false, f).cluster_size, 1);
  for (int block : {0, 32, 128}) {
    const LaunchConfig dynamic = normkit::cuda::plan_fwd_quant(1024, 32768, 8, block, true, f);
    EXPECT_EQ(dynamic.cluster_size, 2) << dynamic.describe();
    EXPECT_EQ(dynamic.items, 4);
  }
  KernelFacts never = f;
  never.fwd_split_wide_rows = 0;
  EXPECT_EQ(normkit::cuda::plan_fwd_quant(1024, 32768, 8, 0, true, never).cluster_size, 1);
  // Setting 1: every forward splits them, in whole 128-element blocks for the quantized one.
  KernelFacts split = f;
  split.fwd_split_wide_rows = 1;
  const LaunchConfig two = normkit::cuda::plan_fwd(1024, 32768, 8, split, 2);
  EXPECT_EQ(two.cluster_size, 2) << two.describe();
  EXPECT_EQ(two.items, 4);
  const LaunchConfig block = normkit::cuda::plan_fwd_quant(1024, 32768, 8, 128, true, split);
  EXPECT_EQ(block.cluster_size, 2) << block.describe();
  EXPECT_EQ(block.items, 4);
  EXPECT_EQ(block.cols_per_cta % 128, 0);
  EXPECT_EQ(block.cols_per_cta * block.cluster_size, 32768);
}

// The pipelined forward sums its rows with row_group_sum_whole_warps: every plan of it gives a
// row whole warps (only the backward's sub-warp rows take fewer than 32 threads).
TEST(LaunchConfig, ForwardPipelinedPlansGiveEachRowWholeWarps) {
  KernelFacts f;
  f.fwd_pipeline_clusters = 1;  // the pipelined clusters too
  int pipelined = 0;
  // (x of 2 or 4 bytes; cp.async stages 4 bytes or more per access, else no staged bytes)
  for (int64_t x_bytes : {2, 4}) {
    for (int vec : {1, 2, 4, 8}) {
      if (vec * x_bytes > 16) continue;
      const int64_t staged = vec * x_bytes >= 4 ? x_bytes : 0;
      for (int64_t rows : {1, 3, 64, 200, 264}) {
        for (int64_t hidden : {8, 64, 96, 128, 200, 256, 1000, 2048, 4096, 17389, 32768, 65536}) {
          if (hidden % vec != 0) continue;
          const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, vec, f, staged);
          if (c.plan != RowPlan::kPipelined) continue;
          ++pipelined;
          EXPECT_EQ(c.threads_per_row % 32, 0) << rows << "x" << hidden << " " << c.describe();
        }
      }
    }
  }
  EXPECT_GT(pipelined, 100);  // (the loops reach the pipelined plans)
}

// The facts as they come (setting 2 of fwd_split_wide_rows not mapped by plain_fwd_facts): the
// plans that float32 calls get under NK_TUNE_FWD_SPLIT_WIDE_ROWS=0.
TEST(LaunchConfig, ForwardOfLongFloat32RowsTakesPipelinedClusters) {
  KernelFacts f;
  // float32, 4-element vectors: one CTA per row would hold 16 vectors per thread.
  const LaunchConfig heavy = normkit::cuda::plan_fwd(1024, 32768, 4, f, 4);
  EXPECT_EQ(heavy.plan, RowPlan::kPipelined) << heavy.describe();
  EXPECT_EQ(heavy.cluster_size, 8);
  EXPECT_EQ(heavy.items, 2);
  // Without cp.async (staged bytes 0) the registers kernel keeps them.
  EXPECT_EQ(normkit::cuda::plan_fwd(1024, 32768, 4, f, 0).plan, RowPlan::kRegisters);
  // bf16 rows of the same length: 8 vectors per thread, one CTA per row, as measured.
  const LaunchConfig bf16 = normkit::cuda::plan_fwd(1024, 32768, 8, f, 2);
  EXPECT_EQ(bf16.plan, RowPlan::kRegisters) << bf16.describe();
  EXPECT_EQ(bf16.items, 8);
  // float32 rows of 12288 columns: 6 vectors per thread, one CTA per row still.
  EXPECT_EQ(normkit::cuda::plan_fwd(4096, 12288, 4, f, 4).plan, RowPlan::kRegisters);
}

TEST(LaunchConfig, PlainForwardSplitsFloat32RowsByDefault) {
  const KernelFacts f;
  ASSERT_EQ(f.fwd_split_wide_rows, 2);
  // The facts of a float32 forward split its wide rows (setting 1); 16-bit x keeps setting 2.
  EXPECT_EQ(normkit::cuda::plain_fwd_facts(f, 4).fwd_split_wide_rows, 1);
  EXPECT_EQ(normkit::cuda::plain_fwd_facts(f, 2).fwd_split_wide_rows, 2);
  KernelFacts never = f;
  never.fwd_split_wide_rows = 0;
  EXPECT_EQ(normkit::cuda::plain_fwd_facts(never, 4).fwd_split_wide_rows, 0);
  // As measured: 1024 x 32768 on clusters of 4 CTAs at 4 vectors per thread (not the
  // pipelined clusters of 8), 4096 x 12288 on clusters of 2 at 3 (not one CTA at 6).
  const KernelFacts fp32 = normkit::cuda::plain_fwd_facts(f, 4);
  const LaunchConfig wide = normkit::cuda::plan_fwd(1024, 32768, 4, fp32, 4);
  EXPECT_EQ(wide.plan, RowPlan::kCluster) << wide.describe();
  EXPECT_EQ(wide.cluster_size, 4);
  EXPECT_EQ(wide.items, 4);
  const LaunchConfig mid = normkit::cuda::plan_fwd(4096, 12288, 4, fp32, 4);
  EXPECT_EQ(mid.plan, RowPlan::kCluster) << mid.describe();
  EXPECT_EQ(mid.cluster_size, 2);
  EXPECT_EQ(mid.items, 3);
  // bf16 rows of the same bytes keep one CTA per row.
  EXPECT_EQ(normkit::cuda::plan_fwd(1024, 32768, 8, normkit::cuda::plain_fwd_facts(f, 2), 2)
                .cluster_size,
            1);
}

TEST(LaunchConfig, RealignsMisalignedForwardRowsToSixteenByteVectors) {
  KernelFacts f;
  // Not below 1M elements (slower there, as measured): 29 x 17389 stays element by element but
  // in calls of a weight alone (the next test).
  EXPECT_EQ(normkit::cuda::plan_fwd_realigned(29, 17389, f).grid, 0);
  EXPECT_GT(normkit::cuda::plan_fwd_realigned(61, 17389, f).grid, 0);
  f.fwd_realign_min_elements = 0;
  // 29 x 17389: 2174 vectors of 8 after each row's head, 2 CTAs of 512 x 3.
  const LaunchConfig c = normkit::cuda::plan_fwd_realigned(29, 17389, f);
  EXPECT_TRUE(c.realigned);
  EXPECT_EQ(c.vec, 8);
  EXPECT_EQ(c.plan, RowPlan::kCluster) << c.describe();
  EXPECT_EQ(c.cluster_size, 2);
  EXPECT_EQ(c.grid, 58);
  EXPECT_NE(c.describe().find("realigned"), std::string::npos);
  // The registers plan at 8-element vectors, whatever it is.
  const LaunchConfig many = normkit::cuda::plan_fwd_realigned(4096, 4095, f);
  const LaunchConfig aligned = normkit::cuda::plan_fwd_registers(4096, 4095, 8, f);
  EXPECT_EQ(many.grid, aligned.grid);
  EXPECT_EQ(many.items, aligned.items);
  EXPECT_FALSE(aligned.realigned);
  // None for rows under two vectors, rows of more than 4 vectors per thread (one CTA of 512
  // per row: 4096 x 32767), or rows that plan would stream.
  EXPECT_EQ(normkit::cuda::plan_fwd_realigned(4096, 32767, f).grid, 0);
  EXPECT_EQ(normkit::cuda::plan_fwd_realigned(8, 15, f).grid, 0);
  EXPECT_GT(normkit::cuda::plan_fwd_realigned(8, 16, f).grid, 0);
  EXPECT_EQ(normkit::cuda::plan_fwd_realigned(512, 524289, f).grid, 0);
}

TEST(LaunchConfig, RealignsFewLongMisalignedRowsOnClustersThatFillTheDevice) {
  KernelFacts f;
  f.sm_count = 132;
  EXPECT_EQ(f.fwd_realign_clusters, 1);  // the default
  const auto realigned = [&](int64_t rows, int64_t hidden) {
    return normkit::cuda::plan_fwd_realigned(rows, hidden, f, /*weight_only_call=*/true);
  };
  // Rows a cluster splits, in calls of a weight alone: realigned, on the plan that splits them
  // to fill the device.
  for (const auto& [rows, hidden] :
       std::vector<std::pair<int64_t, int64_t>>{{29, 17389}, {1, 17389}, {4, 17389}, {2, 65537}}) {
    const LaunchConfig c = realigned(rows, hidden);
    KernelFacts fill = f;
    fill.split_for_fill_elements = 0;
    const LaunchConfig filled = normkit::cuda::plan_fwd_registers(rows, hidden, 8, fill);
    SCOPED_TRACE(c.describe());
    EXPECT_TRUE(c.realigned);
    EXPECT_GT(c.cluster_size, 1);
    EXPECT_EQ(c.cluster_size, filled.cluster_size);
    EXPECT_EQ(c.threads_per_row, filled.threads_per_row);
    EXPECT_EQ(c.grid, filled.grid);
    EXPECT_LE(c.items, normkit::cuda::kSmallItems);
  }
  // 29 x 17389: 5 CTAs of 128 threads per row (145 CTAs) instead of 2 of 512 (58).
  EXPECT_EQ(realigned(29, 17389).grid, 145);
  // Calls that neither kernel form of weight alone nor the lean general one serves (a bias
  // alone, no weight), the knob at 0, or the general form forced (NK_TUNE_REALIGN_WEIGHT_ONLY=0):
  // element by element.
  EXPECT_EQ(normkit::cuda::plan_fwd_realigned(29, 17389, f, /*weight_only_call=*/false).grid, 0);
  KernelFacts off = f;
  off.fwd_realign_clusters = 0;
  EXPECT_EQ(normkit::cuda::plan_fwd_realigned(29, 17389, off, true).grid, 0);
  KernelFacts general = f;
  general.realign_weight_only = 0;
  EXPECT_EQ(normkit::cuda::plan_fwd_realigned(29, 17389, general, true).grid, 0);
  // From 1M elements the plan is the one without the fill rule, as before.
  EXPECT_EQ(realigned(61, 17389).grid, normkit::cuda::plan_fwd_realigned(61, 17389, off).grid);
}

TEST(LaunchConfig, RealignsRowsOneCtaHoldsBelowOneMillionElementsFromTheirThresholds) {
  KernelFacts f;
  f.sm_count = 132;
  EXPECT_EQ(f.fwd_realign_long_rows_min_elements, 240 << 10);  // the defaults
  EXPECT_EQ(f.fwd_realign_short_rows_min_elements, 600 << 10);
  const auto realigned = [&](int64_t rows, int64_t hidden, const KernelFacts& facts) {
    return normkit::cuda::plan_fwd_realigned(rows, hidden, facts, /*weight_only_call=*/true);
  };
  // Rows past 2048 columns from 240K elements, shorter ones from 600K: one row per CTA, the
  // registers plan at 8-element vectors (of 7 more columns where the lean kernel needs it).
  for (const auto& [rows, hidden] : std::vector<std::pair<int64_t, int64_t>>{
           {64, 4095}, {80, 4095}, {96, 4095}, {64, 5001}, {64, 8191}, {200, 3001},
           {256, 4095}, {320, 2047}, {700, 1001}, {1024, 1001}}) {
    const LaunchConfig c = realigned(rows, hidden, f);
    SCOPED_TRACE(c.describe());
    EXPECT_TRUE(c.realigned);
    EXPECT_EQ(c.cluster_size, 1);
    EXPECT_EQ(c.grid, normkit::cuda::plan_fwd_registers(rows, hidden, 8, f).grid);
  }
  // Below them, rows past 2048 columns from 16 rows on the lean kernel only (one row per CTA).
  EXPECT_EQ(f.fwd_realign_lean_rows_min_rows, 16);
  for (const auto& [rows, hidden] : std::vector<std::pair<int64_t, int64_t>>{
           {64, 3001}, {48, 3001}, {32, 4095}, {48, 4095}, {16, 8191}, {32, 8191}}) {
    const LaunchConfig c = realigned(rows, hidden, f);
    SCOPED_TRACE(c.describe());
    EXPECT_TRUE(c.realigned_lean);
    EXPECT_EQ(c.cluster_size, 1);
    EXPECT_EQ(c.grid, rows);
  }
  // Else element by element: shorter rows below their threshold, fewer than 16 rows, rows the
  // lean kernel does not cover (16383 columns: 2049 vectors against 512 x 4), a bias alone (no
  // weight), or with the general kernels forced.
  for (const auto& [rows, hidden] : std::vector<std::pair<int64_t, int64_t>>{
           {128, 2047}, {256, 2047}, {512, 1001}, {64, 1001}, {32, 16383}, {16, 16383},
           {8, 12287}, {15, 4095}}) {
    EXPECT_EQ(realigned(rows, hidden, f).grid, 0) << rows << " x " << hidden;
  }
  EXPECT_EQ(normkit::cuda::plan_fwd_realigned(256, 4095, f, /*weight_only_call=*/false).grid, 0);
  KernelFacts general = f;
  general.realign_weight_only = 0;
  EXPECT_EQ(realigned(256, 4095, general).grid, 0);
  // The thresholds are the knobs': at 0 any 64 rows or more one CTA holds.
  KernelFacts low = f;
  low.fwd_realign_long_rows_min_elements = 0;
  low.fwd_realign_short_rows_min_elements = 0;
  EXPECT_GT(realigned(64, 3001, low).grid, 0);
  EXPECT_GT(realigned(64, 1001, low).grid, 0);
  EXPECT_EQ(realigned(32, 16383, low).grid, 0);
  KernelFacts floor = f;  // the rows floor is the knob's (64 by default)
  EXPECT_EQ(floor.fwd_realign_rows_min_rows, 64);
  floor.fwd_realign_rows_min_rows = 32;
  EXPECT_GT(realigned(32, 16383, floor).grid, 0);
  EXPECT_EQ(realigned(31, 16383, floor).grid, 0);
  KernelFacts high = f;
  high.fwd_realign_long_rows_min_elements = high.fwd_realign_min_elements;
  high.fwd_realign_short_rows_min_elements = high.fwd_realign_min_elements;
  EXPECT_TRUE(realigned(256, 4095, high).realigned_lean);  // the lean rule alone
  high.fwd_realign_lean_rows_min_rows = 1 << 20;
  EXPECT_EQ(realigned(256, 4095, high).grid, 0);
  KernelFacts clusters_only = f;  // lean setting 1: no one-row plan is lean
  clusters_only.fwd_realign_lean = 1;
  EXPECT_EQ(realigned(32, 4095, clusters_only).grid, 0);
  EXPECT_TRUE(realigned(256, 4095, clusters_only).realigned);
}

TEST(LaunchConfig, RealignedLeanKernelOnlyWhereItsThreadsCoverTheRowsWindow) {
  KernelFacts f;
  f.sm_count = 132;
  EXPECT_EQ(f.fwd_realign_lean, 2);  // the default; 1: cluster plans only; 0: none
  KernelFacts off = f;
  off.fwd_realign_lean = 0;
  EXPECT_FALSE(normkit::cuda::plan_fwd_realigned(29, 17389, off, true).realigned_lean);
  for (const auto& [rows, hidden] : std::vector<std::pair<int64_t, int64_t>>{
           {29, 17389}, {1, 17389}, {4, 17389}, {2, 65537}, {3, 40001}, {61, 17389}}) {
    const LaunchConfig c = normkit::cuda::plan_fwd_realigned(rows, hidden, f, true);
    SCOPED_TRACE(c.describe());
    ASSERT_GT(c.grid, 0);
    EXPECT_TRUE(c.realigned_lean);
    // Every aligned vector a row overlaps (ceil(hidden / 8) + 1 at most) has a thread.
    EXPECT_GE(int64_t(c.threads_per_row) * c.items * c.cluster_size, (hidden + 7) / 8 + 1);
    EXPECT_NE(c.describe().find("realigned-lean"), std::string::npos);
    // Not for calls of a bias alone, nor with the general kernels forced.
    EXPECT_FALSE(normkit::cuda::plan_fwd_realigned(rows, hidden, f, false).realigned_lean);
    KernelFacts general = f;
    general.realign_weight_only = 0;
    EXPECT_FALSE(normkit::cuda::plan_fwd_realigned(rows, hidden, general, true).realigned_lean);
  }
  // Setting 1: not for rows one CTA holds (one row per CTA: no cluster). Not where a plan's
  // threads fall one vector short of the window.
  KernelFacts clusters_only = f;
  clusters_only.fwd_realign_lean = 1;
  EXPECT_FALSE(normkit::cuda::plan_fwd_realigned(4096, 4095, clusters_only, true).realigned_lean);
  LaunchConfig exact;
  exact.threads_per_row = 128;
  exact.items = 4;
  exact.cluster_size = 4;  // 2048 vectors
  EXPECT_TRUE(normkit::cuda::realigned_lean_covers(exact, 2047 * 8));
  EXPECT_FALSE(normkit::cuda::realigned_lean_covers(exact, 2048 * 8 - 1));
}

TEST(LaunchConfig, RealignedLeanKernelOnOneRowPlans) {
  KernelFacts f;
  f.sm_count = 132;
  EXPECT_EQ(f.fwd_realign_lean, 2);  // the default: one-row plans too
  const auto lean = [&](int64_t rows, int64_t hidden) {
    return normkit::cuda::plan_fwd_realigned(rows, hidden, f, /*weight_only_call=*/true);
  };
  // Plans that already cover the window keep their shape (200 x 3001: 128 x 3 = 384 vectors,
  // the window 377 at most); those one vector short are planned for 7 more columns (96 x 4095:
  // 512 vectors at most, the window up to 513). From 1M elements too: plan_fwd_realigned is the
  // one-row plan there (the backend tries the slots plan first: plan_fwd_realigned_rows).
  KernelFacts one = f;
  one.fwd_realign_lean = 1;
  for (const auto& [rows, hidden] : std::vector<std::pair<int64_t, int64_t>>{
           {200, 3001}, {96, 4095}, {64, 8191}, {320, 2047}, {4096, 4095}}) {
    const LaunchConfig c = lean(rows, hidden);
    SCOPED_TRACE(c.describe());
    ASSERT_GT(c.grid, 0);
    EXPECT_TRUE(c.realigned);
    EXPECT_TRUE(c.realigned_lean);
    EXPECT_EQ(c.cluster_size, 1);
    EXPECT_EQ(c.rows_per_block, 1);
    EXPECT_EQ(c.grid, rows);
    EXPECT_LE(c.items, normkit::cuda::kSmallItems);
    EXPECT_TRUE(normkit::cuda::realigned_lean_covers(c, hidden));
    // Setting 1 leaves these plans on rms_norm_fwd_realigned.
    EXPECT_FALSE(normkit::cuda::plan_fwd_realigned(rows, hidden, one, true).realigned_lean);
  }
  const LaunchConfig covered = lean(200, 3001);
  const LaunchConfig plain = normkit::cuda::plan_fwd_realigned(200, 3001, one, true);
  EXPECT_EQ(covered.threads_per_row, plain.threads_per_row);
  EXPECT_EQ(covered.items, plain.items);
  const LaunchConfig wider = lean(96, 4095);
  EXPECT_GE(int64_t(wider.threads_per_row) * wider.items, 513);
  // Not where two rows share a CTA (1024 x 1001: 32 threads per row), nor in calls with a bias
  // or a zero-centred weight (element by element there anyway), nor where 7 more columns would
  // need a cluster (4096 x 16383).
  const LaunchConfig shared = lean(1024, 1001);
  ASSERT_GT(shared.grid, 0);
  EXPECT_FALSE(shared.realigned_lean) << shared.describe();
  EXPECT_EQ(normkit::cuda::plan_fwd_realigned(200, 3001, f, false).grid, 0);
  const LaunchConfig longest = lean(4096, 16383);
  ASSERT_GT(longest.grid, 0);
  EXPECT_EQ(longest.cluster_size, 1);
  EXPECT_FALSE(longest.realigned_lean) << longest.describe();
}

TEST(LaunchConfig, RealignedLeanGeneralFormForAWeightWithExtras) {
  KernelFacts f;
  f.sm_count = 132;
  EXPECT_EQ(f.fwd_realign_lean_general, 2);  // the default
  // Which calls the general form may serve: at 2 any call but a weight alone; at 1 a weight
  // with extras; at 0 none.
  using normkit::cuda::fwd_lean_general_call;
  EXPECT_TRUE(fwd_lean_general_call(/*weight=*/true, /*weight_only_call=*/false, f));
  EXPECT_TRUE(fwd_lean_general_call(false, false, f));
  EXPECT_FALSE(fwd_lean_general_call(true, true, f));
  KernelFacts with_weight = f;
  with_weight.fwd_realign_lean_general = 1;
  EXPECT_TRUE(fwd_lean_general_call(true, false, with_weight));
  EXPECT_FALSE(fwd_lean_general_call(false, false, with_weight));
  KernelFacts none = f;
  none.fwd_realign_lean_general = 0;
  EXPECT_FALSE(fwd_lean_general_call(true, false, none));
  EXPECT_FALSE(fwd_lean_general_call(false, false, none));
  const auto general = [](int64_t rows, int64_t hidden, const KernelFacts& facts) {
    return normkit::cuda::plan_fwd_realigned(rows, hidden, facts, /*weight_only_call=*/false,
                                             /*lean_general_call=*/true);
  };
  // A weight with a bias or zero-centring: the plans of a weight alone, on the lean kernel,
  // below 1M elements (clusters that fill the device, rows one CTA holds past the thresholds)
  // and from 1M.
  for (const auto& [rows, hidden] : std::vector<std::pair<int64_t, int64_t>>{
           {29, 17389}, {1, 17389}, {2, 65537}, {96, 4095}, {64, 4095}, {320, 2047},
           {200, 3001}, {4096, 4095}}) {
    const LaunchConfig c = general(rows, hidden, f);
    const LaunchConfig alone = normkit::cuda::plan_fwd_realigned(rows, hidden, f, true);
    SCOPED_TRACE(c.describe());
    ASSERT_GT(c.grid, 0);
    EXPECT_TRUE(c.realigned_lean);
    EXPECT_EQ(c.grid, alone.grid);
    EXPECT_EQ(c.cluster_size, alone.cluster_size);
    EXPECT_EQ(c.threads_per_row, alone.threads_per_row);
    EXPECT_EQ(c.items, alone.items);
    EXPECT_TRUE(normkit::cuda::realigned_lean_covers(c, hidden));
  }
  // Below 1M where the lean kernel does not cover the plan (two rows per CTA: 700 x 1001), below
  // the thresholds, or the knob at 0 (or no lean kernel at all): element by element.
  EXPECT_TRUE(normkit::cuda::plan_fwd_realigned(700, 1001, f, true).realigned);
  EXPECT_EQ(general(700, 1001, f).grid, 0);
  EXPECT_EQ(general(512, 1001, f).grid, 0);
  EXPECT_EQ(general(8, 4095, f).grid, 0);
  KernelFacts off = f;
  off.fwd_realign_lean_general = 0;
  EXPECT_EQ(general(29, 17389, off).grid, 0);
  EXPECT_EQ(general(96, 4095, off).grid, 0);
  KernelFacts no_lean = f;
  no_lean.fwd_realign_lean = 0;
  EXPECT_EQ(general(29, 17389, no_lean).grid, 0);
  // From 1M elements the general form stays realigned either way: lean where it covers (above),
  // else rms_norm_fwd_realigned (two rows per CTA: 2048 x 1001), and with the knob at 0.
  const LaunchConfig pairs = general(2048, 1001, f);
  EXPECT_TRUE(pairs.realigned);
  EXPECT_FALSE(pairs.realigned_lean);
  EXPECT_GT(general(4096, 4095, off).grid, 0);
  EXPECT_FALSE(general(4096, 4095, off).realigned_lean);
}

// What RowChunk<VEC, true> assumes, checked by walking the kernel's own indexing: every row of
// every CTA is a real row, and every vector below `items` of every thread is whole and inside
// its CTA's chunk, the chunks covering the row once.
void expect_exact_indexing(const LaunchConfig& c, int64_t rows, int64_t hidden) {
  SCOPED_TRACE(c.describe());
  ASSERT_GT(c.cluster_size, 0);
  // no row past the end
  EXPECT_EQ(c.grid / c.cluster_size * c.rows_per_block * c.rows_per_group, rows);
  int64_t covered = 0;
  for (int rank = 0; rank < c.cluster_size; ++rank) {
    const int64_t col_begin = rank * c.cols_per_cta;
    const int64_t col_end = std::min(hidden, col_begin + c.cols_per_cta);
    for (int i = 0; i < c.items; ++i) {
      for (int t = 0; t < c.threads_per_row; ++t) {
        const int64_t col = col_begin + (int64_t(i) * c.threads_per_row + t) * c.vec;
        ASSERT_LE(col + c.vec, col_end) << "rank " << rank << " item " << i << " thread " << t;
        covered += c.vec;
      }
    }
  }
  EXPECT_EQ(covered, hidden);
}

TEST(LaunchConfig, ExactForwardPlansIndexOnlyWholeVectorsOfRealRows) {
  int exact = 0, general = 0;
  for (bool clusters : {true, false}) {
    KernelFacts f;
    f.cluster_launch = clusters;
    for (int64_t rows : {1, 3, 29, 272, 528, 529, 4096, 8192}) {
      for (int64_t hidden : {8, 128, 1000, 1024, 2048, 4096, 5120, 7168, 8192, 12288, 17389,
                             32768, 65536, 262144}) {
        for (int vec : {1, 2, 4, 8}) {
          SCOPED_TRACE(testing::Message() << rows << "x" << hidden << " vec " << vec);
          const LaunchConfig plans[] = {
              normkit::cuda::plan_fwd(rows, hidden, vec, f),
              normkit::cuda::plan_fwd_quant(rows, hidden, vec, 0, false, f),
              normkit::cuda::plan_fwd_quant(rows, hidden, vec, hidden % 128 == 0 ? 128 : 0, true, f),
              normkit::cuda::plan_fwd_quant(rows, hidden, vec, hidden % 32 == 0 ? 32 : 0, true, f)};
          // (Rows per group and register bounds are the plain forward's alone.)
          for (const LaunchConfig& q : {plans[1], plans[2], plans[3]}) {
            EXPECT_EQ(q.rows_per_group, 1);
            EXPECT_EQ(q.register_bound, 0);
          }
          for (const LaunchConfig& c : plans) {
            EXPECT_EQ(c.exact, normkit::cuda::chunks_exact(c, rows, hidden));
            if (c.exact) {
              expect_exact_indexing(c, rows, hidden);
              ++exact;
            } else {
              ++general;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(exact, 100);  // both kinds occur
  EXPECT_GT(general, 100);
}

TEST(LaunchConfig, ExactForwardAtTheSweepsShapesAsPlanned) {
  KernelFacts f;
  // One CTA (or row group) per row, every vector whole: the EXACT kernels.
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{8192, 8192}, {4096, 1024},
                                     {16384, 4096}, {4096, 12288}, {1024, 32768}, {272, 1024},
                                     {528, 1024}, {528, 2048}, {272, 4096}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << hidden);
    const LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, 8, f);
    EXPECT_TRUE(c.exact) << c.describe();
    EXPECT_NE(c.describe().find(" exact"), std::string::npos);
    EXPECT_TRUE(normkit::cuda::plan_fwd_quant(rows, hidden, 8, 128, true, f).exact);
  }
  // The quantized forward gives rows of 7168 columns (896 vectors) 7 warps of 4 vectors
  // rather than 256 threads, one vector of each of 32 threads empty (fwd_exact 2, the
  // default), also with blocks of 128; 5120 columns (640 vectors) 160 threads x 4; the plain
  // forward alike (KernelFacts::fwd_whole_warps).
  for (int block : {0, 128}) {
    const LaunchConfig seven = normkit::cuda::plan_fwd_quant(16384, 7168, 8, block, block > 0, f);
    EXPECT_TRUE(seven.exact) << seven.describe();
    EXPECT_EQ(seven.threads_per_row, 224);
    EXPECT_EQ(seven.items, 4);
    EXPECT_EQ(seven.grid, 16384);
    EXPECT_EQ(normkit::cuda::plan_fwd_quant(4096, 5120, 8, block, block > 0, f).threads_per_row, 160);
  }
  // As test_quant_fwd.cpp's shapes have it.
  EXPECT_EQ(normkit::cuda::plan_fwd_quant(37, 7168, 8, 128, true, f).threads_per_row, 224);
  EXPECT_EQ(normkit::cuda::plan_fwd_quant(3, 7168, 8, 0, false, f).threads_per_row, 224);
  EXPECT_TRUE(normkit::cuda::plan_fwd(16384, 7168, 8, f).exact);
  EXPECT_EQ(normkit::cuda::plan_fwd(16384, 7168, 8, f).threads_per_row, 224);
  EXPECT_EQ(normkit::cuda::plan_fwd(4096, 5120, 8, f).threads_per_row, 160);
  // 529 rows leave a row group short; 29 x 17389 is misaligned (vec 1) and split over a
  // cluster unevenly.
  EXPECT_FALSE(normkit::cuda::plan_fwd(4097, 1024, 8, f).exact);
  EXPECT_FALSE(normkit::cuda::plan_fwd(29, 17389, 1, f).exact);
  // NK_TUNE_FWD_EXACT=1 keeps the power-of-two counts; 0 turns the EXACT kernels off.
  f.fwd_exact = 1;
  EXPECT_FALSE(normkit::cuda::plan_fwd_quant(16384, 7168, 8, 0, false, f).exact);
  EXPECT_EQ(normkit::cuda::plan_fwd_quant(16384, 7168, 8, 0, false, f).threads_per_row, 256);
  EXPECT_TRUE(normkit::cuda::plan_fwd(8192, 8192, 8, f).exact);
  f.fwd_exact = 0;
  EXPECT_FALSE(normkit::cuda::plan_fwd(8192, 8192, 8, f).exact);
  EXPECT_FALSE(normkit::cuda::plan_fwd_quant(8192, 8192, 8, 128, true, f).exact);
}

// A pinned plan of BLOCK (scale_block 128, or 32) or MXFP8 (mxfp8; scale_block 32) as the backend
// pins it (quant_backend.cu's plan_quant_with_reads, without the read policy).
namespace {
LaunchConfig pinned_block_plan(int64_t rows, int64_t hidden, int scale_block, bool mxfp8,
                               const KernelFacts& f) {
  LaunchConfig c = normkit::cuda::plan_fwd_quant(rows, hidden, 8, scale_block, true, f);
  normkit::cuda::pin_quant_registers(
      c, rows, hidden, f, true,
      normkit::cuda::quant_e4m3_kernels(mxfp8 ? NK_QUANT_MXFP8 : NK_QUANT_BLOCK, scale_block,
                                        false, hidden, f));
  return c;
}

// BLOCK's or MXFP8's pinned plans at these shapes (4 vectors per thread) take the e4m3 kernel
// under `on`, in whole groups of a block's lanes per row chunk, and the runtime-format kernel
// under `off` or with quant_fixed_format 0.
void expect_e4m3_kernel_only_where_on(std::initializer_list<std::pair<int64_t, int64_t>> shapes,
                                      int scale_block, bool mxfp8, const KernelFacts& on,
                                      const KernelFacts& off) {
  KernelFacts runtime_format = on;
  runtime_format.quant_fixed_format = 0;
  for (const auto& [rows, hidden] : shapes) {
    const LaunchConfig c = pinned_block_plan(rows, hidden, scale_block, mxfp8, on);
    EXPECT_TRUE(c.pinned_registers) << c.describe();
    EXPECT_TRUE(c.full_items) << c.describe();
    EXPECT_TRUE(c.fixed_format) << c.describe();
    EXPECT_EQ(c.threads_per_row % (scale_block / c.vec), 0) << c.describe();
    EXPECT_NE(c.describe().find(" e4m3-variant"), std::string::npos) << c.describe();
    const LaunchConfig d = pinned_block_plan(rows, hidden, scale_block, mxfp8, off);
    EXPECT_FALSE(d.fixed_format) << d.describe();
    const LaunchConfig e = pinned_block_plan(rows, hidden, scale_block, mxfp8, runtime_format);
    EXPECT_FALSE(e.fixed_format) << e.describe();
  }
}
}  // namespace

// BLOCK's e4m3 kernel (128-column blocks) as quant_block_e4m3 says (by default without the fused
// residual, and with it from quant_block_e4m3_residual_min_columns; 2 always, 0 never), and only
// with quant_fixed_format (whose 0 means the runtime-format kernels); TOKEN's e4m3 kernel as
// before; never MXFP8 (blocks of 32: its own knob), BLOCK's other widths or TENSOR.
TEST(LaunchConfig, BlockTakesItsE4m3KernelAsItsKnobSays) {
  // (dynamic, scale_block, residual, hidden): TENSOR, TOKEN (block 0) or BLOCK
  auto e4m3 = [](bool dynamic, int block, bool residual, int64_t hidden, const KernelFacts& f) {
    const nk_quant_mode mode = !dynamic ? NK_QUANT_TENSOR : block ? NK_QUANT_BLOCK : NK_QUANT_TOKEN;
    return normkit::cuda::quant_e4m3_kernels(mode, block, residual, hidden, f);
  };
  KernelFacts off;
  off.quant_block_e4m3 = 0;
  EXPECT_TRUE(e4m3(true, 0, false, 4096, off));     // TOKEN
  EXPECT_FALSE(e4m3(true, 128, false, 4096, off));  // BLOCK
  const KernelFacts on;  // the default
  EXPECT_EQ(on.quant_block_e4m3, 1);
  EXPECT_EQ(on.quant_block_e4m3_residual_min_columns, 8192);
  EXPECT_TRUE(e4m3(true, 0, false, 4096, on));
  EXPECT_TRUE(e4m3(true, 0, true, 4096, on));  // TOKEN with the residual
  EXPECT_TRUE(e4m3(true, 128, false, 4096, on));
  EXPECT_TRUE(e4m3(true, 128, false, 1024, on));
  // With the residual from 8192 columns only (16384 x 4096 1.03x the time, 2048 x 16384 0.94x).
  EXPECT_FALSE(e4m3(true, 128, true, 4096, on));
  EXPECT_FALSE(e4m3(true, 128, true, 7168, on));
  EXPECT_TRUE(e4m3(true, 128, true, 8192, on));
  EXPECT_TRUE(e4m3(true, 128, true, 65536, on));
  EXPECT_FALSE(e4m3(true, 32, false, 4096, on));  // BLOCK of 32
  EXPECT_FALSE(e4m3(true, 64, false, 4096, on));
  EXPECT_FALSE(e4m3(false, 0, false, 4096, on));  // TENSOR
  KernelFacts also_residual;
  also_residual.quant_block_e4m3 = 2;
  EXPECT_TRUE(e4m3(true, 128, true, 4096, also_residual));
  EXPECT_TRUE(e4m3(true, 128, false, 4096, also_residual));
  EXPECT_FALSE(e4m3(true, 64, true, 4096, also_residual));
  KernelFacts residual_from_1024;
  residual_from_1024.quant_block_e4m3_residual_min_columns = 1024;
  EXPECT_TRUE(e4m3(true, 128, true, 1024, residual_from_1024));
  EXPECT_FALSE(e4m3(true, 128, true, 896, residual_from_1024));
  // The per-block sweep's plans (8192 x 8192, 4096 x 4096, the wide rows) take it.
  expect_e4m3_kernel_only_where_on({{8192, 8192}, {4096, 4096}, {1024, 32768}}, 128, false, on,
                                   off);
}

// MXFP8's e4m3 kernel (32-column blocks) under quant_mxfp8_e4m3 (the default; with the fused
// residual too), and only with quant_fixed_format; not BLOCK's blocks of 32 (the same
// scale_block, BLOCK's rule), nor BLOCK's of 128 when only this knob is on; TOKEN's as before.
TEST(LaunchConfig, Mxfp8TakesItsE4m3KernelUnderItsKnob) {
  // (dynamic, scale_block, mxfp8, residual) at 4096 columns: TENSOR, TOKEN (block 0), BLOCK or
  // MXFP8
  auto e4m3 = [](bool dynamic, int block, bool mxfp8, bool residual, const KernelFacts& f) {
    const nk_quant_mode mode = !dynamic ? NK_QUANT_TENSOR
                               : mxfp8  ? NK_QUANT_MXFP8
                               : block  ? NK_QUANT_BLOCK
                                        : NK_QUANT_TOKEN;
    return normkit::cuda::quant_e4m3_kernels(mode, block, residual, 4096, f);
  };
  KernelFacts off;
  off.quant_mxfp8_e4m3 = 0;
  EXPECT_FALSE(e4m3(true, 32, true, false, off));
  KernelFacts on;  // the default
  EXPECT_EQ(on.quant_mxfp8_e4m3, 1);
  on.quant_block_e4m3 = 0;
  EXPECT_TRUE(e4m3(true, 32, true, false, on));
  EXPECT_TRUE(e4m3(true, 32, true, true, on));     // with the residual
  EXPECT_FALSE(e4m3(true, 32, false, false, on));   // BLOCK of 32
  EXPECT_FALSE(e4m3(true, 128, false, false, on));  // BLOCK of 128: quant_block_e4m3's
  EXPECT_TRUE(e4m3(true, 0, false, false, on));     // TOKEN
  EXPECT_FALSE(e4m3(false, 0, false, false, on));   // TENSOR
  // The MXFP8 sweep's plans (8192 x 4096, 8192 x 8192 and the wide rows) take it; without the
  // knob or with quant_fixed_format 0 they keep the runtime-format kernel.
  expect_e4m3_kernel_only_where_on({{8192, 4096}, {8192, 8192}, {4096, 4096}, {1024, 32768}}, 32,
                                   true, on, off);
}

TEST(LaunchConfig, PinnedQuantRegistersTakeTheFewestWholeWarpsAtSetting4) {
  KernelFacts f;
  f.fwd_exact = 3;
  LaunchConfig unpinned = normkit::cuda::plan_fwd_quant(4096, 12288, 8, 0, false, f);
  normkit::cuda::pin_quant_registers(unpinned, 4096, 12288, f);
  EXPECT_FALSE(unpinned.pinned_registers);
  EXPECT_EQ(unpinned.threads_per_row, 512) << unpinned.describe();
  EXPECT_EQ(unpinned.items, 3);
  f.fwd_exact = 4;
  // 12288 columns: 384 x 4, whatever the scales (blocks of 128 and 32 span 16 and 4 lanes).
  for (int block : {0, 32, 128}) {
    LaunchConfig c = normkit::cuda::plan_fwd_quant(4096, 12288, 8, block, block > 0, f);
    normkit::cuda::pin_quant_registers(c, 4096, 12288, f);
    SCOPED_TRACE(c.describe());
    EXPECT_TRUE(c.pinned_registers);
    EXPECT_NE(c.describe().find(" pinned"), std::string::npos);
    EXPECT_EQ(c.threads_per_row, 384);
    EXPECT_EQ(c.items, 4);
    EXPECT_EQ(c.grid, 4096);
    EXPECT_TRUE(c.exact);
    EXPECT_TRUE(c.full_items);  // 4 = kSmallItems vectors per thread
    EXPECT_NE(c.describe().find(" full-items"), std::string::npos);
    EXPECT_FALSE(c.fixed_format);  // (e4m3 kernels for TOKEN only)
    expect_covers(c, 4096, 12288, normkit::cuda::kSmallItems, false, f);
  }
  // e4m3 kernels where the launcher has them (TOKEN's), by default; without the knob, the
  // runtime-format kernels; never on plans that are not pinned.
  {
    LaunchConfig c = normkit::cuda::plan_fwd_quant(4096, 12288, 8, 0, true, f);
    normkit::cuda::pin_quant_registers(c, 4096, 12288, f, false, true);
    EXPECT_TRUE(c.pinned_registers);
    EXPECT_TRUE(c.fixed_format);
    EXPECT_NE(c.describe().find(" e4m3-variant"), std::string::npos) << c.describe();
    KernelFacts off = f;
    off.quant_fixed_format = 0;
    LaunchConfig d = normkit::cuda::plan_fwd_quant(4096, 12288, 8, 0, true, off);
    normkit::cuda::pin_quant_registers(d, 4096, 12288, off, false, true);
    EXPECT_TRUE(d.pinned_registers);
    EXPECT_FALSE(d.fixed_format);
    KernelFacts unpinned = f;
    unpinned.fwd_exact = 3;
    LaunchConfig e = normkit::cuda::plan_fwd_quant(4096, 12288, 8, 0, true, unpinned);
    normkit::cuda::pin_quant_registers(e, 4096, 12288, unpinned, false, true);
    EXPECT_FALSE(e.pinned_registers);
    EXPECT_FALSE(e.fixed_format);
  }
  // Full items: only where the launcher has such kernels (not TOKEN's) and the knob allows.
  {
    LaunchConfig c = normkit::cuda::plan_fwd_quant(4096, 12288, 8, 0, true, f);
    normkit::cuda::pin_quant_registers(c, 4096, 12288, f, false);
    EXPECT_TRUE(c.pinned_registers);
    EXPECT_FALSE(c.full_items);
    KernelFacts off = f;
    off.quant_full_items = 0;
    LaunchConfig d = normkit::cuda::plan_fwd_quant(4096, 12288, 8, 0, false, off);
    normkit::cuda::pin_quant_registers(d, 4096, 12288, off);
    EXPECT_TRUE(d.pinned_registers);
    EXPECT_FALSE(d.full_items);
  }
  // Wide rows split over a cluster (1024 x 32768: four CTAs of 256 x 4 vectors; 256 x 65536:
  // eight): pinned with quant_pin_clusters (the default), not without.
  for (const auto& [rows, hidden, dynamic] :
       {std::tuple<int64_t, int64_t, bool>{1024, 32768, true}, {256, 65536, false}}) {
    LaunchConfig c = normkit::cuda::plan_fwd_quant(rows, hidden, 8, 0, dynamic, f);
    ASSERT_GT(c.cluster_size, 1) << c.describe();
    LaunchConfig unpinned = c;
    normkit::cuda::pin_quant_registers(c, rows, hidden, f, !dynamic);
    EXPECT_TRUE(c.pinned_registers) << c.describe();
    EXPECT_TRUE(c.exact) << c.describe();
    EXPECT_EQ(int64_t(c.threads_per_row) * c.items * c.vec * c.cluster_size, hidden);
    KernelFacts off = f;
    off.quant_pin_clusters = 0;
    normkit::cuda::pin_quant_registers(unpinned, rows, hidden, off, !dynamic);
    EXPECT_FALSE(unpinned.pinned_registers) << unpinned.describe();
  }
  // Fewer vectors per thread than kSmallItems (1536 columns: 64 threads x 3): pinned, not full.
  {
    LaunchConfig c = normkit::cuda::plan_fwd_quant(8192, 1536, 8, 0, false, f);
    normkit::cuda::pin_quant_registers(c, 8192, 1536, f);
    EXPECT_TRUE(c.pinned_registers) << c.describe();
    EXPECT_LT(c.items, normkit::cuda::kSmallItems) << c.describe();
    EXPECT_FALSE(c.full_items) << c.describe();
  }
  // Already at 4 vectors per thread (8192 and 7168 columns): pinned, shape unchanged.
  for (int64_t hidden : {8192, 7168, 2048}) {
    const LaunchConfig before = normkit::cuda::plan_fwd_quant(8192, hidden, 8, 0, false, f);
    LaunchConfig c = before;
    normkit::cuda::pin_quant_registers(c, 8192, hidden, f);
    EXPECT_TRUE(c.pinned_registers) << c.describe();
    EXPECT_EQ(c.threads_per_row, before.threads_per_row);
    EXPECT_EQ(c.rows_per_block, before.rows_per_block);
    EXPECT_EQ(c.grid, before.grid);
  }
  // Not pinned: the large budget (32768 columns, 8 vectors: one CTA per row without
  // quant_wide_row_threads), rows not covered exactly, vectors narrower than 16 bytes of 16-bit x.
  KernelFacts one_cta = f;
  one_cta.quant_wide_row_threads = 0;
  for (const auto& [rows, hidden, vec] :
       {std::tuple<int64_t, int64_t, int>{1024, 32768, 8}, {4097, 1000, 8}, {64, 4100, 4}}) {
    LaunchConfig c = normkit::cuda::plan_fwd_quant(rows, hidden, vec, 0, false, one_cta);
    normkit::cuda::pin_quant_registers(c, rows, hidden, f);
    EXPECT_FALSE(c.pinned_registers) << rows << "x" << hidden << ": " << c.describe();
  }
}

// Quantized rows past 16384 bf16 columns split over clusters of 256-thread CTAs in every mode
// (KernelFacts::quant_wide_row_threads): the very plans that NK_TUNE_FWD_SPLIT_WIDE_ROWS=1 with
// NK_TUNE_FWD_CLUSTER_THREADS=256 gave in the fourteenth session's measurement; narrower rows
// keep their plans.
TEST(LaunchConfig, QuantWideRowsSplitOverClustersOf256ThreadCtas) {
  const KernelFacts f;
  KernelFacts measured = f;  // the knobs of that measurement, without this setting
  measured.quant_wide_row_threads = 0;
  measured.fwd_split_wide_rows = 1;
  measured.fwd_cluster_threads = 256;
  KernelFacts before = f;
  before.quant_wide_row_threads = 0;
  for (const auto& [rows, hidden] :
       {std::pair<int64_t, int64_t>{1024, 32768}, {256, 65536}, {600, 32768}, {2048, 24576}}) {
    for (const auto& [block, dynamic] :
         {std::pair<int, bool>{0, false}, {0, true}, {128, true}, {32, true}}) {
      SCOPED_TRACE(testing::Message() << rows << "x" << hidden << " block " << block);
      const LaunchConfig c = normkit::cuda::plan_fwd_quant(rows, hidden, 8, block, dynamic, f);
      EXPECT_EQ(c.describe(),
                normkit::cuda::plan_fwd_quant(rows, hidden, 8, block, dynamic, measured).describe());
      EXPECT_GT(c.cluster_size, 1);
      EXPECT_EQ(c.threads_per_row, 256);
      EXPECT_TRUE(c.exact) << c.describe();
    }
  }
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{4096, 12288}, {2048, 16384},
                                     {8192, 8192}, {32768, 8192}, {16384, 7168}}) {
    for (const auto& [block, dynamic] : {std::pair<int, bool>{0, false}, {0, true}, {128, true}}) {
      SCOPED_TRACE(testing::Message() << rows << "x" << hidden << " block " << block);
      EXPECT_EQ(normkit::cuda::plan_fwd_quant(rows, hidden, 8, block, dynamic, f).describe(),
                normkit::cuda::plan_fwd_quant(rows, hidden, 8, block, dynamic, before).describe());
    }
  }
  // float32 x (4-element vectors) keeps its plans; so does fwd_split_wide_rows 0 ("never").
  EXPECT_EQ(normkit::cuda::plan_fwd_quant(1024, 32768, 4, 0, false, f).describe(),
            normkit::cuda::plan_fwd_quant(1024, 32768, 4, 0, false, before).describe());
  KernelFacts never = f;
  never.fwd_split_wide_rows = 0;
  EXPECT_EQ(normkit::cuda::plan_fwd_quant(1024, 32768, 8, 0, true, never).cluster_size, 1);
}

// The ticketed grid's order (transpose_tickets.h): every forward unit and every (band, piece)
// transpose exactly once, each band's forward units before its transposes in blockIdx order
// (a transpose unit waits only for lower blockIdx), and the lag as planned.
TEST(LaunchConfig, TransposeTicketsCoverEveryUnitOnceInADeadlockFreeOrder) {
  using normkit::cuda::kBandRows;
  struct Case {
    int64_t rows, hidden;
    int threads, slices, rows_per_block;
    int64_t resident;
    int lag_percent;
  };
  for (const Case& k :
       {Case{8192, 8192, 256, 1, 1, 528, 100}, Case{4230, 1024, 256, 1, 8, 1056, 100},
        Case{1000, 7168, 224, 2, 1, 660, 100}, Case{520, 12288, 384, 1, 1, 396, 250},
        Case{64, 4096, 256, 2, 2, 528, 100}, Case{100, 2048, 256, 1, 4, 528, 0},
        Case{32768, 8192, 256, 2, 1, 528, 1000}, Case{4096, 2048, 256, 2, 4, 528, 50}}) {
    SCOPED_TRACE(testing::Message() << k.rows << "x" << k.hidden << " lag " << k.lag_percent);
    const int64_t forward_grid = (k.rows + k.rows_per_block - 1) / k.rows_per_block;
    const auto t = normkit::cuda::plan_transpose_tickets(k.rows, k.hidden, k.threads, k.slices,
                                                         k.rows_per_block, forward_grid,
                                                         k.resident, k.lag_percent);
    const int64_t bands = (k.rows + kBandRows - 1) / kBandRows;
    const int64_t units = kBandRows / k.rows_per_block;
    const int64_t piece_cols = int64_t(k.threads) * k.slices;
    const int64_t pieces = (k.hidden + piece_cols - 1) / piece_cols;
    ASSERT_EQ(t.bands, bands);
    ASSERT_EQ(t.units_per_band, units);
    ASSERT_EQ(t.pieces_per_band, pieces);
    ASSERT_EQ(t.piece_cols, piece_cols);
    ASSERT_EQ(t.grid, bands * (units + pieces));
    const int64_t wanted_lag =
        (k.resident * k.rows_per_block * k.lag_percent / 100 + kBandRows - 1) / kBandRows;
    EXPECT_EQ(t.lag, std::min(wanted_lag, bands));
    std::vector<int> forward_seen(static_cast<size_t>(bands * units), 0);
    std::vector<int> piece_seen(static_cast<size_t>(bands * pieces), 0);
    std::vector<int64_t> forward_done(static_cast<size_t>(bands), 0);  // per band, so far
    for (uint32_t b = 0; b < t.grid; ++b) {
      const normkit::cuda::TicketUnit u = t.unit(b);
      ASSERT_LT(u.band, bands) << "CTA " << b;
      if (u.forward) {
        ASSERT_LT(u.index, bands * units) << "CTA " << b;
        EXPECT_EQ(u.band, u.index / units) << "CTA " << b;
        ++forward_seen[u.index];
        ++forward_done[u.band];
      } else {
        ASSERT_LT(u.index, pieces) << "CTA " << b;
        ++piece_seen[u.band * pieces + u.index];
        EXPECT_EQ(forward_done[u.band], units) << "CTA " << b << " waits for a later CTA";
      }
    }
    for (int n : forward_seen) EXPECT_EQ(n, 1);
    for (int n : piece_seen) EXPECT_EQ(n, 1);
  }
  // Counts past 32 bits: no plan.
  EXPECT_EQ(normkit::cuda::plan_transpose_tickets(int64_t(1) << 40, 1024, 256, 1, 8,
                                                  (int64_t(1) << 40) / 8, 528, 100)
                .grid,
            0u);
}

// A shape for plan_fwd_quant_transposed and the CTAs per 32-row run it should get.
struct FusedExpect {
  int64_t rows, hidden;
  int vec, x_bytes, cluster;
};

// What every fused-transpose plan must hold: e's cluster, `buffers` tiles of whole rows within
// the budget, one cluster per run, at most kSmallItems whole warps' vectors per thread.
void expect_fused_plan(const KernelFacts& f, const FusedExpect& e, int buffers) {
  const LaunchConfig c =
      normkit::cuda::plan_fwd_quant_transposed(e.rows, e.hidden, e.vec, e.x_bytes, f);
  SCOPED_TRACE(c.describe());
  EXPECT_EQ(c.cluster_size, e.cluster);
  EXPECT_EQ(c.tile_buffers, buffers);
  EXPECT_EQ(c.tile_rows * c.cluster_size, normkit::cuda::kTransposedRun);
  EXPECT_EQ(c.grid, (e.rows + 31) / 32 * e.cluster);
  EXPECT_EQ(c.smem_bytes, buffers * c.tile_rows * e.hidden);
  EXPECT_LE(c.smem_bytes, normkit::cuda::kTransposedTileBytes);
  EXPECT_LE(c.items, normkit::cuda::kSmallItems);
  EXPECT_LE(c.threads_per_row, 512);
  EXPECT_EQ(c.threads_per_row % 32, 0);
  EXPECT_GE(int64_t(c.threads_per_row) * c.items * c.vec, e.hidden);
  EXPECT_NE(c.describe().find("tile_rows="), std::string::npos);
  EXPECT_EQ(c.describe().find("persistent") != std::string::npos, buffers == 2);
}

TEST(LaunchConfig, FusedTransposeSharesEach32RowRunOverAClusterThatFillsTheDevice) {
  KernelFacts f;
  // Settings 1 and 2 only (measured slower than the two kernels); 3 is the ticketed grid.
  for (int setting : {0, 3}) {
    f.quant_fused_transpose = setting;
    EXPECT_EQ(normkit::cuda::plan_fwd_quant_transposed(64, 1024, 8, 2, f).grid, 0);
  }
  f.quant_fused_transpose = 1;
  // As test_quant_fwd.cpp's TransposedOutputOfWholeRuns has them, and the sweep's shapes: the
  // fewest CTAs per run whose codes fit the budget (8192 columns: 4 x 8 rows), more while the
  // runs number under the SMs (132 here).
  for (const FusedExpect& e :
       {FusedExpect{64, 1024, 8, 2, 8}, FusedExpect{80, 2048, 8, 2, 8},
        FusedExpect{48, 8192, 8, 2, 8}, FusedExpect{32, 4096, 8, 2, 8},
        FusedExpect{64, 992, 4, 4, 8}, FusedExpect{4224, 1024, 8, 2, 1},
        FusedExpect{4100, 4096, 8, 2, 2}, FusedExpect{2100, 8192, 8, 2, 4},
        FusedExpect{8192, 8192, 8, 2, 4}, FusedExpect{4096, 12288, 8, 2, 4},
        FusedExpect{16384, 7168, 8, 2, 2}, FusedExpect{2048, 16384, 8, 2, 8},
        FusedExpect{8192, 2048, 8, 2, 1}}) {
    expect_fused_plan(f, e, 1);
  }
  // Not: narrower vectors, hidden not a multiple of 32, rows over 4 vectors per thread.
  EXPECT_EQ(normkit::cuda::plan_fwd_quant_transposed(64, 1024, 4, 2, f).grid, 0);
  EXPECT_EQ(normkit::cuda::plan_fwd_quant_transposed(64, 1000, 4, 4, f).grid, 0);
  EXPECT_EQ(normkit::cuda::plan_fwd_quant_transposed(64, 1001, 8, 2, f).grid, 0);
  EXPECT_EQ(normkit::cuda::plan_fwd_quant_transposed(64, 32768, 8, 2, f).grid, 0);
  // Without clusters: whole runs in one CTA only where their codes fit.
  f.cluster_launch = false;
  EXPECT_EQ(normkit::cuda::plan_fwd_quant_transposed(64, 1024, 8, 2, f).cluster_size, 1);
  EXPECT_EQ(normkit::cuda::plan_fwd_quant_transposed(64, 8192, 8, 2, f).grid, 0);
}

TEST(LaunchConfig, PersistentFusedTransposeFitsTwoTilesPerCta) {
  KernelFacts f;
  f.quant_fused_transpose = 2;
  // The fewest CTAs (2 at least: the kernel's split barriers) whose two tiles fit 112 KB; no
  // more for the fill (the launcher caps the grid to the resident clusters).
  for (const FusedExpect& e :
       {FusedExpect{64, 1024, 8, 2, 2}, FusedExpect{64, 992, 4, 4, 2},
        FusedExpect{4096, 4096, 8, 2, 4}, FusedExpect{16384, 7168, 8, 2, 4},
        FusedExpect{8192, 8192, 8, 2, 8}, FusedExpect{4096, 12288, 8, 2, 8},
        FusedExpect{4230, 1024, 8, 2, 2}, FusedExpect{2100, 8192, 8, 2, 8}}) {
    expect_fused_plan(f, e, 2);
  }
  // Two tiles of 16384 columns do not fit even at 4 rows each; no clusters, no plan.
  EXPECT_EQ(normkit::cuda::plan_fwd_quant_transposed(2048, 16384, 8, 2, f).grid, 0);
  f.cluster_launch = false;
  EXPECT_EQ(normkit::cuda::plan_fwd_quant_transposed(64, 1024, 8, 2, f).grid, 0);
}

// The plain forward's rows that one CTA cannot hold split over 256-thread CTAs
// (KernelFacts::fwd_wide_row_threads): the plan measured as NK_TUNE_FWD_CLUSTER_THREADS=256
// (256 x 65536: eight CTAs of 256 x 4 vectors); rows one CTA holds, and rows past 8 such CTAs
// (with fwd_wide_row_max_cluster 8), keep their plans.
TEST(LaunchConfig, PlainForwardOfWideRowsOn256ThreadClusters) {
  KernelFacts f;
  f.fwd_wide_row_max_cluster = 8;
  f.fwd_wide_row_large_items = 1;  // (2 halves these CTAs where the launch fills the SMs)
  KernelFacts before = f;
  before.fwd_wide_row_threads = 0;
  KernelFacts measured = before;
  measured.fwd_cluster_threads = 256;
  const LaunchConfig c = normkit::cuda::plan_fwd(256, 65536, 8, f, 2);
  SCOPED_TRACE(c.describe());
  EXPECT_EQ(c.plan, RowPlan::kCluster);
  EXPECT_EQ(c.cluster_size, 8);
  EXPECT_EQ(c.threads_per_row, 256);
  EXPECT_EQ(c.items, 4);
  EXPECT_TRUE(c.exact);
  EXPECT_EQ(c.describe(), normkit::cuda::plan_fwd(256, 65536, 8, measured, 2).describe());
  EXPECT_EQ(normkit::cuda::plan_fwd(256, 65536, 8, before, 2).cluster_size, 4);
  for (const auto& [rows, hidden] :
       {std::pair<int64_t, int64_t>{1024, 32768}, {300, 32768}, {2048, 16384}, {1024, 131072},
        {512, 262144}, {29, 17389}}) {
    for (int vec : {1, 8}) {
      EXPECT_EQ(normkit::cuda::plan_fwd(rows, hidden, vec, f, 2).describe(),
                normkit::cuda::plan_fwd(rows, hidden, vec, before, 2).describe())
          << rows << "x" << hidden << " vec " << vec;
    }
  }
}

// CTAs of several short rows: up to 128 threads in the quantized forward (quant_cta_threads),
// 256 in the plain one (fwd_cta_threads), as measured.
TEST(LaunchConfig, QuantizedForwardTakesSmallerCtasOfShortRows) {
  KernelFacts f;
  for (bool dynamic : {false, true}) {
    LaunchConfig c = normkit::cuda::plan_fwd_quant(4096, 4096, 8, 0, dynamic, f);
    normkit::cuda::pin_quant_registers(c, 4096, 4096, f, !dynamic, dynamic);
    EXPECT_EQ(c.threads_per_row, 128) << c.describe();
    EXPECT_EQ(c.rows_per_block, 1) << c.describe();
    EXPECT_EQ(c.grid, 4096);
    LaunchConfig d = normkit::cuda::plan_fwd_quant(8192, 2048, 8, 128, dynamic, f);
    normkit::cuda::pin_quant_registers(d, 8192, 2048, f, !dynamic, dynamic);
    EXPECT_EQ(d.threads_per_row * d.rows_per_block, 128) << d.describe();
    EXPECT_EQ(d.grid * d.rows_per_block, 8192);
    KernelFacts wider = f;
    wider.quant_cta_threads = 256;
    LaunchConfig e = normkit::cuda::plan_fwd_quant(4096, 4096, 8, 0, dynamic, wider);
    normkit::cuda::pin_quant_registers(e, 4096, 4096, wider, !dynamic, dynamic);
    EXPECT_EQ(e.rows_per_block, 2) << e.describe();
  }
  const LaunchConfig plain = normkit::cuda::plan_fwd(4096, 4096, 8, f, 2);
  EXPECT_EQ(plain.threads_per_row * plain.rows_per_block, 256) << plain.describe();
}

// The CTA's amax by ticket only where the knob asks for it, amax is not added per warp, and the
// rows span warps (the row sum's barrier orders the ticket's zeroing); printed by --explain.
TEST(LaunchConfig, AmaxTicketOnlyWhereRowsSpanWarps) {
  KernelFacts f;
  const auto planned = [&](int64_t rows, int64_t hidden) {
    LaunchConfig c = normkit::cuda::plan_fwd_quant(rows, hidden, 8, 128, true, f);
    normkit::cuda::pin_quant_registers(c, rows, hidden, f, true, true);
    normkit::cuda::apply_amax_ticket(c, f);
    return c;
  };
  f.quant_amax_ticket = 0;
  EXPECT_FALSE(planned(8192, 8192).amax_ticket);
  f.quant_amax_ticket = 1;
  const LaunchConfig wide = planned(8192, 8192);
  EXPECT_GT(wide.threads_per_row, 32);
  EXPECT_TRUE(wide.amax_ticket) << wide.describe();
  EXPECT_NE(wide.describe().find(" amax-ticket"), std::string::npos);
  const LaunchConfig narrow = planned(65536, 128);
  EXPECT_LE(narrow.threads_per_row, 32) << narrow.describe();
  EXPECT_FALSE(narrow.amax_ticket) << narrow.describe();
  f.quant_amax_per_warp = 1;
  const LaunchConfig per_warp = planned(8192, 8192);
  EXPECT_TRUE(per_warp.amax_per_warp);
  EXPECT_FALSE(per_warp.amax_ticket) << per_warp.describe();
}

// MXFP8's items in pairs only on its e4m3 kernel (fixed_format) and as far as the knob asks:
// by default where one CTA holds each row, with 2 on clusters too; printed by --explain.
TEST(LaunchConfig, Mxfp8PairsOnlyOnItsE4m3Kernel) {
  KernelFacts f;
  const auto planned = [&](nk_quant_mode mode, bool e4m3_kernels, int64_t rows = 8192,
                           int64_t hidden = 8192) {
    const int block = mode == NK_QUANT_MXFP8 ? 32 : 128;
    LaunchConfig c = normkit::cuda::plan_fwd_quant(rows, hidden, 8, block, true, f);
    normkit::cuda::pin_quant_registers(c, rows, hidden, f, true, e4m3_kernels);
    normkit::cuda::apply_mxfp8_pairs(c, mode, f);
    return c;
  };
  EXPECT_EQ(f.quant_mxfp8_pairs, 1);  // the default
  const LaunchConfig pairs = planned(NK_QUANT_MXFP8, true);
  EXPECT_EQ(pairs.cluster_size, 1) << pairs.describe();
  EXPECT_TRUE(pairs.fixed_format) << pairs.describe();
  EXPECT_TRUE(pairs.mx_pairs) << pairs.describe();
  EXPECT_NE(pairs.describe().find(" items-in-pairs"), std::string::npos);
  EXPECT_FALSE(planned(NK_QUANT_MXFP8, false).mx_pairs);  // (the runtime-format kernel)
  EXPECT_FALSE(planned(NK_QUANT_BLOCK, true).mx_pairs);   // (BLOCK's pairs are its kernel's own)
  // 256 x 65536: a row over a cluster's CTAs, item by item unless the knob is 2.
  const LaunchConfig clustered = planned(NK_QUANT_MXFP8, true, 256, 65536);
  EXPECT_GT(clustered.cluster_size, 1) << clustered.describe();
  EXPECT_TRUE(clustered.fixed_format) << clustered.describe();
  EXPECT_FALSE(clustered.mx_pairs) << clustered.describe();
  f.quant_mxfp8_pairs = 2;
  EXPECT_TRUE(planned(NK_QUANT_MXFP8, true, 256, 65536).mx_pairs);
  EXPECT_TRUE(planned(NK_QUANT_MXFP8, true).mx_pairs);
  f.quant_mxfp8_pairs = 0;
  EXPECT_FALSE(planned(NK_QUANT_MXFP8, true).mx_pairs);
  EXPECT_FALSE(planned(NK_QUANT_MXFP8, true, 256, 65536).mx_pairs);
}

// The row sum by quads (the default) only where the knob allows it, on pinned plans of 4 vectors
// per thread (full-items; TOKEN's folded kernel at that count) whose rows span warps; printed by
// --explain.
TEST(LaunchConfig, RowSumQuadsOnlyOnPinnedRowsOfSeveralWarps) {
  KernelFacts f;
  const auto planned = [&](nk_quant_mode mode, int64_t rows, int64_t hidden, bool pin = true) {
    const int block = mode == NK_QUANT_MXFP8 ? 32 : 128;
    LaunchConfig c = normkit::cuda::plan_fwd_quant(rows, hidden, 8, block,
                                                   mode != NK_QUANT_TENSOR, f);
    if (pin) normkit::cuda::pin_quant_registers(c, rows, hidden, f, mode != NK_QUANT_TOKEN, false);
    normkit::cuda::apply_row_sum_quads(c, mode, f);
    return c;
  };
  EXPECT_EQ(f.quant_row_sum_quads, 1);  // the default
  f.quant_row_sum_quads = 0;
  EXPECT_FALSE(planned(NK_QUANT_BLOCK, 8192, 8192).row_sum_quads);
  f.quant_row_sum_quads = 1;
  for (nk_quant_mode mode : {NK_QUANT_TENSOR, NK_QUANT_TOKEN, NK_QUANT_BLOCK, NK_QUANT_MXFP8}) {
    const LaunchConfig c = planned(mode, 8192, 8192);
    EXPECT_TRUE(c.pinned_registers && c.items == 4) << c.describe();
    EXPECT_GT(c.threads_per_row, 32) << c.describe();
    EXPECT_TRUE(c.row_sum_quads) << mode << ": " << c.describe();
    EXPECT_NE(c.describe().find(" row-sum-quads"), std::string::npos);
  }
  EXPECT_FALSE(planned(NK_QUANT_BLOCK, 8192, 8192, /*pin=*/false).row_sum_quads);
  const LaunchConfig three_items = planned(NK_QUANT_BLOCK, 6, 1536);  // 64 threads x 3 vectors
  EXPECT_TRUE(three_items.pinned_registers && !three_items.full_items) << three_items.describe();
  EXPECT_FALSE(three_items.row_sum_quads) << three_items.describe();
  EXPECT_FALSE(planned(NK_QUANT_TOKEN, 6, 1536).row_sum_quads);
  const LaunchConfig one_warp = planned(NK_QUANT_TENSOR, 8192, 256);  // 32 vectors: one warp
  EXPECT_LE(one_warp.threads_per_row, 32) << one_warp.describe();
  EXPECT_FALSE(one_warp.row_sum_quads) << one_warp.describe();
}

// The backward's row sum by quads (the default) only under its knob, on lean plans whose rows
// span warps (the pipelined kernel's plans under their own knob: the next test).
TEST(LaunchConfig, BwdRowSumQuadsOnlyOnLeanRowsOfSeveralWarps) {
  KernelFacts f;
  LaunchConfig c;
  c.lean = true;
  c.threads_per_row = 256;
  const auto apply = [&](bool sixteen_bit = true, bool dbias = false) {
    normkit::cuda::apply_bwd_row_sum_quads(c, sixteen_bit, dbias, f);
    return c.row_sum_quads;
  };
  EXPECT_EQ(f.bwd_row_sum_quads, 1);  // the default
  f.bwd_row_sum_quads = 0;
  EXPECT_FALSE(apply());
  f.bwd_row_sum_quads = 1;
  EXPECT_TRUE(apply());
  EXPECT_NE(c.describe().find(" row-sum-quads"), std::string::npos);
  c.threads_per_row = 32;  // one warp: its shuffles alone
  EXPECT_FALSE(apply());
  c.threads_per_row = 256;
  c.lean = false;  // rms_norm_bwd_pipelined: its own knob
  EXPECT_FALSE(apply());
}

// The pipelined backward's row sum by quads (the default) under its own knob, on 16-bit calls
// without dbias: the split rows of 12288-65536 columns (clusters) and the unsplit rows that the
// lean kernel leaves.
TEST(LaunchConfig, BwdPipelinedRowSumQuadsOnSixteenBitCallsWithoutDbias) {
  KernelFacts f;
  EXPECT_EQ(f.bwd_pipelined_row_sum_quads, 1);  // the default
  f.bwd_pipelined_row_sum_quads = 0;
  const auto planned = [&](int64_t rows, int64_t hidden, bool sixteen_bit = true,
                           bool dbias = false) {
    // (4 staged bytes per column: 16-bit x and dy.)
    LaunchConfig c = normkit::cuda::plan_bwd(rows, hidden, 8, f, 4);
    c.lean = normkit::cuda::bwd_lean_plan(c, hidden, f);
    normkit::cuda::apply_bwd_row_sum_quads(c, sixteen_bit, dbias, f);
    return c;
  };
  EXPECT_FALSE(planned(2048, 16384).row_sum_quads);
  f.bwd_pipelined_row_sum_quads = 1;
  const int64_t shapes[][2] = {{2048, 16384}, {4096, 12288}, {1024, 32768}, {30, 10240}};
  for (const auto& shape : shapes) {
    const LaunchConfig c = planned(shape[0], shape[1]);
    ASSERT_EQ(c.plan, RowPlan::kPipelined) << c.describe();
    EXPECT_GT(c.cluster_size, 1) << c.describe();
    EXPECT_TRUE(c.row_sum_quads) << c.describe();
    EXPECT_NE(c.describe().find(" row-sum-quads"), std::string::npos);
    EXPECT_FALSE(planned(shape[0], shape[1], /*sixteen_bit=*/false).row_sum_quads);
    EXPECT_FALSE(planned(shape[0], shape[1], true, /*dbias=*/true).row_sum_quads);
  }
  const LaunchConfig lean = planned(4096, 4096);  // the lean kernel: bwd_row_sum_quads's
  EXPECT_TRUE(lean.lean && lean.row_sum_quads) << lean.describe();
  f.bwd_row_sum_quads = 0;
  EXPECT_FALSE(planned(4096, 4096).row_sum_quads);
}

// The plain forward's row sum by quads (the default) only under its knob, for 16-bit types, on
// EXACT plans of one row per row group that the registers kernels take (not the lean or
// weight-with-x kernels), whose rows span warps; plans of two rows per group under their own knob
// (also on by default), for common calls only; the lean kernel's under a third (off).
TEST(LaunchConfig, FwdRowSumQuadsOnlyOnTheRegistersKernels) {
  KernelFacts f;
  const auto planned = [&](int64_t rows, int64_t hidden, bool all_16_bit = true,
                           bool common_call = true) {
    LaunchConfig c = normkit::cuda::plan_fwd(rows, hidden, 8, f);
    normkit::cuda::apply_fwd_row_sum_quads(c, all_16_bit, common_call, f);
    return c;
  };
  EXPECT_EQ(f.fwd_row_sum_quads, 1);  // the default
  f.fwd_row_sum_quads = 0;
  EXPECT_FALSE(planned(2048, 16384).row_sum_quads);
  f.fwd_row_sum_quads = 1;
  for (const int64_t hidden : {int64_t{16384}, int64_t{32768}}) {
    const LaunchConfig c = planned(2048, hidden);
    EXPECT_TRUE(c.exact && c.rows_per_group == 1 && c.threads_per_row > 32) << c.describe();
    EXPECT_TRUE(c.row_sum_quads) << c.describe();
    EXPECT_NE(c.describe().find(" row-sum-quads"), std::string::npos);
    EXPECT_FALSE(planned(2048, hidden, /*all_16_bit=*/false).row_sum_quads);
  }
  EXPECT_EQ(f.fwd_rows_row_sum_quads, 1);  // the default
  f.fwd_rows_row_sum_quads = 0;
  const LaunchConfig grouped = planned(8192, 8192);  // 2 rows per group
  EXPECT_EQ(grouped.rows_per_group, 2) << grouped.describe();
  EXPECT_FALSE(grouped.row_sum_quads) << grouped.describe();
  f.fwd_rows_row_sum_quads = 1;
  for (const int64_t hidden : {int64_t{2048}, int64_t{4096}, int64_t{7168}, int64_t{8192}}) {
    const LaunchConfig c = planned(8192, hidden);
    EXPECT_TRUE(c.rows_per_group == 2 && c.items > 1 && c.threads_per_row > 32) << c.describe();
    EXPECT_TRUE(c.row_sum_quads) << c.describe();
    EXPECT_FALSE(planned(8192, hidden, true, /*common_call=*/false).row_sum_quads);
  }
  f.fwd_row_sum_quads = 0;  // (each knob its own plans)
  EXPECT_TRUE(planned(8192, 8192).row_sum_quads);
  EXPECT_FALSE(planned(2048, 16384).row_sum_quads);
  f.fwd_row_sum_quads = 1;
  LaunchConfig lean = normkit::cuda::plan_fwd(128, 4096, 8, f, 0, /*lean_call=*/true);
  ASSERT_TRUE(lean.lean && lean.threads_per_row > 32) << lean.describe();
  f.fwd_lean_row_sum_quads = 0;  // (its own knob)
  normkit::cuda::apply_fwd_row_sum_quads(lean, true, true, f);
  EXPECT_FALSE(lean.row_sum_quads) << lean.describe();
  // The lean kernel's quads (the default), with its 64-byte parameters and plain stores.
  f.fwd_lean_row_sum_quads = 1;
  EXPECT_EQ(normkit::cuda::KernelFacts{}.fwd_lean_row_sum_quads, 1);
  normkit::cuda::apply_fwd_row_sum_quads(lean, true, true, f);
  EXPECT_TRUE(lean.row_sum_quads) << lean.describe();
  f.fwd_weak_stores = 1;
  normkit::cuda::apply_fwd_row_sum_quads(lean, true, true, f);
  EXPECT_FALSE(lean.row_sum_quads) << lean.describe();
  f.fwd_weak_stores = 0;
  LaunchConfig one_warp = normkit::cuda::plan_fwd(128, 1024, 8, f, 0, /*lean_call=*/true);
  ASSERT_TRUE(one_warp.lean && one_warp.threads_per_row <= 32) << one_warp.describe();
  normkit::cuda::apply_fwd_row_sum_quads(one_warp, true, true, f);
  EXPECT_FALSE(one_warp.row_sum_quads) << one_warp.describe();
}

// With y_t the per-tensor forward keeps CTAs of up to 256 threads (quant_ticket_cta_threads): the
// plans that the ticketed grid was measured with, its transpose units as wide as those CTAs.
TEST(LaunchConfig, TransposedOutputKeepsTheTicketedGridsCtas) {
  const KernelFacts f;
  const KernelFacts t = normkit::cuda::facts_with_transposed_output(f);
  EXPECT_EQ(t.quant_cta_threads, 256);
  EXPECT_EQ(f.quant_cta_threads, 128);  // (the per-tensor forward without y_t)
  for (const auto& [rows, hidden] :
       {std::pair<int64_t, int64_t>{4096, 4096}, {8192, 4096}, {16384, 4096}, {8192, 2048},
        {4096, 1024}}) {
    LaunchConfig c = normkit::cuda::plan_fwd_quant(rows, hidden, 8, 0, false, t);
    normkit::cuda::pin_quant_registers(c, rows, hidden, t);
    SCOPED_TRACE(c.describe());
    EXPECT_TRUE(c.pinned_registers);
    EXPECT_TRUE(c.exact);
    EXPECT_EQ(c.threads_per_row * c.rows_per_block, 256);
    EXPECT_EQ(c.grid * c.rows_per_block, rows);
  }
  // Rows that fill a CTA alone are planned alike with and without y_t.
  for (const int64_t hidden : {7168, 8192, 12288}) {
    LaunchConfig a = normkit::cuda::plan_fwd_quant(4096, hidden, 8, 0, false, f);
    LaunchConfig b = normkit::cuda::plan_fwd_quant(4096, hidden, 8, 0, false, t);
    normkit::cuda::pin_quant_registers(a, 4096, hidden, f);
    normkit::cuda::pin_quant_registers(b, 4096, hidden, t);
    EXPECT_EQ(a.describe(), b.describe()) << hidden;
  }
}

TEST(LaunchConfig, SplitsFewLongRowsOverClusters) {
  KernelFacts f;
  const LaunchConfig c = normkit::cuda::plan_fwd(29, 65536, 8, f);
  EXPECT_EQ(c.plan, RowPlan::kCluster);
  EXPECT_GT(c.grid, 29);
  // The same shape without clusters still runs, on one CTA per row.
  f.cluster_launch = false;
  EXPECT_EQ(normkit::cuda::plan_fwd(29, 65536, 8, f).cluster_size, 1);
}

TEST(LaunchConfig, BackwardOfFewRowsTakesOneColumnOwningCluster) {
  KernelFacts f;
  EXPECT_EQ(f.bwd_columns_max_elements, 0);  // off by default until measured
  f.bwd_columns_max_elements = int64_t(1) << 20;
  const int64_t bf16[3] = {2, 2, 0}, with_dresidual[3] = {2, 2, 2}, fp32[3] = {4, 4, 4};
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{1, 1}, {1, 4096}, {2, 65},
                                     {29, 17389}, {128, 4096}, {9, 1003}, {150, 3000}}) {
    for (const int vec : {1, 8}) {
      const LaunchConfig c = normkit::cuda::plan_bwd_columns(rows, hidden, vec, f, bf16, 2);
      SCOPED_TRACE(c.describe());
      ASSERT_EQ(c.plan, RowPlan::kColumns);
      EXPECT_EQ(c.grid, c.cluster_size);  // one cluster
      EXPECT_LE(c.cluster_size, 16);
      EXPECT_EQ(c.cols_per_cta % 8, 0);  // every CTA's columns start aligned for any vec
      EXPECT_GE(c.cols_per_cta * c.cluster_size, hidden);
      EXPECT_LT(c.cols_per_cta * (c.cluster_size - 1), hidden);  // no CTA without columns
      EXPECT_EQ(c.threads_per_row, normkit::cuda::kColumnsThreads);
      EXPECT_GE(c.items, 1);
      EXPECT_LE(c.items, std::min<int64_t>(rows, 32));
      EXPECT_EQ(c.items & (c.items - 1), 0);  // row groups divide the CTA's threads
      EXPECT_GT(c.smem_bytes, 0);
      EXPECT_LE(c.smem_bytes, f.smem_per_block);
    }
  }
  // More columns per CTA for the most CTAs: 29 x 17389 on 16 CTAs of 1088 columns.
  const LaunchConfig odd = normkit::cuda::plan_bwd_columns(29, 17389, 1, f, bf16, 1);
  EXPECT_EQ(odd.cluster_size, 16);
  EXPECT_EQ(odd.cols_per_cta, 1088);
  // Rows that do not fit shared memory, too many elements, no clusters: the other plans.
  EXPECT_EQ(normkit::cuda::plan_bwd_columns(200, 3000, 1, f, with_dresidual, 2).grid, 0);
  EXPECT_EQ(normkit::cuda::plan_bwd_columns(1024, 1024, 8, f, bf16, 1).grid, 0);
  EXPECT_EQ(normkit::cuda::plan_bwd_columns(128, 4096, 4, f, fp32, 2).grid, 0);
  EXPECT_EQ(normkit::cuda::plan_bwd_columns(2048, 1024, 8, f, bf16, 1).grid, 0);
  KernelFacts off = f;
  off.bwd_columns_max_elements = 0;
  EXPECT_EQ(normkit::cuda::plan_bwd_columns(1, 4096, 8, off, bf16, 1).grid, 0);
  off = f;
  off.cluster_launch = false;
  EXPECT_EQ(normkit::cuda::plan_bwd_columns(1, 4096, 8, off, bf16, 1).grid, 0);
}

// KernelFacts::bwd_group_sums_by_cta reaches the backward plan (the pipelined kernel's row
// groups' sums added by the whole CTA, 1, or by the first row group alone, 0).
TEST(LaunchConfig, BackwardPlanCarriesWhoAddsTheRowGroupsSums) {
  KernelFacts f;
  ASSERT_EQ(f.bwd_group_sums_by_cta, 1);
  const int64_t bf16_x_dy = 4;  // bytes per column staged: bf16 x and dy
  const LaunchConfig by_cta = normkit::cuda::plan_bwd(32768, 128, 8, f, bf16_x_dy);
  EXPECT_EQ(by_cta.plan, RowPlan::kPipelined) << by_cta.describe();
  EXPECT_GT(by_cta.rows_per_block, 1) << by_cta.describe();
  EXPECT_TRUE(by_cta.group_sums_by_cta);
  f.bwd_group_sums_by_cta = 0;
  EXPECT_FALSE(normkit::cuda::plan_bwd(32768, 128, 8, f, bf16_x_dy).group_sums_by_cta);
}

// KernelFacts::bwd_early_dependent: 0 the reduction kernel launches when the main kernel's CTAs
// exit, 1 at their start, 2 once the pipelined kernel's CTAs have done their rows.
TEST(LaunchConfig, BackwardPlanCarriesWhenTheReductionMayLaunch) {
  KernelFacts f;
  ASSERT_EQ(f.bwd_early_dependent, 0);
  const int64_t bf16_x_dy = 4;
  for (int setting : {0, 1, 2}) {
    f.bwd_early_dependent = setting;
    const LaunchConfig c = normkit::cuda::plan_bwd(8192, 2048, 8, f, bf16_x_dy);
    SCOPED_TRACE(setting);
    EXPECT_EQ(c.early_dependent, setting == 1);
    EXPECT_EQ(c.dependent_after_rows, setting == 2);
  }
}

}  // namespace
