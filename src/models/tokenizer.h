// Byte-level BPE from a Hugging Face tokenizer.json, as Qwen2/3 and Llama 3 use
// it: added (special) tokens matched first, NFC normalisation, the split regex of
// the pre-tokenizer (PCRE2 with Unicode properties), bytes mapped to GPT-2's
// printable alphabet, merges by rank; decoding maps the alphabet back to bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Tokenizer {
 public:
  // A tokenizer.json, or a model folder that holds one. Errors name the file and field.
  static Tokenizer from_file(const std::string& path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // The ids of UTF-8 text (invalid UTF-8 raises, naming the byte offset). Added
  // tokens in the text (<|im_start|>, say) become their ids.
  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of the ids, concatenated (may end inside a UTF-8 character when
  // the ids are a prefix of an encoding). skip_special drops special added tokens.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  // The bytes one id stands for; out-of-range ids raise, naming the vocabulary size.
  std::string token_bytes(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  int32_t vocab_size() const;  // 1 + the largest id, added tokens included
  bool is_special(int32_t id) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Text out of ids one at a time, for streaming to a terminal: bytes of a UTF-8
// character that is not complete yet are held back until the ids that finish it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = true) : tok_(tok), skip_special_(skip_special) {}
  std::string push(int32_t id);  // the complete characters now available
  std::string flush();           // whatever is left (an incomplete tail as is)

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace kiln
