// Front doors of the elementwise ops: type promotion, broadcasting, checks.
#include <cmath>
#include <limits>

#include "core/backend.h"
#include "core/check.h"
#include "core/shape.h"
#include "ops/common.h"

namespace kiln {

const char* op_name(UnaryOp op) {
  static const char* n[] = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "gelu"};
  return n[static_cast<int>(op)];
}
const char* op_name(BinaryOp op) {
  static const char* n[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"};
  return n[static_cast<int>(op)];
}
const char* op_name(CompareOp op) {
  static const char* n[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  return n[static_cast<int>(op)];
}

namespace {

// The dtype of a Python-style number combined with a tensor of dtype `t`
// (torch's wrapped-number rule: the number only lifts the category).
DType scalar_result_type(DType t, const Scalar& s) {
  if (s.is_complex()) return is_complex(t) ? t : DType::Complex64;
  if (s.is_floating_point()) return is_floating_point(t) || is_complex(t) ? t : DType::Float32;
  if (t == DType::Bool && s.kind() != Scalar::Kind::Bool) return DType::Int64;
  return t;
}

bool is_arith(DType d) { return d != DType::Bool && !is_float8(d) && !is_complex(d); }

Tensor binary_op(BinaryOp op, const Tensor& a_in, const Tensor& b_in, double alpha = 1.0) {
  const char* name = op_name(op);
  check_defined(name, a_in, b_in);
  check_same_device(name, a_in, b_in);
  const DType common = result_type(name, a_in, b_in);
  if (common == DType::Bool && (op == BinaryOp::Add || op == BinaryOp::Mul || op == BinaryOp::Maximum ||
                                op == BinaryOp::Minimum)) {
    // bool arithmetic: + and max are "or", * and min are "and", as torch
    const bool is_or = op == BinaryOp::Add || op == BinaryOp::Maximum;
    Tensor s = binary_op(is_or ? BinaryOp::Maximum : BinaryOp::Minimum, a_in.view(DType::UInt8),
                         b_in.view(DType::UInt8));
    return s.view(DType::Bool);
  }
  KILN_CHECK(!(op == BinaryOp::Sub && common == DType::Bool), name,
             ": subtraction with two bool tensors is not supported; use logical_xor");
  DType dt = common;
  if (op == BinaryOp::Div && is_integral(dt, true)) dt = DType::Float32;
  KILN_CHECK(is_arith(dt), name, ": dtype ", dtype_name(dt), " is not supported (inputs ", dtype_name(a_in.dtype()),
             " and ", dtype_name(b_in.dtype()), ")");
  const Shape shape = broadcast_shapes(a_in.shape(), b_in.shape());
  Tensor a = a_in.to(dt).expand(shape), b = b_in.to(dt).expand(shape);
  Tensor out = Tensor::empty(shape, dt, a.device());
  if (out.numel() > 0) KILN_ON_DEVICE(out.device(), binary, op, out, a, b, alpha);
  return out;
}

Tensor binary_scalar(BinaryOp op, const Tensor& a, const Scalar& s) {
  check_defined(op_name(op), a);
  const DType dt = scalar_result_type(a.dtype(), s);
  return binary_op(op, a, full({}, s, dt, a.device()));
}

Tensor unary_op(UnaryOp op, const Tensor& a_in) {
  const char* name = op_name(op);
  check_defined(name, a_in);
  const bool keeps_ints = op == UnaryOp::Neg || op == UnaryOp::Abs;
  if (keeps_ints) {
    KILN_CHECK(!(op == UnaryOp::Neg && a_in.dtype() == DType::Bool), name,
               ": negation on a bool tensor is not supported; use logical_not");
    if (a_in.dtype() == DType::Bool) return a_in.clone();  // abs(bool)
  }
  DType dt = a_in.dtype();
  if (!keeps_ints && is_integral(dt, true)) dt = DType::Float32;  // exp(int) is float, as torch
  KILN_CHECK(is_arith(dt), name, ": dtype ", dtype_name(dt), " is not supported");
  if (op == UnaryOp::Abs && is_unsigned(dt)) return a_in.clone();
  Tensor a = a_in.to(dt);
  Tensor out = Tensor::empty(a.shape(), dt, a.device());
  if (out.numel() > 0) KILN_ON_DEVICE(out.device(), unary, op, out, a);
  return out;
}

Tensor compare_op(CompareOp op, const Tensor& a_in, const Tensor& b_in) {
  const char* name = op_name(op);
  check_defined(name, a_in, b_in);
  check_same_device(name, a_in, b_in);
  const DType dt = result_type(name, a_in, b_in);
  KILN_CHECK(!is_complex(dt) || op == CompareOp::Eq || op == CompareOp::Ne, name,
             ": ordering is not defined for complex64");
  KILN_CHECK(!is_complex(dt), name, ": complex64 comparison is not supported yet");
  const Shape shape = broadcast_shapes(a_in.shape(), b_in.shape());
  Tensor a = a_in.to(dt).expand(shape), b = b_in.to(dt).expand(shape);
  Tensor out = Tensor::empty(shape, DType::Bool, a.device());
  if (out.numel() > 0) KILN_ON_DEVICE(out.device(), compare, op, out, a, b);
  return out;
}

// Integer tensor against an integer number outside the tensor's range: the
// answer is the same for every element, and casting the number would wrap.
template <class T>
std::optional<bool> out_of_range_compare(CompareOp op, const Scalar& s) {
  const bool below = s.kind() == Scalar::Kind::UInt ? false
                                                     : s.to_int64() < static_cast<int64_t>(std::numeric_limits<T>::min());
  const bool above = s.kind() == Scalar::Kind::UInt
                         ? s.to_uint64() > static_cast<uint64_t>(std::numeric_limits<T>::max())
                         : s.to_int64() >= 0 && static_cast<uint64_t>(s.to_int64()) >
                                                    static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (!below && !above) return std::nullopt;
  switch (op) {
    case CompareOp::Eq: return false;
    case CompareOp::Ne: return true;
    case CompareOp::Lt:
    case CompareOp::Le: return above;  // x < s for every x when s is above the range
    case CompareOp::Gt:
    case CompareOp::Ge: return below;
  }
  return std::nullopt;
}

Tensor compare_scalar(CompareOp op, const Tensor& a, const Scalar& s) {
  check_defined(op_name(op), a);
  if (is_integral(a.dtype(), false) && s.is_integral() && s.kind() != Scalar::Kind::Bool) {
    std::optional<bool> fixed;
    switch (a.dtype()) {
      case DType::UInt8: fixed = out_of_range_compare<uint8_t>(op, s); break;
      case DType::Int8: fixed = out_of_range_compare<int8_t>(op, s); break;
      case DType::Int16: fixed = out_of_range_compare<int16_t>(op, s); break;
      case DType::Int32: fixed = out_of_range_compare<int32_t>(op, s); break;
      case DType::Int64: fixed = out_of_range_compare<int64_t>(op, s); break;
      case DType::UInt16: fixed = out_of_range_compare<uint16_t>(op, s); break;
      case DType::UInt32: fixed = out_of_range_compare<uint32_t>(op, s); break;
      case DType::UInt64: fixed = out_of_range_compare<uint64_t>(op, s); break;
      default: break;
    }
    if (fixed) return full(a.shape(), *fixed, DType::Bool, a.device());
  }
  return compare_op(op, a, full({}, s, scalar_result_type(a.dtype(), s), a.device()));
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return binary_op(BinaryOp::Add, a, b, alpha.to_double());
}
Tensor add(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return binary_op(BinaryOp::Sub, a, b, alpha.to_double());
}
Tensor sub(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Mul, a, b); }
Tensor mul(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Div, a, b); }
Tensor div(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Pow, a, b); }
Tensor pow(const Tensor& a, const Scalar& b) { return binary_scalar(BinaryOp::Pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::Minimum, a, b); }

