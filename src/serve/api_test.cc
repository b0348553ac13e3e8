// The API without sockets: request validation (every refusal an OpenAI-shaped error through one
// channel, with the status, parameter and code a client can act on), and the answers built from a
// request's tokens (stop strings held back and cut, usage, the event stream's shape).
#include "serve/api.h"

#include <gtest/gtest.h>

#include "serve/completion.h"
#include "tokenizer/hf_import.h"

namespace daisy::serve {
namespace {

struct Fixture {
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::Create(tokenizer::BuiltinByteVocab()).value();
  Result<ChatTemplate> chat = ChatTemplate::Create(tokenizer::BuiltinByteVocab().chat_template, "<|begin_of_text|>", "<|eot_id|>");
  ApiContext ctx{&tok, &chat, "tiny", 64, 8};
};

// The error for `body`, or status 0 when it is accepted.
ApiError Refusal(const std::string& body, bool chat = false, CompletionRequest* out = nullptr) {
  static Fixture f;
  CompletionRequest r;
  std::optional<ApiError> e = ParseCompletion(body, chat, f.ctx, out != nullptr ? *out : r);
  return e ? *e : ApiError{0, "", "", "", ""};
}

TEST(Api, AcceptsAPlainCompletionWithOpenAIsDefaults) {
  CompletionRequest r;
  ASSERT_EQ(Refusal(R"({"prompt": "hi", "seed": 7})", false, &r).status, 0);
  EXPECT_FALSE(r.chat);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.sampling.temperature, 1.0f);
  EXPECT_EQ(r.params.sampling.top_p, 1.0f);
  EXPECT_EQ(r.params.sampling.top_k, 0);
  EXPECT_EQ(r.params.sampling.seed, 7u);
  EXPECT_TRUE(r.params.stop_at_eog);
  EXPECT_FALSE(r.params.prompt.empty());
  ASSERT_EQ(Refusal(R"({"prompt": [5, 6, 7], "max_tokens": 3, "stop": ["a", "bc"], "stream": true,
                        "stream_options": {"include_usage": true}, "ignore_eos": true, "speculative_k": 2})",
                    false, &r).status, 0);
  EXPECT_EQ(r.params.prompt, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(r.params.max_tokens, 3);
  EXPECT_EQ(r.stops, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_FALSE(r.params.stop_at_eog);
  EXPECT_EQ(r.params.spec_k, 2);
  // A chat's default max_tokens is the rest of the context.
  ASSERT_EQ(Refusal(R"({"messages": [{"role": "user", "content": "hi"}]})", true, &r).status, 0);
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(r.params.max_tokens, 64 - static_cast<int>(r.params.prompt.size()));
}

TEST(Api, RefusesWhatItCannotServeWithTheParameterNamed) {
  struct Case {
    std::string body;
    bool chat;
    int status;
    std::string param, code, message;
  };
  const Case cases[] = {
      {"{", false, 400, "", "", "the request body is not valid JSON"},
      {"[1]", false, 400, "", "", "the request body must be a JSON object"},
      {R"({"model": "other", "prompt": "x"})", false, 404, "model", "model_not_found", "the model 'other' does not exist; this server serves 'tiny'"},
      {R"({"prompt": {"a": 1}})", false, 400, "prompt", "", "'prompt' must be a string, or an array of token ids"},
      {R"({"prompt": [1, 9999]})", false, 400, "prompt", "", "'prompt' token ids must be integers below"},
      {R"({"prompt": "x", "echo": true})", false, 400, "echo", "", "'echo' is not supported"},
      {R"({"prompt": "x", "max_tokens": 0})", false, 400, "max_tokens", "", "'max_tokens' is 0; it must be between 1"},
      {R"({"prompt": "x", "max_tokens": 100})", false, 400, "max_tokens", "context_length_exceeded", "is longer than this server's context of 64 tokens"},
      {R"({"prompt": "x", "temperature": "hot"})", false, 400, "temperature", "", "'temperature' must be a number"},
      {R"({"prompt": "x", "top_k": 1.5})", false, 400, "top_k", "", "'top_k' must be an integer"},
      {R"({"prompt": "x", "presence_penalty": 0.5})", false, 400, "presence_penalty", "", "is not supported (only 0)"},
      {R"({"prompt": "x", "logprobs": 9})", false, 400, "logprobs", "", "'logprobs' is 9; it must be between 0 and 5"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", true, 400, "top_logprobs", "", "needs 'logprobs': true"},
      {R"({"prompt": "x", "n": 9})", false, 400, "n", "", "'n' is 9; it must be between 1 and 8"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "a"}}}})", true, 400, "response_format", "", "'pattern' (at #) is not supported"},
      {R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", false, 400, "stop", "", "at most 4 strings"},
      {R"({"prompt": "x", "stop": [""]})", false, 400, "stop", "", "non-empty string"},
      {R"({"prompt": "x", "stream": 1})", false, 400, "stream", "", "'stream' must be a boolean"},
      {R"({"prompt": "x", "stream_options": {"include_usage": 2}})", false, 400, "stream_options", "", "'stream_options.include_usage' must be a boolean"},
      {R"({"prompt": "x", "speculative_k": 9})", false, 400, "speculative_k", "", "from 0 (adaptive) to 8"},
      {R"({"prompt": ")" + std::string(80, 'a') + R"("})", false, 400, "prompt", "context_length_exceeded", "this server's context is 64 tokens"},
      {R"({"messages": []})", true, 400, "messages", "", "'messages' must be a non-empty array"},
      {R"({"messages": [{"content": "x"}]})", true, 400, "messages[0]", "", "must be an object with a string 'role'"},
      {R"({"messages": [{"role": "function", "content": "x"}]})", true, 400, "messages[0].role", "", "daisy takes system, developer, user, assistant and tool"},
      {R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]})", true, 400, "messages[0].tool_calls[0].function.arguments", "", "is not valid JSON"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]})", true, 400, "chat_template_kwargs", "", "must be an object"},
      {R"({"messages": [{"role": "user"}]})", true, 400, "messages[0].content", "", "is missing"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true, 400, "messages[0].content", "", "daisy serves text only"},
  };
  for (const Case& c : cases) {
    const ApiError e = Refusal(c.body, c.chat);
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.code, c.code) << c.body;
    EXPECT_NE(e.message.find(c.message), std::string::npos) << c.body << ": " << e.message;
    EXPECT_EQ(ErrorBody(e)["error"]["message"], e.message);
  }
}

