#include "check_cases.h"

#include <algorithm>
#include <array>

#include "dtype_names.h"
#include "random.h"

namespace nktool {

std::string CheckCase::flags() const {
  std::string f;
  f += residual ? 'R' : '.';
  f += has_bias ? 'B' : '.';
  f += zero_centered ? 'Z' : '.';
  f += has_weight ? '.' : 'N';
  f += strided ? 'S' : '.';
  f += misaligned ? 'M' : '.';
  f += in_place ? 'I' : '.';
  f += tiny_inputs ? 'T' : '.';
  f += dresidual_out ? 'D' : '.';
  return f;
}

std::string CheckCase::dtypes() const {
  return std::string(short_name(x_dtype)) + "/" + short_name(weight_dtype) + "/" +
         short_name(y_dtype);
}

std::string check_flags_legend() {
  return "flags: R residual add, B bias, Z zero-centered weight (1+w), N no weight, S strided "
         "rows,\n       M pointers off 16-byte alignment, I in-place, T tiny x (eps matters), "
         "D dresidual_out\n"
         "dtypes: x/weight/y (dy has y's dtype; dx, residual x's; dweight, dbias weight's)";
}

namespace {

constexpr std::array<nk_dtype, 3> kDtypes{NK_FLOAT32, NK_FLOAT16, NK_BFLOAT16};

struct ShapeSpec {
  int64_t rows, hidden;
};

// Features drawn at random per case, so that over a run every feature appears on and off in
// many combinations; the dtype triple and the shape are set by the caller.
CheckCase random_features(Random& rng, int64_t rows, int64_t hidden, nk_dtype x, nk_dtype w,
                          nk_dtype y) {
  CheckCase c;
  c.rows = rows;
  c.hidden = hidden;
  c.x_dtype = x;
  c.weight_dtype = w;
  c.y_dtype = y;
  c.has_weight = rng.below(8) != 0;
  c.zero_centered = c.has_weight && rng.below(3) == 0;
  c.has_bias = rng.coin();
  c.residual = rng.coin();
  c.strided = rng.coin();
  c.misaligned = rng.below(3) == 0;
  c.in_place = rng.below(5) == 0;
  // Tiny inputs (mean square ~ eps) check that eps is applied; for hidden <= 3 they also keep
  // dx well-conditioned (with |x|^2 >> eps, dx = rstd*(g - xhat*mean(g*xhat)) cancels to
  // ~eps-sized noise at hidden 1, which no tolerance can judge tightly).
  c.tiny_inputs = rng.below(8) == 0 || (hidden <= 3 && rng.below(4) != 0);
  c.dresidual_out = rng.below(3) == 0;
  const int grads = static_cast<int>(rng.below(4));  // dweight+dbias, dweight, dbias, neither
  c.want_dweight = grads == 0 || grads == 1;
  c.want_dbias = grads == 0 || grads == 2;
  const float eps_choices[] = {1e-6f, 1e-5f, 1e-6f, 0.0f};
  c.eps = c.tiny_inputs ? 1e-6f : eps_choices[rng.below(4)];
  c.data_seed = rng.next_u64();
  return c;
}

}  // namespace

std::vector<CheckCase> make_check_cases(bool quick, uint64_t seed) {
  Random rng(seed * 0x2545F4914F6CDD1Dull + 0x1234567ull);
  std::vector<CheckCase> cases;

  // 1. Every (x, weight, y) dtype combination, on small awkward shapes.
  const std::vector<ShapeSpec> combo_shapes =
      quick ? std::vector<ShapeSpec>{{1, 29}, {3, 71}, {7, 1024}, {3, 4096}, {2, 1}, {5, 333}}
            : std::vector<ShapeSpec>{{1, 29}, {3, 71}, {7, 1024}, {33, 4096}, {3, 17389},
                                     {9, 1},  {65, 2048}, {5, 65537}, {127, 160}};
  const int shapes_per_combo = quick ? 1 : 3;
  int k = 0;
  for (nk_dtype x : kDtypes) {
    for (nk_dtype w : kDtypes) {
      for (nk_dtype y : kDtypes) {
        for (int s = 0; s < shapes_per_combo; ++s, ++k) {
          const ShapeSpec& shape = combo_shapes[static_cast<size_t>(k) % combo_shapes.size()];
          cases.push_back(random_features(rng, shape.rows, shape.hidden, x, w, y));
        }
      }
    }
  }

  // 2. Hidden sizes around every code path boundary (tiny, odd, powers of two, past 64K), each
  //    with a dtype combination drawn at random.
  const std::vector<ShapeSpec> sweep =
      quick ? std::vector<ShapeSpec>{{1, 1}, {3, 29}, {1, 71}, {7, 1024}, {3, 4096},
                                     {1, 17389}, {3, 65537}, {33, 4095}}
            : std::vector<ShapeSpec>{
                  {1, 1},      {33, 1},     {1001, 1},   {7, 2},     {3, 3},      {65, 8},
                  {1, 29},     {33, 29},    {3, 64},     {7, 71},    {129, 71},   {3, 127},
                  {33, 256},   {7, 511},    {65, 1000},  {1, 1024},  {255, 1024}, {7, 1536},
                  {33, 2048},  {3, 3072},   {65, 4095},  {1, 4096},  {129, 4096}, {33, 5120},
                  {7, 6144},   {33, 7168},  {65, 8192},  {3, 12288}, {33, 16384}, {1, 17389},
                  {33, 17389}, {7, 32768},  {3, 65536},  {1, 65537}, {33, 65537}, {3, 100003},
                  {7, 131072}, {3, 262147}};
  for (const ShapeSpec& shape : sweep) {
    cases.push_back(random_features(rng, shape.rows, shape.hidden, kDtypes[rng.below(3)],
                                    kDtypes[rng.below(3)], kDtypes[rng.below(3)]));
  }

  // 3. Many rows: GPU backward reductions of dweight/dbias span many blocks only here.
  const std::vector<ShapeSpec> tall =
      quick ? std::vector<ShapeSpec>{{1025, 64}}
            : std::vector<ShapeSpec>{{4099, 1024}, {20001, 29}, {2049, 4096}, {1025, 8192},
                                     {6007, 768},  {16385, 128}, {3001, 2048}, {257, 32768},
                                     {8191, 511}};
  for (const ShapeSpec& shape : tall) {
    CheckCase c = random_features(rng, shape.rows, shape.hidden, kDtypes[rng.below(3)],
                                  kDtypes[rng.below(3)], kDtypes[rng.below(3)]);
    c.want_dweight = true;  // the point of these shapes
    cases.push_back(c);
  }

  for (size_t i = 0; i < cases.size(); ++i) cases[i].id = static_cast<int>(i);
  return cases;
}

}  // namespace nktool
