#include <sstream>

#include "core/check.h"
#include "kiln/tensor.h"

namespace kiln {

double Scalar::to_double() const {
  switch (kind_) {
    case Kind::Bool:
    case Kind::Int: return static_cast<double>(i_);
    case Kind::UInt: return static_cast<double>(u_);
    default: return d_;
  }
}
int64_t Scalar::to_int64() const {
  switch (kind_) {
    case Kind::Bool:
    case Kind::Int: return i_;
    case Kind::UInt: return static_cast<int64_t>(u_);
    default: return static_cast<int64_t>(d_);
  }
}
uint64_t Scalar::to_uint64() const {
  switch (kind_) {
    case Kind::Bool:
    case Kind::Int: return static_cast<uint64_t>(i_);
    case Kind::UInt: return u_;
    default: return static_cast<uint64_t>(d_);
  }
}
bool Scalar::to_bool() const {
  if (kind_ == Kind::Complex) return d_ != 0 || im_ != 0;
  if (kind_ == Kind::Float) return d_ != 0;
  return i_ != 0;
}
std::complex<double> Scalar::to_complex() const {
  if (kind_ == Kind::Complex) return {d_, im_};
  return {to_double(), 0.0};
}
std::string Scalar::str() const {
  std::ostringstream os;
  switch (kind_) {
    case Kind::Bool: os << (i_ ? "True" : "False"); break;
    case Kind::Int: os << i_; break;
    case Kind::UInt: os << u_; break;
    case Kind::Float: os << d_; break;
    case Kind::Complex: os << "(" << d_ << (im_ < 0 ? "" : "+") << im_ << "j)"; break;
  }
  return os.str();
}

}  // namespace kiln