Tensor neg(const Tensor& a) { return unary_op(UnaryOp::Neg, a); }
Tensor abs(const Tensor& a) { return unary_op(UnaryOp::Abs, a); }
Tensor exp(const Tensor& a) { return unary_op(UnaryOp::Exp, a); }
Tensor log(const Tensor& a) { return unary_op(UnaryOp::Log, a); }
Tensor sqrt(const Tensor& a) { return unary_op(UnaryOp::Sqrt, a); }
Tensor rsqrt(const Tensor& a) { return unary_op(UnaryOp::Rsqrt, a); }
Tensor tanh(const Tensor& a) { return unary_op(UnaryOp::Tanh, a); }
Tensor sigmoid(const Tensor& a) { return unary_op(UnaryOp::Sigmoid, a); }
Tensor silu(const Tensor& a) { return unary_op(UnaryOp::Silu, a); }
Tensor gelu(const Tensor& a, const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '",
             approximate, "'");
  return unary_op(approximate == "tanh" ? UnaryOp::GeluTanh : UnaryOp::Gelu, a);
}

#define KILN_COMPARE(fn, OP)                                                                  \
  Tensor fn(const Tensor& a, const Tensor& b) { return compare_op(CompareOp::OP, a, b); }    \
  Tensor fn(const Tensor& a, const Scalar& b) { return compare_scalar(CompareOp::OP, a, b); }
KILN_COMPARE(eq, Eq)
KILN_COMPARE(ne, Ne)
KILN_COMPARE(lt, Lt)
KILN_COMPARE(le, Le)
KILN_COMPARE(gt, Gt)
KILN_COMPARE(ge, Ge)
#undef KILN_COMPARE

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  check_defined("where", cond, a_in);
  check_defined("where", b_in);
  check_same_device("where", cond, a_in);
  check_same_device("where", cond, b_in);
  KILN_CHECK(cond.dtype() == DType::Bool, "where: condition must be a bool tensor, got ", dtype_name(cond.dtype()));
  const DType dt = result_type("where", a_in, b_in);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a_in.shape()), b_in.shape());
  Tensor a = a_in.to(dt).expand(shape), b = b_in.to(dt).expand(shape), c = cond.expand(shape);
  Tensor out = Tensor::empty(shape, dt, a.device());
  if (out.numel() > 0) KILN_ON_DEVICE(out.device(), where, out, c, a, b);
  return out;
}
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  check_defined("where", b);
  return where(cond, full({}, a, scalar_result_type(b.dtype(), a), b.device()), b);
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  check_defined("where", a);
  return where(cond, a, full({}, b, scalar_result_type(a.dtype(), b), a.device()));
}

}  // namespace kiln
