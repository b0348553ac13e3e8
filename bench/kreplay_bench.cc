// Replays real greedy texts against the K controller and every fixed K, without the machine's
// noise: which positions of a text the draft predicts is a property of the text (greedy drafts
// from the true prefix), so one `daisy run --spec-k 12 --json` per prompt records it (its
// accepted_per_verify), and a verify's cost is a property of the pipeline (measured per K).
// Each text is then generated again in simulation by the adaptive controller (cold: as `daisy
// run`; warm: starting from the previous text's controller, as `daisy serve`; profile: from
// what the previous text's run saved, as `daisy run --spec-profile`) and by fixed K,
// with the verify times jittered by --noise, over --seeds seeds. A trace that carries the draft's
// confidences (`draft_confidence`, daisy run --json) is replayed with them, so the adaptive rule
// may stop drafting on them (KController::MoreDrafts) as it does live; fixed K never does.
// Prints one JSON object.
//
//   daisy-bench-kreplay --verify-ms 352,380,422,451,512 --draft-ms 27 TRACE.json...
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "apps/flags.h"
#include "coord/k_controller_sim.h"

namespace {

using daisy::coord::KController;

struct Costs {
  std::vector<double> verify_ms;  // per K from 0; continued along its last step
  double draft_ms = 0;
  double noise = 0.2;
  double Verify(int k) const {
    const int last = static_cast<int>(verify_ms.size()) - 1;
    if (k <= last) return verify_ms[k];
    const double step = last > 0 ? verify_ms[last] - verify_ms[last - 1] : 0;
    return verify_ms[last] + (k - last) * step;
  }
};

// The predicted bit per generated position (position 0 is the prefill's token) from a trace:
// a verify at `pos` accepting L of K drafts predicted pos .. pos+L-1 and missed pos+L. A bonus
// token's position (all K accepted) was not tested: counted as predicted. If the trace has the
// draft's confidences (`draft_confidence`), `confidence` gets the draft's at each position
// given the true tokens before it (drafts pos .. pos+L of that verify; 1 at a bonus position).
struct Text {
  std::vector<bool> predicted;
  std::vector<float> confidence;  // empty: not in the trace
};

Text TextFromTrace(const nlohmann::json& j, std::string& error) {
  const auto& s = j.at("speculative");
  const auto& acc = s.at("accepted_per_verify");
  const auto& ks = s.at("k_chosen");
  const int n = j.at("generated_tokens").get<int>();
  if (acc.size() != ks.size() || n < 2 || n > 1 << 20) {
    error = "not a speculative trace (accepted_per_verify and k_chosen differ, or no tokens)";
    return {};
  }
  const bool with_confidence = s.contains("draft_confidence");
  if (with_confidence && s.at("draft_confidence").size() != ks.size()) {
    error = "draft_confidence and k_chosen differ in length";
    return {};
  }
  std::vector<bool> bits(static_cast<size_t>(n) + 80, true);
  std::vector<float> confidence(with_confidence ? bits.size() : 0, 1.0f);
  size_t pos = 1;
  for (size_t v = 0; v < acc.size() && pos < bits.size(); ++v) {
    const int l = acc[v].get<int>(), k = ks[v].get<int>();
    if (l < 0 || l > k || k > 64) {
      error = "accepted_per_verify out of range";
      return {};
    }
    if (l < k && pos + l < bits.size()) bits[pos + l] = false;
    if (with_confidence) {
      const auto& c = s.at("draft_confidence")[v];
      if (c.size() != static_cast<size_t>(k)) {
        error = "a verify's draft_confidence does not have k_chosen entries";
        return {};
      }
      for (int i = 0; i <= l && i < k && pos + i < confidence.size(); ++i) confidence[pos + i] = c[i].get<float>();
    }
    pos += static_cast<size_t>(l) + 1;
  }
  bits.resize(static_cast<size_t>(n));
  if (with_confidence) confidence.resize(static_cast<size_t>(n));
  return {bits, confidence};
}

// Milliseconds to generate the text's tokens after the first with fixed K (adaptive when 0).
// `learned`: a warm start from it (then what this text learned); `profile`: a start from it as
// `daisy run --spec-profile` (KController::Restore, then Export).
double Replay(const Text& text, const Costs& c, int fixed_k, int k_max, uint32_t seed,
              std::optional<KController>* learned, std::optional<KController::Learned>* profile = nullptr) {
  KController k_control(fixed_k, k_max);
  if (learned != nullptr && learned->has_value()) k_control.StartFrom(**learned);
  if (profile != nullptr && profile->has_value()) k_control.Restore(**profile);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  const double seconds = daisy::coord::GenerateText(
      k_control, text.predicted, 1, static_cast<int>(text.predicted.size()), c.draft_ms / 1000,
      [&](int k) { return c.Verify(k) * (1 + c.noise * u(rng)) / 1000; },
      text.confidence.empty() ? nullptr : &text.confidence);
  if (learned != nullptr) *learned = k_control;
  if (profile != nullptr) *profile = k_control.Export();
  return seconds * 1000;
}

}  // namespace

