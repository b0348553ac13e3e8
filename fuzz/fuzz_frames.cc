// Wire messages, as a worker and a coordinator decode them: the first byte picks the decoder,
// the rest is the payload. Errors are fine; crashes and allocations past the limits are not.
#include <cstdint>
#include <span>

#include "pipeline/messages.h"
#include "pipeline/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> p(data + 1, size - 1);
  using namespace daisy::pipeline;
  Limits limits;
  limits.max_rows = 64;
  limits.max_seqs = 8;
  limits.max_history = 256;
  limits.max_top_k = 16;
  limits.d_model = 8;
  limits.n_vocab = 100;
  switch (data[0] % 9) {
    case 0: {
      ForwardHeader h;
      std::span<const uint8_t> a;
      (void)DecodeForward(p, limits, /*outputs=*/true, h, a);
      break;
    }
    case 1: {
      ForwardHeader h;
      std::span<const uint8_t> a;
      (void)DecodeForward(p, limits, /*outputs=*/false, h, a);
      break;
    }
    case 2: {
      ResultMsg r;
      (void)DecodeResult(p, limits, r);
      break;
    }
    case 3: {
      Configure c;
      (void)DecodeConfigure(p, c);
      break;
    }
    case 4: {
      daisy::shard::ShardInfo s;
      (void)DecodeShardInfo(p, s);
      break;
    }
    case 5: {
      uint64_t n = 0;
      (void)DecodePing(p, n);
      break;
    }
    case 6: {
      Pong pong;
      (void)DecodePong(p, pong);
      break;
    }
    case 7: {
      Configured c;
      (void)DecodeConfigured(p, limits.max_seqs, c);
      break;
    }
    default: {
      uint64_t id = 0;
      std::string message;
      (void)DecodeError(p, id, message);
      break;
    }
  }
  return 0;
}
