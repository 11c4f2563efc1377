// Switches read from the environment.
#pragma once

#include <cstdlib>
#include <cstring>

namespace kiln {

// Whether the switch `name` is on: unset, or set to anything but "0".
inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

// Whether the opt-in switch `name` is on: set, to anything but "0".
inline bool env_opt_in(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") != 0;
}

}  // namespace kiln