int main(int argc, char** argv) {
  daisy::apps::CommandLine cli("Replays recorded greedy texts against the adaptive K controller and fixed K");
  daisy::apps::Flags& flags = cli.flags();
  std::vector<double> verify_ms;
  Costs costs;
  int seeds = 20, k_max = 12;
  std::vector<std::string> traces;
  flags.Option("--verify-ms", verify_ms, "A verify's milliseconds at K = 0, 1, ... (K = 0: a plain decode)")
      .Delimiter(',')
      .Required();
  flags.Option("--draft-ms", costs.draft_ms, "The drafter's milliseconds per drafted token").Required();
  flags.Option("--noise", costs.noise, "Verify times jitter by up to +-noise/2").ShowDefault();
  flags.Option("--seeds", seeds, "Jitter seeds per text").ShowDefault().InRange(1, 10000);
  flags.Option("--spec-k-max", k_max, "Largest K").ShowDefault().InRange(1, 64);
  flags.Option("traces", traces, "`daisy run --spec-k 12 --json` outputs, one per text").Required();
  if (const int code = cli.Parse(argc, argv); code >= 0) return code;
  if (verify_ms.empty() || std::any_of(verify_ms.begin(), verify_ms.end(), [](double x) { return !(x > 0); })) {
    std::fprintf(stderr, "daisy-bench-kreplay: --verify-ms needs positive times\n");
    return 1;
  }
  costs.verify_ms = verify_ms;
  std::vector<Text> texts;
  size_t tokens = 0;
  for (const auto& f : traces) {
    std::ifstream in(f);
    nlohmann::json j;
    try {
      in >> j;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "daisy-bench-kreplay: %s: not JSON (%s)\n", f.c_str(), e.what());
      return 1;
    }
    std::string error;
    Text text;
    try {
      text = TextFromTrace(j, error);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (text.predicted.empty()) {
      std::fprintf(stderr, "daisy-bench-kreplay: %s: %s\n", f.c_str(), error.c_str());
      return 1;
    }
    tokens += text.predicted.size() - 1;
    texts.push_back(std::move(text));
  }
  // Tokens per second over all texts and seeds (total tokens over total time), per mode.
  std::vector<double> fixed_ms(k_max + 1, 0);
  double cold_ms = 0, warm_ms = 0, profile_ms = 0;
  std::optional<KController> learned;
  std::optional<KController::Learned> profile;
  for (int s = 1; s <= seeds; ++s) {
    for (const auto& text : texts) {
      cold_ms += Replay(text, costs, 0, k_max, s, nullptr);
      warm_ms += Replay(text, costs, 0, k_max, s, &learned);
      profile_ms += Replay(text, costs, 0, k_max, s, nullptr, &profile);
      for (int k = 1; k <= k_max; ++k) fixed_ms[k] += Replay(text, costs, k, k_max, s, nullptr);
    }
  }
  const double total = static_cast<double>(tokens) * seeds;
  nlohmann::json fixed = nlohmann::json::object();
  int best = 1;
  for (int k = 1; k <= k_max; ++k) {
    fixed["k" + std::to_string(k)] = total / fixed_ms[k] * 1000;
    if (fixed_ms[k] < fixed_ms[best]) best = k;
  }
  const double best_tok_s = total / fixed_ms[best] * 1000;
  nlohmann::json out = {{"bench", "kreplay"},
                        {"texts", texts.size()},
                        {"tokens", tokens},
                        {"seeds", seeds},
                        {"verify_ms", verify_ms},
                        {"draft_ms", costs.draft_ms},
                        {"noise", costs.noise},
                        {"plain_tok_s", 1000 / costs.Verify(0)},
                        {"cold_tok_s", total / cold_ms * 1000},
                        {"warm_tok_s", total / warm_ms * 1000},
                        {"profile_tok_s", total / profile_ms * 1000},
                        {"fixed_tok_s", fixed},
                        {"best_fixed_k", best},
                        {"best_fixed_tok_s", best_tok_s},
                        {"cold_over_best", fixed_ms[best] / cold_ms},
                        {"warm_over_best", fixed_ms[best] / warm_ms},
                        {"profile_over_best", fixed_ms[best] / profile_ms}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
