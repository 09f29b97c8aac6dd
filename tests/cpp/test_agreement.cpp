// The CPU and CUDA backends agree with each other on the same random inputs (and each with
// the float64 reference). Needs a CUDA device; skipped otherwise.
#include "bwd_harness.h"
#include "fwd_harness.h"

namespace nktest {
namespace {

// Two float32 computations each within tolerance_for of the exact value are within twice that
// of each other.
double agreement_tolerance(nk_dtype out, nk_dtype in, int64_t n) {
  return 2.0 * normkit::ref::tolerance_for(out, in, n);
}

// The elements of an output allocation laid out like `layout`, as doubles.
std::vector<double> elements(const Matrix& layout, const std::vector<uint8_t>& bytes) {
  Matrix m = layout;
  m.bytes = bytes;
  return m.dense();
}

TEST(BackendAgreement, ForwardCpuAndCudaAgree) {
  NK_SKIP_IF_UNAVAILABLE(NK_BACKEND_CUDA);
  Rng rng;
  NK_SEED_TRACE(rng);
  const int64_t rows[] = {1, 7, 64, 3}, hidden[] = {17389, 71, 4096, 65537};
  const nk_dtype xs[] = {NK_BFLOAT16, NK_FLOAT16, NK_FLOAT32, NK_BFLOAT16};
  for (int i = 0; i < 4; ++i) {
    FwdCase c;
    c.rows = rows[i];
    c.hidden = hidden[i];
    c.x = c.y = xs[i];
    c.w = NK_FLOAT32;
    c.bias = c.residual = true;
    c.zero_centered = i % 2 == 1;
    SCOPED_TRACE(c.describe());
    const FwdInputs in = make_fwd_inputs(c, rng);
    const FwdRun cpu = run_fwd(NK_BACKEND_CPU, c, in);
    const FwdRun gpu = run_fwd(NK_BACKEND_CUDA, c, in);
    ASSERT_EQ(cpu.status, NK_SUCCESS);
    ASSERT_EQ(gpu.status, NK_SUCCESS);
    check_fwd_against_reference(c, in, cpu);
    check_fwd_against_reference(c, in, gpu);
    expect_close(compare_matrix(in.y, gpu.y, elements(in.y, cpu.y),
                                agreement_tolerance(c.y, c.x, c.hidden)),
                 "y: CUDA vs CPU");
    expect_close(compare_matrix(in.residual_out, gpu.residual_out,
                                elements(in.residual_out, cpu.residual_out), 0.0),
                 "residual_out: CUDA vs CPU (bit-exact)");
    expect_close(compare_matrix(in.rstd, gpu.rstd, elements(in.rstd, cpu.rstd),
                                2.0 * rstd_tolerance(c.hidden)),
                 "rstd: CUDA vs CPU");
  }
}

TEST(BackendAgreement, BackwardCpuAndCudaAgree) {
  NK_SKIP_IF_UNAVAILABLE(NK_BACKEND_CUDA);
  Rng rng;
  NK_SEED_TRACE(rng);
  const int64_t rows[] = {1, 7, 64, 1000}, hidden[] = {17389, 71, 4096, 1000};
  const nk_dtype xs[] = {NK_BFLOAT16, NK_FLOAT16, NK_FLOAT32, NK_BFLOAT16};
  for (int i = 0; i < 4; ++i) {
    BwdCase c;
    c.rows = rows[i];
    c.hidden = hidden[i];
    c.x = c.dy = xs[i];
    c.w = NK_FLOAT32;
    c.dresidual = c.dweight = c.dbias = true;
    c.zero_centered = i % 2 == 1;
    SCOPED_TRACE(c.describe());
    const BwdInputs in = make_bwd_inputs(c, rng);
    const BwdRun cpu = run_bwd(NK_BACKEND_CPU, c, in);
    const BwdRun gpu = run_bwd(NK_BACKEND_CUDA, c, in);
    ASSERT_EQ(cpu.status, NK_SUCCESS);
    ASSERT_EQ(gpu.status, NK_SUCCESS);
    check_bwd_against_reference(c, in, cpu);
    check_bwd_against_reference(c, in, gpu);
    expect_close(compare_matrix(in.dx, gpu.dx, elements(in.dx, cpu.dx),
                                agreement_tolerance(c.x, c.x, c.hidden)),
                 "dx: CUDA vs CPU");
    expect_close(compare_matrix(in.dweight, gpu.dweight, elements(in.dweight, cpu.dweight),
                                agreement_tolerance(c.w, c.x, c.rows)),
                 "dweight: CUDA vs CPU");
    expect_close(compare_matrix(in.dbias, gpu.dbias, elements(in.dbias, cpu.dbias),
                                agreement_tolerance(c.w, c.x, c.rows)),
                 "dbias: CUDA vs CPU");
  }
}

}  // namespace
}  // namespace nktest
