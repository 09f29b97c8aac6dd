// The backward pass checked against central finite differences of the library's own forward
// (float32, loss = sum(y * dy)): an oracle that does not share the analytic formula with the
// reference, so a formula mistake made in both places would still be caught.
#include <cmath>
#include <functional>

#include "support.h"

namespace nktest {
namespace {

struct FdOptions {
  int64_t rows, hidden;
  bool zero_centered, bias, residual;
  float eps;
};

// Everything float32 and contiguous, on one backend; the forward can be re-run with new x/weight.
class ForwardLoss {
 public:
  ForwardLoss(nk_backend backend, const FdOptions& o, const std::vector<float>& residual,
              const std::vector<float>& bias, const std::vector<float>& dy)
      : backend_(backend), o_(o), dy_(dy) {
    const size_t n = static_cast<size_t>(o.rows * o.hidden) * 4;
    const size_t h = static_cast<size_t>(o.hidden) * 4;
    x_ = Buffer(backend, n);
    y_ = Buffer(backend, n);
    weight_ = Buffer(backend, h);
    rstd_ = Buffer(backend, static_cast<size_t>(o.rows) * 4);
    if (o.residual) {
      residual_ = Buffer(backend, n);
      residual_.upload(residual.data(), n);
      residual_out_ = Buffer(backend, n);
    }
    if (o.bias) {
      bias_ = Buffer(backend, h);
      bias_.upload(bias.data(), h);
    }
  }

  // Runs the forward; returns sum(y * dy) in double. Also leaves y, residual_out, rstd.
  double operator()(const std::vector<float>& x, const std::vector<float>& weight) {
    x_.upload(x.data(), x.size() * 4);
    weight_.upload(weight.data(), weight.size() * 4);
    nk_rms_norm_fwd_args a;
    nk_rms_norm_fwd_args_init(&a);
    a.rows = o_.rows;
    a.hidden = o_.hidden;
    a.x = x_.data();
    a.weight = weight_.data();
    a.zero_centered = o_.zero_centered;
    a.eps = o_.eps;
    a.y = y_.data();
    a.rstd = reinterpret_cast<float*>(rstd_.data());
    if (o_.residual) {
      a.residual = residual_.data();
      a.residual_out = residual_out_.data();
    }
    if (o_.bias) a.bias = bias_.data();
    const nk_status status = nk_rms_norm_fwd(&a, backend_, nullptr);
    EXPECT_EQ(status, NK_SUCCESS) << nk_last_error();
    synchronize(backend_);
    std::vector<float> y(x.size());
    y_.download(y.data(), y.size() * 4);
    double loss = 0;
    for (size_t i = 0; i < y.size(); ++i) loss += double{y[i]} * dy_[i];
    return loss;
  }

  const Buffer& normalized_input() const { return o_.residual ? residual_out_ : x_; }
  const Buffer& rstd() const { return rstd_; }
  const Buffer& weight() const { return weight_; }

