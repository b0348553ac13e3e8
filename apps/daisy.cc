// daisy: one binary, one sub-command per job. Flags -> options structs -> library calls.
// The only file that includes CLI11 (apps/flags.h says why).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/flags.h"
#include "base/log.h"

namespace daisy::apps {

Flag Flag::ShowDefault() {
  option_->capture_default_str();
  return *this;
}

Flag Flag::Required() {
  option_->required();
  return *this;
}

Flag Flag::InRange(double lo, double hi) {
  option_->check(CLI::Range(lo, hi));
  return *this;
}

Flag Flag::InRange(size_t lo, size_t hi) {
  option_->check(CLI::Range(lo, hi));
  return *this;
}

Flag Flag::OneOf(std::initializer_list<const char*> values) {
  option_->check(CLI::IsMember(std::vector<std::string>(values.begin(), values.end())));
  return *this;
}

Flag Flag::Each(std::function<void(const std::string&)> fn) {
  option_->each(std::move(fn));
  return *this;
}

bool Flag::Given() const { return option_ != nullptr && option_->count() > 0; }

template <typename T>
Flag Flags::Option(const std::string& names, T& value, const std::string& help) {
  return Flag(app_->add_option(names, value, help));
}

Flag Flags::Switch(const std::string& names, bool& value, const std::string& help) {
  return Flag(app_->add_flag(names, value, help));
}

// The value types the commands' flags have.
template Flag Flags::Option(const std::string&, std::string&, const std::string&);
template Flag Flags::Option(const std::string&, int&, const std::string&);
template Flag Flags::Option(const std::string&, double&, const std::string&);
template Flag Flags::Option(const std::string&, float&, const std::string&);
template Flag Flags::Option(const std::string&, size_t&, const std::string&);
template Flag Flags::Option(const std::string&, std::vector<std::string>&, const std::string&);

int Fail(const std::string& message) {
  std::fprintf(stderr, "daisy: error: %s\n", message.c_str());
  return 1;
}

}  // namespace daisy::apps

int main(int argc, char** argv) {
  CLI::App app{"daisy: large language models split into pipeline shards across ordinary PCs"};
  app.require_subcommand(1);
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  app.add_flag("-q,--quiet", quiet, "Only errors on stderr");

  std::map<CLI::App*, daisy::apps::Runner> runners;
  const auto add = [&](const char* name, const char* help, auto adder) {
    CLI::App* sub = app.add_subcommand(name, help);
    daisy::apps::Flags flags(*sub);
    runners[sub] = adder(flags);
  };
  add("gen-model", "Write a synthetic Llama GGUF with seeded random weights",
      daisy::apps::AddGenModel);
  add("quantize", "Re-write a model in a llama-quantize file type (q4_k_m, q6_k, iq4_xs, ...)",
      daisy::apps::AddQuantize);
  add("perplexity", "Perplexity over a text, and KL divergence against a base model",
      daisy::apps::AddPerplexity);
  add("inspect", "Show a GGUF file's metadata and tensors", daisy::apps::AddInspect);
  add("tokenize", "Turn text into token ids with a model's tokenizer", daisy::apps::AddTokenize);
  add("chat-template", "Render a conversation (JSON on stdin) with a model's chat template",
      daisy::apps::AddChatTemplate);
  add("detokenize", "Turn token ids back into text", daisy::apps::AddDetokenize);
  add("run", "Generate text with a model on this machine", daisy::apps::AddRun);
  add("score", "Log-probabilities of every position of a token sequence (teacher forcing)",
      daisy::apps::AddScore);
  add("compile", "Split a model into pre-packed pipeline shards, one per stage",
      daisy::apps::AddCompile);
  add("worker", "Serve one pipeline shard over TCP", daisy::apps::AddWorker);
  add("serve", "Serve many users over an OpenAI-compatible HTTP API (continuous batching)",
      daisy::apps::AddServe);
  add("proxy", "Forward TCP with added latency, jitter and a bandwidth limit (WAN emulator)",
      daisy::apps::AddProxy);

  CLI11_PARSE(app, argc, argv);
  daisy::SetLogLevel(verbose ? daisy::LogLevel::kDebug
                             : quiet ? daisy::LogLevel::kError : daisy::LogLevel::kInfo);
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) return run();
  }
  return daisy::apps::Fail("no sub-command given (see --help)");
}
