// Factories and random numbers.
#include <cmath>

#include "core/backend.h"
#include "core/check.h"
#include "core/shape.h"
#include "ops/common.h"

namespace kiln {

Tensor empty(const Shape& shape, DType dtype, Device device) { return Tensor::empty(shape, dtype, device); }
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1, dtype, device); }
Tensor full(const Shape& shape, const Scalar& value, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  t.fill_(value);
  return t;
}
Tensor empty_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, const Scalar& value) { return full(t.shape(), value, t.dtype(), t.device()); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype,
              Device device) {
  const bool all_int = start.is_integral() && end.is_integral() && step.is_integral();
  const DType dt = dtype.value_or(all_int ? DType::Int64 : DType::Float32);
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  KILN_CHECK(st != 0, "arange: step must be nonzero");
  KILN_CHECK(std::isfinite(s) && std::isfinite(e), "arange: unsupported range: ", start.str(), " -> ", end.str());
  KILN_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), "arange: upper bound and larger bound inconsistent with step sign (start ",
             start.str(), ", end ", end.str(), ", step ", step.str(), ")");
  int64_t n;
  if (all_int) {
    const int64_t a = start.to_int64(), b = end.to_int64(), c = step.to_int64();
    n = c > 0 ? (b - a + c - 1) / c : (a - b - c - 1) / (-c);
  } else {
    n = static_cast<int64_t>(std::ceil((e - s) / st));
  }
  Tensor out = Tensor::empty({std::max<int64_t>(n, 0)}, dt, device);
  if (out.numel() > 0) KILN_ON_DEVICE(device, arange, out, start, step);
  return out;
}

Tensor arange(const Scalar& end, std::optional<DType> dtype, Device device) {
  return arange(0, end, 1, dtype, device);
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}
void manual_seed(uint64_t seed) { default_generator() = Generator(seed); }

namespace {
Tensor& fill_random(const char* op, RandomKind kind, Tensor& t, double a, double b, Generator* gen) {
  check_defined(op, t);
  check_compute_float(op, t);
  Generator& g = gen ? *gen : default_generator();
  Tensor target = t.is_contiguous() ? t : Tensor::empty(t.shape(), t.dtype(), t.device());
  const uint64_t offset = g.offset;
  g.offset += static_cast<uint64_t>(t.numel() + 3) / 4 * 4;  // counters used, rounded to whole Philox blocks
  if (t.numel() > 0) KILN_ON_DEVICE(t.device(), random, kind, target, a, b, g.seed, offset);
  if (!target.is_alias_of(t)) t.copy_(target);
  return t;
}
}  // namespace

Tensor& uniform_(Tensor& t, double low, double high, Generator* gen) {
  KILN_CHECK(low <= high, "uniform_: expects low <= high, got low=", low, " high=", high);
  return fill_random("uniform_", RandomKind::Uniform, t, low, high, gen);
}
Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  KILN_CHECK(std >= 0, "normal_: expects std >= 0, got ", std);
  return fill_random("normal_", RandomKind::Normal, t, mean, std, gen);
}
Tensor rand(const Shape& shape, DType dtype, Device device, Generator* gen) {
  Tensor t = Tensor::empty(shape, dtype, device);
  return uniform_(t, 0.0, 1.0, gen);
}
Tensor randn(const Shape& shape, DType dtype, Device device, Generator* gen) {
  Tensor t = Tensor::empty(shape, dtype, device);
  return normal_(t, 0.0, 1.0, gen);
}

}  // namespace kiln
