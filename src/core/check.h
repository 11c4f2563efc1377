// Argument checks that throw kiln::Error with a message built from the values.
#pragma once

#include <sstream>
#include <string>

#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/tensor.h"

namespace kiln::detail {

inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  if constexpr (std::is_same_v<T, Shape>) {
    os << shape_str(v);
  } else if constexpr (std::is_same_v<T, DType>) {
    os << dtype_name(v);
  } else if constexpr (std::is_same_v<T, Device>) {
    os << v.str();
  } else {
    os << v;
  }
  append(os, rest...);
}

template <class... Args>
std::string format(const Args&... args) {
  std::ostringstream os;
  append(os, args...);
  return os.str();
}

}  // namespace kiln::detail

// KILN_CHECK(cond, "op: message ", value, ...): throws kiln::Error when !cond.
#define KILN_CHECK(cond, ...)                                   \
  do {                                                          \
    if (!(cond)) throw ::kiln::Error(::kiln::detail::format(__VA_ARGS__)); \
  } while (0)

// KILN_THROW("what: ", value, ...): throws kiln::Error unconditionally.
#define KILN_THROW(...) throw ::kiln::Error(::kiln::detail::format(__VA_ARGS__))

#define KILN_NOT_IMPLEMENTED(...) throw ::kiln::NotImplementedError(::kiln::detail::format(__VA_ARGS__))
