// kiln: the command-line front end.
#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.h"
#include "kiln/error.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: a tensor backend and local-inference engine"};
  app.require_subcommand(1);
  app.add_subcommand("doctor", "show devices, drivers and why CUDA is or is not usable");
  kiln::tools::BenchOptions bench;
  auto* b = app.add_subcommand("bench", "time kiln's ops on the best device present");
  b->add_option("--device", bench.device, "cpu, cuda or cuda:N (default: best present)");
  b->add_option("--filter", bench.filter, "run only cases whose name contains this");
  b->add_option("--repeats", bench.repeats, "timed repetitions per case (median reported)");
  b->add_option("--scale", bench.scale, "multiply the default problem sizes");
  std::string tokenizer_path;
  bool skip_special = false;
  auto* tok = app.add_subcommand("tokenize", "UTF-8 text on stdin -> its token ids on one line");
  tok->add_option("--tokenizer", tokenizer_path, "tokenizer.json or a model folder")->required();
  auto* detok = app.add_subcommand("detokenize", "token ids on stdin -> their text on stdout");
  detok->add_option("--tokenizer", tokenizer_path, "tokenizer.json or a model folder")->required();
  detok->add_flag("--skip-special", skip_special, "leave out special tokens (<|im_end|>, ...)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (app.got_subcommand("doctor")) return kiln::tools::doctor();
    if (app.got_subcommand("bench")) return kiln::tools::bench(bench);
    if (app.got_subcommand("tokenize")) return kiln::tools::tokenize(tokenizer_path);
    if (app.got_subcommand("detokenize")) return kiln::tools::detokenize(tokenizer_path, skip_special);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
