// Reasoning and tool calls parsed out of chat output, whole and as it grows: every prefix of an
// output parses to a prefix of the final answer (a stream never takes back what it sent).
#include "serve/chat_output.h"

#include <gtest/gtest.h>

namespace daisy::serve {
namespace {

ChatOutputFormat Format(bool reasoning, bool open, ToolFormat tools) {
  ChatOutputFormat f;
  f.reasoning = reasoning;
  f.thinking_open = open;
  f.tools = tools;
  return f;
}

// Parses every prefix of `text` as a growing stream would, checking that reasoning and content
// only grow and calls are only added; returns the final parse.
ChatOutput Streamed(const ChatOutputFormat& f, const std::string& text) {
  ChatOutput last;
  for (size_t n = 0; n <= text.size(); ++n) {
    const ChatOutput o = ParseChatOutput(f, text.substr(0, n), false);
    EXPECT_EQ(o.reasoning.compare(0, last.reasoning.size(), last.reasoning), 0) << "reasoning shrank at " << n;
    EXPECT_EQ(o.content.compare(0, last.content.size(), last.content), 0) << "content shrank at " << n << ": '"
                                                                           << last.content << "' -> '" << o.content << "'";
    EXPECT_GE(o.calls.size(), last.calls.size()) << n;
    last = o;
  }
  const ChatOutput final_parse = ParseChatOutput(f, text, true);
  EXPECT_EQ(final_parse.reasoning.compare(0, last.reasoning.size(), last.reasoning), 0);
  EXPECT_EQ(final_parse.content.compare(0, last.content.size(), last.content), 0);
  return final_parse;
}

TEST(ChatOutput, Qwen3ThinksThenCallsTools) {
  const auto f = Format(true, false, ToolFormat::kHermes);
  const std::string text =
      "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {}}\n</tool_call>";
  const ChatOutput o = Streamed(f, text);
  EXPECT_EQ(o.reasoning, "The user wants weather.");
  EXPECT_EQ(o.content, "Let me check.\n");
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[0].name, "get_weather");
  EXPECT_EQ(o.calls[0].arguments, "{\"city\":\"Paris\",\"days\":2}");
  EXPECT_EQ(o.calls[1].name, "get_time");
  EXPECT_EQ(o.calls[1].arguments, "{}");
}

TEST(ChatOutput, AnOpenThinkFromThePromptIsReasoningUntilItCloses) {
  // DeepSeek-R1 distills: the prompt ends with "<think>\n".
  const auto f = Format(true, true, ToolFormat::kNone);
  const ChatOutput o = Streamed(f, "Hmm, 2 + 2.\n</think>\n\nIt is 4.");
  EXPECT_EQ(o.reasoning, "Hmm, 2 + 2.");
  EXPECT_EQ(o.content, "It is 4.");
  // Never closed: all reasoning.
  const ChatOutput open = ParseChatOutput(f, "still thinking", true);
  EXPECT_EQ(open.reasoning, "still thinking");
  EXPECT_EQ(open.content, "");
  // Without reasoning parsing, the tags are text.
  EXPECT_EQ(ParseChatOutput(Format(false, false, ToolFormat::kNone), "<think>x</think>y", true).content, "<think>x</think>y");
}

TEST(ChatOutput, TextThatIsNotACallStaysText) {
  const auto f = Format(false, false, ToolFormat::kHermes);
  const ChatOutput o = Streamed(f, "a <tool_call>not json</tool_call> b <tool");
  EXPECT_TRUE(o.calls.empty());
  EXPECT_EQ(o.content, "a <tool_call>not json</tool_call> b <tool");
  // An unclosed call at the end that parses is a call (the model stopped at its end token).
  const ChatOutput unclosed = ParseChatOutput(f, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}", true);
  ASSERT_EQ(unclosed.calls.size(), 1u);
  EXPECT_EQ(unclosed.calls[0].arguments, "{\"x\":1}");
}

TEST(ChatOutput, Llama3JsonCalls) {
  const auto f = Format(false, false, ToolFormat::kLlama3);
  const ChatOutput o = Streamed(f, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Zürich\"}}");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].name, "get_weather");
  EXPECT_EQ(o.calls[0].arguments, "{\"city\":\"Zürich\"}");
  EXPECT_EQ(o.content, "");
  const ChatOutput tagged = Streamed(f, "<|python_tag|>{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(tagged.calls.size(), 1u);
  // Plain answers stream as they come; JSON that is not a call is text at the end.
  EXPECT_EQ(Streamed(f, "Hello there").content, "Hello there");
  EXPECT_EQ(Streamed(f, "{\"a\": 1}").content, "{\"a\": 1}");
}

TEST(ChatOutput, MistralCalls) {
  const auto f = Format(false, false, ToolFormat::kMistral);
  const ChatOutput a = Streamed(f, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}, {\"name\": \"g\", \"arguments\": {}}]");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[1].name, "g");
  const ChatOutput b = Streamed(f, "[TOOL_CALLS]search[ARGS]{\"q\": \"daisy\"}[TOOL_CALLS]open[ARGS]{\"id\": 3}");
  ASSERT_EQ(b.calls.size(), 2u);
  EXPECT_EQ(b.calls[0].name, "search");
  EXPECT_EQ(b.calls[1].arguments, "{\"id\":3}");
  const ChatOutput bad = Streamed(f, "Sure. [TOOL_CALLS]oops");
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "Sure. [TOOL_CALLS]oops");
}

TEST(ChatOutput, DetectedFromTheTemplate) {
  const auto q = DetectChatOutput("...<tool_call>...<think>...", "<|im_start|>assistant\n", true, "auto");
  EXPECT_TRUE(q.reasoning);
  EXPECT_FALSE(q.thinking_open);
  EXPECT_EQ(q.tools, ToolFormat::kHermes);
  EXPECT_TRUE(DetectChatOutput("<think>", "x<｜Assistant｜><think>\n", false, "auto").thinking_open);
  EXPECT_FALSE(DetectChatOutput("<think>", "x", false, "none").reasoning);
  EXPECT_EQ(DetectChatOutput("<tool_call>", "x", false, "auto").tools, ToolFormat::kNone);  // no tools offered
  EXPECT_EQ(DetectChatOutput("<|start_header_id|>{\"name\": function name, \"parameters\": ...", "x", true, "auto").tools,
            ToolFormat::kLlama3);
  EXPECT_EQ(DetectChatOutput("[TOOL_CALLS]", "x", true, "auto").tools, ToolFormat::kMistral);
}

}  // namespace
}  // namespace daisy::serve
