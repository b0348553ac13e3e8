#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "tokenizer/hf_import.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"

namespace daisy::tokenizer {
namespace {

std::vector<std::string> Words(PreType type, std::string_view text) {
  auto pre = PreTokenizer::Create(type);
  EXPECT_TRUE(pre.ok());
  std::vector<std::string_view> words;
  pre->Split(text, words);
  return {words.begin(), words.end()};
}

using V = std::vector<std::string>;

TEST(PreTokenizer, Llama3Splits) {
  EXPECT_EQ(Words(PreType::kLlama3, "Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(Words(PreType::kLlama3, "I'M here"), (V{"I", "'M", " here"}));
  EXPECT_EQ(Words(PreType::kLlama3, "12345"), (V{"123", "45"}));
  EXPECT_EQ(Words(PreType::kLlama3, "a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(Words(PreType::kLlama3, "x\n\n  y"), (V{"x", "\n\n", " ", " y"}));
  EXPECT_EQ(Words(PreType::kLlama3, "end...\n"), (V{"end", "...\n"}));
  // U+0085 is whitespace for llama.cpp (PCRE2's \s would miss it).
  EXPECT_EQ(Words(PreType::kLlama3, "a\xc2\x85\xc2\x85" "b"), (V{"a", "\xc2\x85", "\xc2\x85" "b"}));
}

TEST(PreTokenizer, DefaultSplits) {
  EXPECT_EQ(Words(PreType::kDefault, "Hello, world!"), (V{"Hello", ",", " world", "!"}));
  EXPECT_EQ(Words(PreType::kDefault, "x 12345"), (V{"x", " ", "123", "45"}));
  EXPECT_EQ(Words(PreType::kDefault, "don't"), (V{"don", "'", "t"}));
}

TEST(Utf8, SanitizeFollowsLlamaCpp) {
  EXPECT_TRUE(IsValidUtf8("h\xc3\xa9"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));
  EXPECT_FALSE(IsValidUtf8("\xc0\x80"));  // overlong
  EXPECT_EQ(SanitizeUtf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(SanitizeUtf8("\xe4\xb8"), "\xef\xbf\xbd\xef\xbf\xbd");  // each bad byte replaced
  EXPECT_EQ(IncompleteUtf8Tail("a\xe4\xb8"), 2u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xe4\xb8\x96"), 0u);
  EXPECT_EQ(UnicodeToByte(0x120), ' ');
  EXPECT_EQ(ByteToUnicode('\n'), "\xc4\x8a");
}

TEST(Tokenizer, BuiltinVocabMergesAndRoundTrips) {
  auto tok = Tokenizer::Create(BuiltinByteVocab());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<int32_t> ids = tok->Encode(" the cat", false, false);
  // "t h" (rank 0) first, then "a t", "Ġ c", "Ġ th" and finally "Ġth e".
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(tok->Piece(ids[0]), " the");
  EXPECT_EQ(tok->Piece(ids[1]), " c");
  EXPECT_EQ(tok->Piece(ids[2]), "at");
  for (std::string s : {"", "Hello, wörld! 12345", "tab\tnew\nline  ", "日本語 🙂👍🏽",
                        "<|eot_id|> as text"}) {
    EXPECT_EQ(tok->Decode(tok->Encode(s, false, false), false), s);
  }
}

TEST(Tokenizer, SpecialTokensOnlyWhenAsked) {
  auto tok = Tokenizer::Create(BuiltinByteVocab());
  ASSERT_TRUE(tok.ok());
  const int32_t eot = tok->Find("<|eot_id|>");
  ASSERT_GE(eot, 0);
  EXPECT_TRUE(tok->is_eog(eot));
  EXPECT_EQ(tok->eot_id(), eot);
  const auto plain = tok->Encode("a<|eot_id|>", false, false);
  EXPECT_GT(plain.size(), 2u);
  const auto special = tok->Encode("a<|eot_id|>", true, false);
  EXPECT_EQ(special, (std::vector<int32_t>{tok->Find("a"), eot}));
  const auto with_bos = tok->Encode("a", false, true);
  EXPECT_EQ(with_bos.front(), tok->bos_id());
  EXPECT_EQ(tok->Decode(special, false), "a");
  EXPECT_EQ(tok->Decode(special, true), "a<|eot_id|>");
}

TEST(Tokenizer, StreamingNeverSplitsACharacter) {
  auto tok = Tokenizer::Create(BuiltinByteVocab());
  ASSERT_TRUE(tok.ok());
  const std::string text = "añ日🙂";
  StreamDecoder stream(*tok, false);
  std::string out;
  for (int32_t id : tok->Encode(text, false, false)) {
    const std::string part = stream.Push(id);
    EXPECT_TRUE(IsValidUtf8(part)) << part;
    out += part;
  }
  out += stream.Flush();
  EXPECT_EQ(out, text);
}

VocabData TinySpm() {
  // "▁" space, letters, byte tokens, and merged pieces with scores.
  VocabData v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    v.tokens.push_back(buf);
    v.token_types.push_back(6);
  }
  for (const char* t : {"\xe2\x96\x81", "h", "e", "l", "o", "\xe2\x96\x81h", "he", "ll",
                        "\xe2\x96\x81he", "llo", "\xe2\x96\x81hello"}) {
    v.tokens.push_back(t);
    v.token_types.push_back(1);
  }
  v.scores.assign(v.tokens.size(), 0.f);
  for (size_t i = 259; i < v.tokens.size(); ++i) v.scores[i] = -static_cast<float>(i);
  return v;
}

TEST(Tokenizer, SentencePieceWithByteFallback) {
  auto tok = Tokenizer::Create(TinySpm());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const auto ids = tok->Encode("hello", false, false);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(tok->vocab().tokens[ids[0]], "\xe2\x96\x81hello");
  // "x" is not in the vocabulary: byte fallback to <0x78>.
  const auto x = tok->Encode("hex", false, false);
  ASSERT_EQ(x.size(), 2u);
  EXPECT_EQ(tok->vocab().tokens[x[1]], "<0x78>");
  EXPECT_EQ(tok->Decode(x, false), "hex");
  EXPECT_EQ(tok->Decode(tok->Encode("hello hello", false, false), false), "hello hello");
  EXPECT_EQ(tok->Encode("h", false, true).front(), 1);  // BOS
}

TEST(Tokenizer, RejectsUnsupportedModels) {
  VocabData v = BuiltinByteVocab();
  v.pre = "chatglm-bpe";
  auto t = Tokenizer::Create(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("pre-tokenizer 'chatglm-bpe' is not supported"),
            std::string::npos);
  v.model = "t5";
  EXPECT_EQ(Tokenizer::Create(v).status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace daisy::tokenizer
