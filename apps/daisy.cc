// daisy: one binary, one sub-command per job. Flags -> options structs -> library calls.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/flags.h"
#include "base/log.h"

namespace daisy::apps {

int Fail(const std::string& message) {
  std::fprintf(stderr, "daisy: error: %s\n", message.c_str());
  return 1;
}

}  // namespace daisy::apps

int main(int argc, char** argv) {
  daisy::apps::CommandLine cli("daisy: large language models split into pipeline shards across ordinary PCs");
  bool verbose = false, quiet = false;
  cli.flags().Switch("-v,--verbose", verbose, "Debug logging");
  cli.flags().Switch("-q,--quiet", quiet, "Only errors on stderr");

  std::vector<daisy::apps::Runner> runners;
  const auto add = [&](const char* name, const char* help, auto adder) {
    runners.push_back(adder(cli.AddCommand(name, help)));
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

  if (const int code = cli.Parse(argc, argv); code >= 0) return code;
  daisy::SetLogLevel(verbose ? daisy::LogLevel::kDebug
                             : quiet ? daisy::LogLevel::kError : daisy::LogLevel::kInfo);
  if (const int chosen = cli.chosen(); chosen >= 0) return runners[chosen]();
  return daisy::apps::Fail("no sub-command given (see --help)");
}
