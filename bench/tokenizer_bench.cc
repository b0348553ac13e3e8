// Times daisy's tokenizer on a text file: `reps` encodes of the whole text (model load and file
// read excluded). Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "apps/flags.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  daisy::apps::CommandLine cli("daisy tokenizer benchmark");
  daisy::apps::Flags& flags = cli.flags();
  std::string model_path, text_path;
  int reps = 5;
  bool special = false;
  flags.Option("-m,--model", model_path, "GGUF with the tokenizer").Required();
  flags.Option("--text", text_path, "UTF-8 text file").Required();
  flags.Option("--reps", reps, "Encodes to time").InRange(1, 1000);
  flags.Switch("--special", special, "Parse special-token text");
  if (const int code = cli.Parse(argc, argv); code >= 0) return code;

  auto reader = daisy::gguf::Reader::Open(model_path);
  if (!reader.ok()) {
    std::fprintf(stderr, "error: %s\n", reader.status().ToString().c_str());
    return 1;
  }
  const auto load_start = std::chrono::steady_clock::now();
  auto tok = daisy::tokenizer::Tokenizer::FromGguf(*reader);
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  std::ifstream in(text_path, std::ios::binary);
  const std::string text(std::istreambuf_iterator<char>(in), {});

  std::vector<double> seconds;
  size_t n_tokens = 0;
  uint64_t checksum = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok->Encode(text, special, false);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    n_tokens = ids.size();
    checksum = 0;
    for (int32_t id : ids) checksum = checksum * 1000003u + static_cast<uint32_t>(id);
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  nlohmann::json j = {{"bytes", text.size()},
                      {"tokens", n_tokens},
                      {"checksum", checksum},
                      {"load_seconds", load_seconds},
                      {"seconds", seconds},
                      {"min", sorted.front()},
                      {"median", sorted[sorted.size() / 2]},
                      {"max", sorted.back()},
                      {"mb_per_s_median", text.size() / 1e6 / sorted[sorted.size() / 2]}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
