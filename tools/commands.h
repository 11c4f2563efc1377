// The kiln CLI's subcommands.
#pragma once

#include <string>

namespace kiln::tools {

// Prints every device kiln can see, or why CUDA cannot be used. Returns 0.
int doctor();

struct BenchOptions {
  std::string device;  // "" = best present
  std::string filter;  // substring of case names
  int repeats = 20;
  double scale = 1.0;  // multiplies the default problem sizes
};
int bench(const BenchOptions& opts);

}  // namespace kiln::tools
