// Framed messages (docs/protocol.md): a 12-byte header — magic "DSY1", u16 protocol version,
// u16 frame type, u32 payload length, all little-endian — then the payload. The reader checks
// magic, version and the length against a caller-given bound before allocating anything.
// Connection: one socket with a send lock (any thread may send whole frames) and one reader.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/net.h"
#include "transport/tls.h"

namespace daisy::transport {

inline constexpr uint32_t kMagic = 0x31595344;  // "DSY1"
// 2: forwards carry the output requests as one section; ping/pong. 3: configure carries the
// RoPE context (LongRoPE's factor choice). 4: pongs say how many sequences hold KV. 5: a resumed
// session keeps the workers' KV (Configure/Configured), and a forward may end before the last stage.
inline constexpr uint16_t kProtocolVersion = 5;
inline constexpr size_t kHeaderBytes = 12;

struct Frame {
  uint16_t type = 0;
  std::vector<uint8_t> payload;
};

class Connection {
 public:
  Connection(Socket socket, std::string peer) : socket_(std::move(socket)), peer_(std::move(peer)) {}

  const std::string& peer() const { return peer_; }
  // Sends one frame made of the concatenated pieces. Thread-safe.
  Status Send(uint16_t type, std::span<const std::span<const uint8_t>> pieces);
  Status Send(uint16_t type, std::span<const uint8_t> payload) {
    const std::span<const uint8_t> one[1] = {payload};
    return Send(type, one);
  }
  // Receives one frame whose payload is at most `max_payload` bytes; a bad magic, another
  // protocol version or a longer payload is a DataLoss and the connection must be closed.
  Result<Frame> Receive(size_t max_payload, Millis timeout = Millis(0));
  // Unblocks the reader and fails later sends.
  void Shutdown() { socket_.Shutdown(); }
  // From here on every frame travels inside TLS (the handshake runs now, within `timeout`).
  // Called by the authentication exchange, before any other thread uses the connection.
  Status StartTls(const TlsContext& ctx, bool dialer, Millis timeout);
  // "TLSv1.3 TLS_AES_128_GCM_SHA256", or "" on a plain link.
  std::string Security() const { return tls_ ? tls_->Describe() : ""; }

 private:
  Socket socket_;
  std::unique_ptr<TlsSession> tls_;
  std::string peer_;
  std::mutex send_mu_;
};

// Little-endian encoding helpers for payloads.
class Encoder {
 public:
  template <typename T>
  void Put(T v) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &v, sizeof(T));
  }
  void PutBytes(std::span<const uint8_t> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  void PutString(const std::string& s) {  // u32 length + bytes
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads a payload; every Get checks the remaining length (a short payload is a DataLoss naming
// `what`).
class Decoder {
 public:
  Decoder(std::span<const uint8_t> b, const char* what) : b_(b), what_(what) {}
  template <typename T>
  Status Get(T& v) {
    if (b_.size() - at_ < sizeof(T)) return Short();
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return Status::Ok();
  }
  Status GetBytes(size_t n, std::span<const uint8_t>& out) {
    if (b_.size() - at_ < n) return Short();
    out = b_.subspan(at_, n);
    at_ += n;
    return Status::Ok();
  }
  Status GetString(std::string& s, size_t max) {
    uint32_t n = 0;
    DAISY_RETURN_IF_ERROR(Get(n));
    if (n > max) return DataLoss("%s: a string of %u bytes (at most %zu)", what_, n, max);
    std::span<const uint8_t> b;
    DAISY_RETURN_IF_ERROR(GetBytes(n, b));
    s.assign(b.begin(), b.end());
    return Status::Ok();
  }
  size_t left() const { return b_.size() - at_; }
  Status ExpectEnd() const {
    if (left() != 0) return DataLoss("%s: %zu unexpected trailing bytes", what_, left());
    return Status::Ok();
  }

 private:
  Status Short() const { return DataLoss("%s: payload too short at byte %zu", what_, at_); }
  std::span<const uint8_t> b_;
  size_t at_ = 0;
  const char* what_;
};

}  // namespace daisy::transport
