// The chat layer over the Jinja engine: the model's template rendered with its BOS/EOS texts,
// kwargs passed through, and the errors for no template and for templates that fail.
#include "serve/chat.h"

#include <gtest/gtest.h>

namespace daisy::serve {
namespace {

// The template daisy's generator writes (Meta's Llama 3 template).
constexpr const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif "
    "%}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

nlohmann::ordered_json Conversation(const char* text) { return nlohmann::ordered_json::parse(text); }

TEST(Chat, RendersTheModelsTemplateWithItsSpecialTokens) {
  auto t = ChatTemplate::Create(kLlama3, "<|begin_of_text|>", "<|eot_id|>");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto out = t->Apply(Conversation(R"({"messages": [{"role": "system", "content": "Be brief. "},
                                                     {"role": "user", "content": "\n Hi there\t"}]})"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // add_generation_prompt false, and bos_token overridden by the input.
  out = t->Apply(Conversation(R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": false,
                                  "bos_token": "<B>"})"));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "<B><|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>");
}

TEST(Chat, KwargsReachTheTemplate) {
  auto t = ChatTemplate::Create(
      "{% for m in messages %}{{ m.content }}{% endfor %}{% if enable_thinking is defined and enable_thinking is false %}"
      "<think></think>{% endif %}{{ tools | length }}",
      "", "");
  ASSERT_TRUE(t.ok());
  auto out = t->Apply(Conversation(R"({"messages": [{"role": "user", "content": "q"}], "enable_thinking": false,
                                       "tools": [{"type": "function"}]})"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "q<think></think>1");
}

TEST(Chat, NoTemplateAndFailingTemplatesAreClearErrors) {
  auto none = ChatTemplate::Create("", "", "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "the model has no chat template (tokenizer.chat_template): give one with "
                                     "--chat-template FILE, or use /v1/completions with a prompt");
  auto bad = ChatTemplate::Create("{% for m in messages %}{% include 'x' %}{% endfor %}", "", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "the chat template cannot be used: template line 1: the {% include %} statement is not supported");
  auto raises = ChatTemplate::Create("{{ raise_exception('Conversation roles must alternate') }}", "", "");
  ASSERT_TRUE(raises.ok());
  auto out = raises->Apply(Conversation(R"({"messages": []})"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "the chat template failed: template line 1: the template raised an error: Conversation roles must alternate");
  EXPECT_FALSE(raises->Apply(Conversation(R"({"no": "messages"})")).ok());
}

}  // namespace
}  // namespace daisy::serve
