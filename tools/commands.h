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

// Reads UTF-8 text on stdin and prints its ids on one line, separated by spaces.
int tokenize(const std::string& tokenizer_path);
// Reads whitespace-separated ids on stdin and writes their text (bytes as decoded).
int detokenize(const std::string& tokenizer_path, bool skip_special);

}  // namespace kiln::tools
