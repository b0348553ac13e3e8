// daisy tokenize: stdin -> token ids with a model's tokenizer (no BOS added).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace daisy::apps {
namespace {

struct TokenizeFlags {
  std::string model;
  bool special = false;
  bool json = false;
};

int Run(const TokenizeFlags& f) {
  auto reader = gguf::Reader::Open(f.model);
  if (!reader.ok()) return Fail(reader.status().message());
  auto tok = tokenizer::Tokenizer::FromGguf(*reader);
  if (!tok.ok()) return Fail(tok.status().message());
  const std::string input(std::istreambuf_iterator<char>(std::cin), {});
  if (!f.json) {
    // Plain text in; ids and their pieces out, one per line.
    for (int32_t id : tok->Encode(input, f.special, false)) {
      const auto piece = nlohmann::json(std::string(tok->Piece(id)))
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      std::printf("%d\t%s\n", id, piece.c_str());
    }
    return 0;
  }
  nlohmann::json texts = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (texts.is_discarded()) return Fail("stdin is not valid JSON (expected a list of strings)");
  if (!texts.is_array()) return Fail("stdin must be a JSON list of strings");
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!texts[i].is_string()) {
      return Fail("element " + std::to_string(i) + " of the input list is not a string");
    }
    out.push_back(tok->Encode(texts[i].get_ref<const std::string&>(), f.special, false));
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int RunDetokenize(const TokenizeFlags& f) {
  auto reader = gguf::Reader::Open(f.model);
  if (!reader.ok()) return Fail(reader.status().message());
  auto tok = tokenizer::Tokenizer::FromGguf(*reader);
  if (!tok.ok()) return Fail(tok.status().message());
  const std::string input(std::istreambuf_iterator<char>(std::cin), {});
  nlohmann::json lists = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (lists.is_discarded() || !lists.is_array()) {
    return Fail("stdin must be a JSON list of token id lists");
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < lists.size(); ++i) {
    if (!lists[i].is_array()) return Fail("element " + std::to_string(i) + " is not a list");
    std::vector<int32_t> ids;
    for (const auto& id : lists[i]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() >= tok->n_vocab()) {
        return Fail("element " + std::to_string(i) + " holds " + id.dump() +
                    ", not a token id below " + std::to_string(tok->n_vocab()));
      }
      ids.push_back(id.get<int32_t>());
    }
    out.push_back(tok->Decode(ids, f.special));
  }
  // Pieces can end mid-character; such bytes are shown as U+FFFD in JSON.
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

Runner AddDetokenize(Flags& flags) {
  auto f = std::make_shared<TokenizeFlags>();
  flags.Option("-m,--model", f->model, "Model GGUF (or stage-0 shard) holding the tokenizer")
      .Required();
  flags.Switch("--special", f->special, "Render control tokens as their text");
  flags.Switch("--json", f->json, "stdin: a JSON list of id lists; stdout: a JSON list of strings")
      .Required();
  return [f] { return RunDetokenize(*f); };
}

Runner AddTokenize(Flags& flags) {
  auto f = std::make_shared<TokenizeFlags>();
  flags.Option("-m,--model", f->model, "Model GGUF (or stage-0 shard) holding the tokenizer")
      .Required();
  flags.Switch("--special", f->special, "Parse special-token text such as <|eot_id|>");
  flags.Switch("--json", f->json,
               "stdin: a JSON list of strings; stdout: a JSON list of id lists");
  return [f] { return Run(*f); };
}

}  // namespace daisy::apps
