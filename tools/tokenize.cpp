// kiln tokenize / detokenize: the tokenizer on standard input and output.
#include <climits>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "commands.h"
#include "kiln/error.h"
#include "models/tokenizer.h"

namespace kiln::tools {

int tokenize(const std::string& tokenizer_path) {
  const Tokenizer tok = Tokenizer::from_file(tokenizer_path);
  const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  const auto ids = tok.encode(text);
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
  return 0;
}

int detokenize(const std::string& tokenizer_path, bool skip_special) {
  const Tokenizer tok = Tokenizer::from_file(tokenizer_path);
  std::vector<int32_t> ids;
  std::string word;
  while (std::cin >> word) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || v < INT32_MIN || v > INT32_MAX)
      throw Error("detokenize: \"" + word + "\" is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  std::cout << tok.decode(ids, skip_special);
  return 0;
}

}  // namespace kiln::tools
