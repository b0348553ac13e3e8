// Node authentication (docs/protocol.md): with a cluster key, every connection opens with a
// mutual challenge-response — HMAC-SHA256 over both sides' random nonces — before any other
// frame is accepted; frames before that are bounded to a few dozen bytes. Without a key both
// sides must agree to run open (a keyed side refuses an open peer and says why).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/frame.h"

namespace daisy::transport {

enum FrameType : uint16_t {
  kHello = 1,     // acceptor -> dialer: u8 keyed, nonce[32]
  kAuth = 2,      // dialer -> acceptor: u8 keyed, nonce[32], mac[32]
  kAuthOk = 3,    // acceptor -> dialer: mac[32]
  kAuthFail = 4,  // acceptor -> dialer: u32 length + reason
  kStartTls = 5,  // acceptor -> dialer, empty, in the clear: a TLS handshake follows (the dialer starts it)
};

class ClusterKey {
 public:
  // The key file's bytes (a trailing newline is dropped); at least 16 bytes.
  static Result<ClusterKey> Load(const std::filesystem::path& path);
  static ClusterKey FromBytes(std::string bytes) { return ClusterKey(std::move(bytes)); }
  const std::string& bytes() const { return bytes_; }

 private:
  explicit ClusterKey(std::string b) : bytes_(std::move(b)) {}
  std::string bytes_;
};

// Acceptor side. `key` null: open. Fails (the caller drops the connection and logs) when the
// peer does not prove it holds the key, or is open while we are keyed. `tls` non-null: the link
// switches to TLS first (kStartTls, then the handshake) and the key exchange runs inside it.
Status AuthenticateAcceptor(Connection& conn, const ClusterKey* key, Millis timeout, const TlsContext* tls = nullptr);
// Dialer side: fails when the acceptor does not prove it holds the key, refuses us, or runs
// open while we are keyed, or when one side uses TLS and the other does not (named).
Status AuthenticateDialer(Connection& conn, const ClusterKey* key, Millis timeout, const TlsContext* tls = nullptr);

}  // namespace daisy::transport
