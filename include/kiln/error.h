// The one exception type kiln throws for bad input and unavailable features.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown for a feature that exists in the API but not for this device/dtype.
class NotImplementedError : public Error {
 public:
  using Error::Error;
};

}  // namespace kiln