TEST(Api, ChatWithATemplateDaisyCannotRenderIsRefusedForChatOnly) {
  Fixture f;
  f.chat = ChatTemplate::Create("{{ x | something_daisy_does_not_know }}", "", "");
  ASSERT_FALSE(f.chat.ok());
  CompletionRequest r;
  auto e = ParseCompletion(R"({"messages": [{"role": "user", "content": "x"}]})", true, f.ctx, r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "unsupported_chat_template");
  EXPECT_FALSE(ParseCompletion(R"({"prompt": "x"})", false, f.ctx, r).has_value());
}

TEST(Api, StatusesMapToHttp) {
  EXPECT_EQ(FromStatus(ResourceExhausted("busy")).status, 429);
  EXPECT_EQ(FromStatus(Unavailable("down")).status, 503);
  EXPECT_EQ(FromStatus(OutOfRange("long")).code, "context_length_exceeded");
  EXPECT_EQ(FromStatus(Internal("bug")).status, 500);
}

TEST(Completion, StopStringsAreHeldBackAndCut) {
  Fixture f;
  StopText t(f.tok, {"END"});
  auto ids = [&](const std::string& s) { return f.tok.Encode(s, false, false); };
  EXPECT_EQ(t.Add(ids("hello E"), false), "hello ");  // "E" could start "END"
  EXPECT_EQ(t.Add(ids("N"), false), "");
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(t.Add(ids("Dtail"), false), "");
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.text(), "hello ");
  StopText u(f.tok, {"END"});
  EXPECT_EQ(u.Add(ids("abc E"), true), "abc E");  // at the end nothing is held back
}

}  // namespace
}  // namespace daisy::serve
