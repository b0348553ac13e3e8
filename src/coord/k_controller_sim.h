// Generating a greedy text in simulation with a K controller, for the controller's tests and
// bench/kreplay_bench.cc: whether the draft predicts the token at a position (given the true
// tokens before it) is a property of the position, so a verify from `pos` with K drafts accepts
// the run of predicted positions from `pos` (at most K) and yields one token more.
#pragma once

#include <algorithm>
#include <vector>

#include "coord/k_controller.h"

namespace daisy::coord {

// Generates positions [from, to) of `predicted` with `c` choosing K; `verify_seconds(k)` is one
// verify's time (called once per verify, in order), `draft_seconds` one drafted token's. With
// `confidence` (the draft's at each position, given the true tokens before it), drafting stops
// where c.MoreDrafts says so. Returns the seconds spent.
template <class VerifySeconds>
double GenerateText(KController& c, const std::vector<bool>& predicted, int from, int to, double draft_seconds,
                    VerifySeconds&& verify_seconds, const std::vector<float>* confidence = nullptr) {
  double seconds = 0;
  int pos = from;
  std::vector<float> conf;
  while (pos < to) {
    const int cap = std::max(0, std::min(c.Choose(), to - pos - 1));
    int k = 0;
    conf.clear();
    while (k < cap) {
      ++k;
      if (confidence == nullptr) continue;
      conf.push_back((*confidence)[pos + k - 1]);
      if (!c.MoreDrafts(conf)) break;
    }
    if (k > 0) c.Drafted(k, k * draft_seconds);
    int accepted = 0;
    while (accepted < k && predicted[pos + accepted]) ++accepted;
    const double t = verify_seconds(k);
    c.Verified(k, accepted, t, 0, conf);
    c.Stepped(k, t + k * draft_seconds);
    seconds += t + k * draft_seconds;
    pos += accepted + 1;
  }
  return seconds;
}

}  // namespace daisy::coord
