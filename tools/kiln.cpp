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
  kiln::tools::GenerateOptions gen;
  auto* g = app.add_subcommand("generate", "run a Qwen3 / Qwen3-MoE model folder on a prompt, streaming the text");
  g->add_option("--model,-m", gen.model, "a Hugging Face model folder (config.json, *.safetensors, tokenizer)")->required();
  g->add_option("--prompt,-p", gen.prompt, "the prompt (default: standard input)");
  g->add_option("--system", gen.system, "a system message for the chat template");
  g->add_flag("--raw", gen.raw, "use the prompt as is, without the chat template");
  g->add_flag("--no-think", gen.no_think, "Qwen3: answer without a thinking block");
  g->add_option("--max-new-tokens,-n", gen.max_new_tokens, "most tokens to generate");
  g->add_option("--max-context", gen.max_context, "KV cache positions (default: prompt + max-new-tokens)");
  g->add_option("--temperature,-t", gen.temperature, "0 = greedy (default: generation_config.json's, else greedy)");
  g->add_option("--top-k", gen.top_k, "keep the k most probable tokens (0 = all)");
  g->add_option("--top-p", gen.top_p, "keep the smallest set of tokens with this probability mass");
  g->add_option("--seed", gen.seed, "seed of the sampler");
  g->add_flag("--ignore-eos", gen.ignore_eos, "do not stop at end-of-sequence tokens");
  g->add_option("--device", gen.device, "cpu, cuda or cuda:N (default: best present)");
  g->add_option("--dtype", gen.dtype, "bf16, fp16, fp32, or fp8 (bf16 with fp8 linear and expert weights)");
  kiln::tools::BenchDecodeOptions bd;
  auto* d = app.add_subcommand("bench-decode", "prefill and decode speed of a config.json with random weights");
  d->add_option("--config,-c", bd.config, "config.json or a model folder")->required();
  d->add_option("--device", bd.device, "cpu, cuda or cuda:N (default: best present)");
  d->add_option("--dtype", bd.dtype, "bf16, fp16, fp32, or fp8 (bf16 with fp8 linear and expert weights)");
  d->add_option("--contexts", bd.contexts, "prompt lengths to prefill before decoding")->delimiter(',');
  d->add_option("--tokens", bd.decode_tokens, "decode steps timed per context");
  d->add_flag("--profile", bd.profile, "then time each op of eager decode steps (no CUDA graph) at the first context");
  CLI11_PARSE(app, argc, argv);
  try {
    if (app.got_subcommand("doctor")) return kiln::tools::doctor();
    if (app.got_subcommand("bench")) return kiln::tools::bench(bench);
    if (app.got_subcommand("generate")) return kiln::tools::generate(gen);
    if (app.got_subcommand("bench-decode")) return kiln::tools::bench_decode(bd);
    if (app.got_subcommand("tokenize")) return kiln::tools::tokenize(tokenizer_path);
    if (app.got_subcommand("detokenize")) return kiln::tools::detokenize(tokenizer_path, skip_special);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
