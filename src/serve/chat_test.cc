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

TEST(Chat, RendersLlama3) {
  auto f = DetectChatFormat(kLlama3);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(RenderChat(*f, {{"system", "Be brief. "}, {"user", "\n Hi there\t"}}),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(Chat, RefusesTemplatesItCannotRenderExactly) {
  auto none = DetectChatFormat("");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "the model has no chat template (tokenizer.chat_template): use "
                                     "/v1/completions with a prompt");
  const std::string chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                             "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
  auto c = DetectChatFormat(chatml);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "the model's chat template is not one daisy can render exactly (it "
                                  "renders the Llama 3 format); use /v1/completions with a prompt");
  // Llama 3.1's template adds a dated system preamble: not this family.
  EXPECT_FALSE(DetectChatFormat(std::string(kLlama3) + "Cutting Knowledge Date: December 2023").ok());
}

}  // namespace
}  // namespace daisy::serve
