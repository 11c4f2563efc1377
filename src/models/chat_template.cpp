// Chat prompts in the ChatML and Llama 3 formats (see chat_template.h).
#include "models/chat_template.h"

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "models/json_file.h"

namespace kiln {

ChatTemplate ChatTemplate::from_file(const std::string& path) {
  const std::string file = file_or_in_folder(path, "tokenizer_config.json");
  const nlohmann::json j = read_json_file(file, "chat template");
  KILN_CHECK(j.contains("chat_template") && j["chat_template"].is_string(), file, ": has no chat_template string");
  const std::string t = j["chat_template"].get<std::string>();
  ChatTemplate ct;
  if (t.find("<|im_start|>") != std::string::npos && t.find("<|im_end|>") != std::string::npos) {
    // Qwen2.5's template inserts a default system prompt; Qwen3's (the one rendered here) does not
    KILN_CHECK(t.find("You are Qwen, created by Alibaba Cloud") == std::string::npos, file,
               ": this ChatML template adds a default system prompt, which is not supported");
    ct.format = ChatFormat::ChatML;
  } else if (t.find("<|start_header_id|>") != std::string::npos && t.find("<|eot_id|>") != std::string::npos) {
    ct.format = ChatFormat::Llama3;
    // a string, or as older files write it, an added token {"content": "...", ...}
    const bool added_token = j.contains("bos_token") && j["bos_token"].is_object();
    ct.bos = json_string(added_token ? j["bos_token"] : j, added_token ? "content" : "bos_token",
                         "<|begin_of_text|>", "chat template", file);
  } else {
    KILN_NOT_IMPLEMENTED(file, ": chat_template is neither ChatML (<|im_start|>/<|im_end|>) nor Llama 3 "
                         "(<|start_header_id|>/<|eot_id|>); other templates are not supported");
  }
  return ct;
}

namespace {
// An assistant turn without its reasoning: what follows </think>, leading newlines dropped (Qwen3).
std::string without_reasoning(const std::string& content) {
  const size_t end = content.rfind("</think>");
  if (end == std::string::npos) return content;
  const size_t start = content.find_first_not_of('\n', end + 8);
  return start == std::string::npos ? std::string() : content.substr(start);
}
}  // namespace

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 bool enable_thinking) const {
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& r = messages[i].role;
    KILN_CHECK(r == "system" || r == "user" || r == "assistant", "chat template: message ", i, " has role \"", r,
               "\" (system, user and assistant are supported)");
  }
  std::string out;
  if (format == ChatFormat::Llama3) {
    out = bos;
    for (const auto& m : messages)
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
    if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
  }
  // ChatML as Qwen3's template writes it: an assistant turn after the last user turn would
  // carry its reasoning in a think block, which the common case does not need
  size_t last_user = messages.size();
  for (size_t i = messages.size(); i-- > 0;)
    if (messages[i].role == "user") {
      last_user = i;
      break;
    }
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role == "assistant") {
      KILN_CHECK(last_user != messages.size() && i < last_user, "chat template: an assistant turn after the last "
                 "user turn (message ", i, ") is not supported; end the conversation with a user turn");
      out += "<|im_start|>assistant\n" + without_reasoning(m.content) + "<|im_end|>\n";
    } else {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace kiln