 private:
  nk_backend backend_;
  FdOptions o_;
  std::vector<float> dy_;
  Buffer x_, y_, weight_, rstd_, residual_, residual_out_, bias_;
};

// d loss / d v[i] by the fourth-order central difference
//   (8 (L(+h) - L(-h)) - (L(+2h) - L(-2h))) / (12 h),
// whose truncation error (h^4) is negligible at h = 2^-4, so the float32 noise of the loss
// (divided by h) is what remains: ~3e-5 of the gradient's scale. v[i] is restored.
double central_difference(std::vector<float>& v, size_t i, const std::function<double()>& loss) {
  const float original = v[i];
  const float h = 0x1p-4f;  // x and weight are O(1), so original +- h, 2h are exact in float32
  auto at = [&](float offset) {
    v[i] = original + offset;
    return loss();
  };
  const double d1 = at(h) - at(-h), d2 = at(2 * h) - at(-2 * h);
  v[i] = original;
  return (8.0 * d1 - d2) / (12.0 * double{h});
}

std::vector<float> random_vector(Rng& rng, size_t n, double mean, double sd) {
  std::vector<float> v(n);
  for (float& e : v) {
    do {
      e = static_cast<float>(mean + sd * rng.normal());
    } while (e == 0.0f);
  }
  return v;
}

// The library's float32 result against the finite differences. FD error is ~3e-5 of the
// gradient's scale; compare()'s 1% floor reads the worst of a few hundred elements as ~2e-3
// (measured over 20 seeds); a formula bug (a missing mean term, a wrong rstd power, a dropped
// zero-centered offset) errs by 1e-1 or more.
constexpr double kFdTolerance = 0.01;

class GradCheck : public ::testing::TestWithParam<nk_backend> {};

TEST_P(GradCheck, BackwardMatchesCentralDifferencesOfForward) {
  const nk_backend backend = GetParam();
  NK_SKIP_IF_UNAVAILABLE(backend);
  Rng rng;
  NK_SEED_TRACE(rng);
  const FdOptions cases[] = {
      {3, 29, false, false, false, 1e-6f},
      {4, 71, true, true, true, 0.1f},  // zero-centered weight, bias, fused residual
      {2, 5, false, true, false, 1.0f},
  };
  for (const FdOptions& o : cases) {
    SCOPED_TRACE("rows " + std::to_string(o.rows) + " hidden " + std::to_string(o.hidden) +
                 (o.zero_centered ? " zero_centered" : "") + (o.bias ? " bias" : "") +
                 (o.residual ? " residual" : "") + " eps " + std::to_string(o.eps));
    const size_t n = static_cast<size_t>(o.rows * o.hidden), H = static_cast<size_t>(o.hidden);
    std::vector<float> x = random_vector(rng, n, 0.0, 1.0);
    std::vector<float> weight = random_vector(rng, H, o.zero_centered ? 0.0 : 1.0, 0.2);
    const std::vector<float> residual = random_vector(rng, n, 0.0, 1.0);
    const std::vector<float> bias = random_vector(rng, H, 0.0, 0.3);
    const std::vector<float> dy = random_vector(rng, n, 0.0, 1.0);
    ForwardLoss loss(backend, o, residual, bias, dy);
    loss(x, weight);  // leaves the normalized input and rstd for the backward

    // Analytic gradients from the library's backward.
    Buffer dy_buf(backend, n * 4), dx_buf(backend, n * 4), dw_buf(backend, H * 4),
        db_buf(backend, H * 4);
    dy_buf.upload(dy.data(), n * 4);
    nk_rms_norm_bwd_args b;
    nk_rms_norm_bwd_args_init(&b);
    b.rows = o.rows;
    b.hidden = o.hidden;
    b.dy = dy_buf.data();
    b.x = loss.normalized_input().data();
    b.rstd = reinterpret_cast<const float*>(loss.rstd().data());
    b.weight = loss.weight().data();
    b.zero_centered = o.zero_centered;
    b.dx = dx_buf.data();
    b.dweight = dw_buf.data();
    b.dbias = db_buf.data();
    size_t ws_bytes = 0;
    ASSERT_EQ(nk_rms_norm_bwd_workspace_size(&b, backend, &ws_bytes), NK_SUCCESS) << nk_last_error();
    Buffer workspace(backend, ws_bytes);
    b.workspace = workspace.data();
    b.workspace_bytes = ws_bytes;
    ASSERT_EQ(nk_rms_norm_bwd(&b, backend, nullptr), NK_SUCCESS) << nk_last_error();
    synchronize(backend);
    const std::vector<uint8_t> dx = dx_buf.to_host(), dw = dw_buf.to_host(), db = db_buf.to_host();

    std::vector<double> fd_dx(n), fd_dw(H), fd_db(H);
    for (size_t i = 0; i < n; ++i) {
      fd_dx[i] = central_difference(x, i, [&] { return loss(x, weight); });
    }
    for (size_t j = 0; j < H; ++j) {
      fd_dw[j] = central_difference(weight, j, [&] { return loss(x, weight); });
    }
    // d loss / d bias[j] = sum_r dy[r][j]: exact, no differencing needed.
    for (size_t i = 0; i < n; ++i) fd_db[i % H] += dy[i];

    expect_close(normkit::ref::compare(dx.data(), NK_FLOAT32, o.rows, o.hidden, 0, fd_dx,
                                       kFdTolerance),
                 "dx vs finite differences");
    expect_close(normkit::ref::compare(dw.data(), NK_FLOAT32, 1, o.hidden, 0, fd_dw, kFdTolerance),
                 "dweight vs finite differences");
    expect_close(normkit::ref::compare(db.data(), NK_FLOAT32, 1, o.hidden, 0, fd_db,
                                       normkit::ref::tolerance_for(NK_FLOAT32, NK_FLOAT32, o.rows)),
                 "dbias vs sum of dy");
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, GradCheck, ::testing::ValuesIn(all_backends()),
                         [](const auto& info) { return std::string(backend_label(info.param)); });

}  // namespace
}  // namespace nktest
