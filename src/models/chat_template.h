// The chat templates of tokenizer_config.json for the common case: system, user
// and assistant turns of plain text (no tools), as transformers'
// apply_chat_template renders them. Not a Jinja engine: the template text is
// recognised by its markers (ChatML as Qwen writes it; Llama 3's header tokens),
// and any other template raises, naming what it lacks.
#pragma once

#include <string>
#include <vector>

namespace kiln {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

enum class ChatFormat { ChatML, Llama3 };

struct ChatTemplate {
  ChatFormat format = ChatFormat::ChatML;
  std::string bos;  // Llama 3's <|begin_of_text|>; empty for ChatML

  // Reads tokenizer_config.json (or the folder that holds it) and recognises its chat_template.
  static ChatTemplate from_file(const std::string& path);
  // The prompt text; add_generation_prompt opens the assistant's turn, and
  // enable_thinking = false closes Qwen3's think block at once, as its template does.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                     bool enable_thinking = true) const;
};

}  // namespace kiln
