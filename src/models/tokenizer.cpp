// Byte-level BPE tokenizer (see tokenizer.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "models/tokenizer.h"

#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <climits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/check.h"
#include "models/json_file.h"

namespace kiln {

namespace {

using json = nlohmann::json;

// GPT-2's pre-tokenizer regex: what a ByteLevel pre-tokenizer with use_regex applies.
constexpr const char* kGpt2Split =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Length of the UTF-8 character starting at s[i], or 0 when it is not valid there.
size_t utf8_char_len(std::string_view s, size_t i) {
  utf8proc_int32_t cp;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                  static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

// Every byte and the character of GPT-2's printable alphabet that stands for it.
struct ByteAlphabet {
  std::array<std::string, 256> of_byte;
  std::unordered_map<uint32_t, uint8_t> byte_of;
  ByteAlphabet() {
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++);
      append_utf8(of_byte[b], cp);
      byte_of[cp] = static_cast<uint8_t>(b);
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

std::string nfc(std::string_view s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                              &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  KILN_CHECK(n >= 0, "tokenize: NFC normalisation failed: ", utf8proc_errmsg(n));
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

struct AddedToken {
  std::string content;
  int32_t id;
  bool special;
};

}  // namespace

struct Tokenizer::Impl {
  std::string file;
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> id_to_token;  // byte-level strings; "" where an id is unused
  std::unordered_map<std::string, int> merge_rank;  // "left right" -> rank
  std::vector<AddedToken> added;          // longest first
  std::unordered_map<int32_t, size_t> added_of_id;
  bool normalize_nfc = false;
  pcre2_code* split = nullptr;
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  ~Impl() {
    if (split) pcre2_code_free(split);
  }

  void compile_split(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE at = 0;
    split = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err,
                          &at, nullptr);
    if (!split) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      KILN_THROW(file, ": pre_tokenizer regex does not compile at offset ", at, ": ", reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(split, PCRE2_JIT_COMPLETE);  // the interpreter serves where JIT is unavailable
  }

  // The merges of one pre-token, GPT-2's way: the lowest-ranked adjacent pair,
  // every occurrence left to right, until no pair has a rank.
  std::vector<int32_t> bpe(const std::string& piece) const {
    {
      std::lock_guard<std::mutex> lock(cache_mu);
      auto it = cache.find(piece);
      if (it != cache.end()) return it->second;
    }
    std::vector<std::string> w;
    for (unsigned char c : piece) w.push_back(alphabet().of_byte[c]);
    while (w.size() > 1) {
      int best = INT_MAX;
      size_t at = 0;
      for (size_t i = 0; i + 1 < w.size(); ++i) {
        auto it = merge_rank.find(w[i] + " " + w[i + 1]);
        if (it != merge_rank.end() && it->second < best) best = it->second, at = i;
      }
      if (best == INT_MAX) break;
      const std::string a = w[at], b = w[at + 1];
      std::vector<std::string> next;
      for (size_t i = 0; i < w.size();) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
          next.push_back(a + b);
          i += 2;
        } else {
          next.push_back(w[i++]);
        }
      }
      w.swap(next);
    }
    std::vector<int32_t> ids;
    for (const auto& s : w) {
      auto it = vocab.find(s);
      KILN_CHECK(it != vocab.end(), "tokenize: ", file, " has no token for \"", s, "\" (and no unk token)");
      ids.push_back(it->second);
    }
    std::lock_guard<std::mutex> lock(cache_mu);
    cache.emplace(piece, ids);
    return ids;
  }

  void encode_text(std::string_view text, std::vector<int32_t>& ids) const {
    if (text.empty()) return;
    const std::string norm = normalize_nfc ? nfc(text) : std::string(text);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(split, nullptr);
    KILN_CHECK(md != nullptr, "tokenize: out of memory for the regex match data");
    auto piece = [&](size_t b, size_t e) {
      if (e > b) {
        const auto v = bpe(norm.substr(b, e - b));
        ids.insert(ids.end(), v.begin(), v.end());
      }
    };
    size_t pos = 0, gap = 0;
    while (pos < norm.size()) {
      const int rc = pcre2_match(split, reinterpret_cast<PCRE2_SPTR>(norm.data()), norm.size(), pos,
                                 PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        pcre2_match_data_free(md);
        KILN_THROW("tokenize: regex match failed (PCRE2 error ", rc, ")");
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t b = ov[0], e = ov[1];
      if (e == b) {  // an empty match: step over one character
        pos = b + std::max<size_t>(1, utf8_char_len(norm, b));
        continue;
      }
      piece(gap, b);  // "Isolated": the text between matches is a piece too
      piece(b, e);
      pos = gap = e;
    }
    piece(gap, norm.size());
    pcre2_match_data_free(md);
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_file(const std::string& path) {
  const std::string file = file_or_in_folder(path, "tokenizer.json");
  const json j = read_json_file(file, "tokenizer");
  auto impl = std::make_unique<Impl>();
  impl->file = file;
  auto field = [&](const json& obj, const char* key, const char* where) -> const json& {
    KILN_CHECK(obj.is_object() && obj.contains(key), file, ": ", where, " has no \"", key, "\"");
    return obj.at(key);
  };
  const json& model = field(j, "model", "the file");
  std::string pattern;  // the split regex
  // every field read below: one of the wrong JSON type is a kiln::Error naming the file
  try {
    const std::string type = model.value("type", "");
    KILN_CHECK(type == "BPE", file, ": model type \"", type, "\" is not supported (BPE is)");
    KILN_CHECK(!model.value("byte_fallback", false), file,
               ": BPE with byte_fallback (SentencePiece style) is not supported");
    for (const auto& [tok, id] : field(model, "vocab", "model").items()) {
      const int64_t v = id.get<int64_t>();
      KILN_CHECK(v >= 0 && v < INT32_MAX, file, ": vocab id ", v, " of \"", tok, "\" is out of range");
      impl->vocab[tok] = static_cast<int32_t>(v);
    }
    int rank = 0;
    for (const auto& m : field(model, "merges", "model")) {
      std::string key;
      if (m.is_string()) {
        key = m.get<std::string>();
        KILN_CHECK(key.find(' ') != std::string::npos, file, ": merge ", rank, " \"", key, "\" is not \"left right\"");
      } else {
        KILN_CHECK(m.is_array() && m.size() == 2, file, ": merge ", rank, " is neither \"a b\" nor [a, b]");
        key = m[0].get<std::string>() + " " + m[1].get<std::string>();
      }
      impl->merge_rank.emplace(key, rank++);
    }
    if (j.contains("added_tokens"))
      for (const auto& t : j["added_tokens"]) {
        const std::string content = field(t, "content", "an added token").get<std::string>();
        const int64_t id = field(t, "id", "an added token").get<int64_t>();
        KILN_CHECK(id >= 0 && id < INT32_MAX && !content.empty(), file, ": added token \"", content, "\" has id ", id);
        impl->added.push_back({content, static_cast<int32_t>(id), t.value("special", false)});
      }
    std::stable_sort(impl->added.begin(), impl->added.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    for (size_t i = 0; i < impl->added.size(); ++i) impl->added_of_id[impl->added[i].id] = i;

    // normalizer: none or NFC (alone or in a Sequence)
    const json norm = j.value("normalizer", json());
    auto check_norm = [&](const json& n) {
      const std::string t = n.value("type", "");
      KILN_CHECK(t == "NFC", file, ": normalizer \"", t, "\" is not supported (NFC is)");
      impl->normalize_nfc = true;
    };
    if (norm.is_object()) {
      if (norm.value("type", "") == "Sequence")
        for (const auto& n : norm.value("normalizers", json::array())) check_norm(n);
      else
        check_norm(norm);
    }
    // pre_tokenizer: ByteLevel with GPT-2's regex, or a Split regex then ByteLevel without one
    const json pre = j.value("pre_tokenizer", json());
    auto byte_level = [&](const json& p, bool may_split) {
      KILN_CHECK(p.value("type", "") == "ByteLevel", file, ": pre_tokenizer \"", p.value("type", ""),
                 "\" is not supported (ByteLevel, and Split + ByteLevel are)");
      KILN_CHECK(!p.value("add_prefix_space", false), file, ": ByteLevel add_prefix_space is not supported");
      if (p.value("use_regex", true)) {
        KILN_CHECK(may_split, file, ": a Split regex and ByteLevel's own regex together are not supported");
        pattern = kGpt2Split;
      }
    };
    KILN_CHECK(pre.is_object(), file, ": no pre_tokenizer (byte-level BPE needs one)");
    if (pre.value("type", "") == "Sequence") {
      const json seq = pre.value("pretokenizers", json::array());
      KILN_CHECK(seq.size() == 2 && seq[0].value("type", "") == "Split", file,
                 ": pre_tokenizer Sequence must be [Split, ByteLevel]");
      const json& s = seq[0];
      KILN_CHECK(s.value("behavior", "") == "Isolated" && !s.value("invert", false), file,
                 ": Split behavior \"", s.value("behavior", ""), "\" is not supported (Isolated is)");
      KILN_CHECK(s.contains("pattern") && s["pattern"].contains("Regex"), file, ": Split has no Regex pattern");
      pattern = s["pattern"]["Regex"].get<std::string>();
      byte_level(seq[1], false);
    } else {
      byte_level(pre, true);
    }
    KILN_CHECK(!pattern.empty(), file, ": ByteLevel without a regex and no Split: nothing splits the text");
  } catch (const json::exception& e) {
    KILN_THROW(file, ": unexpected field type: ", e.what());
  }
  impl->compile_split(pattern);

  int32_t size = 0;
  for (const auto& [t, id] : impl->vocab) size = std::max(size, id + 1);
  for (const auto& a : impl->added) size = std::max(size, a.id + 1);
  impl->id_to_token.assign(static_cast<size_t>(size), std::string());
  for (const auto& [t, id] : impl->vocab) impl->id_to_token[id] = t;
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_char_len(text, i);
    KILN_CHECK(n > 0, "tokenize: the text is not valid UTF-8 at byte ", i);
    i += n;
  }
  std::vector<int32_t> ids;
  size_t start = 0;  // of the text not yet encoded
  for (size_t i = 0; i < text.size();) {
    const AddedToken* hit = nullptr;
    for (const auto& a : impl_->added)
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    impl_->encode_text(text.substr(start, i - start), ids);
    ids.push_back(hit->id);
    i += hit->content.size();
    start = i;
  }
  impl_->encode_text(text.substr(start), ids);
  return ids;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  KILN_CHECK(id >= 0 && id < vocab_size(), "detokenize: id ", id, " is out of range (vocabulary of ", vocab_size(), ")");
  auto a = impl_->added_of_id.find(id);
  if (a != impl_->added_of_id.end()) return impl_->added[a->second].content;
  const std::string& t = impl_->id_to_token[id];
  KILN_CHECK(!t.empty(), "detokenize: id ", id, " has no token in ", impl_->file);
  std::string out;
  for (size_t i = 0; i < t.size();) {
    utf8proc_int32_t cp;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(t.data() + i),
                                    static_cast<utf8proc_ssize_t>(t.size() - i), &cp);
    auto it = n > 0 ? alphabet().byte_of.find(static_cast<uint32_t>(cp)) : alphabet().byte_of.end();
    KILN_CHECK(it != alphabet().byte_of.end(), "detokenize: token ", id, " (\"", t,
               "\") has a character outside the byte-level alphabet");
    out += static_cast<char>(it->second);
    i += static_cast<size_t>(n);
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids)
    if (!(skip_special && is_special(id))) out += token_bytes(id);
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const auto& a : impl_->added)
    if (a.content == token) return a.id;
  auto it = impl_->vocab.find(std::string(token));
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_to_token.size()); }

bool Tokenizer::is_special(int32_t id) const {
  auto a = impl_->added_of_id.find(id);
  return a != impl_->added_of_id.end() && impl_->added[a->second].special;
}

std::string StreamDecoder::push(int32_t id) {
  if (skip_special_ && tok_.is_special(id)) return {};
  pending_ += tok_.token_bytes(id);
  // release up to the last complete character: a lead byte whose sequence is cut off stays
  size_t keep = pending_.size();
  for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
    const unsigned char c = static_cast<unsigned char>(pending_[pending_.size() - back]);
    if ((c & 0xc0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (need > back) keep = pending_.size() - back;
    break;
  }
  std::string out = pending_.substr(0, keep);
  pending_.erase(0, keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace kiln
