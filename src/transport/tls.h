// TLS 1.3 on the links between daisy's nodes (OpenSSL), opt-in (docs/protocol.md, "TLS").
// Two ways to trust a peer:
//  * the cluster key: both sides derive a pre-shared key from the --key-file bytes (TLS 1.3
//    external PSK with an ephemeral ECDHE exchange, so traffic stays secret even if the key
//    leaks later); no certificates to manage;
//  * certificates: each node has its own certificate and private key, and accepts a peer whose
//    certificate the cluster's CA file signed (mutual TLS; names are not checked: the CA is
//    the cluster).
// A TlsSession is one link's TLS state. Its reader and its senders may run on different threads:
// every OpenSSL call is made under one lock on a non-blocking socket, and the waits for the
// socket happen outside it, so a reader blocked for data never holds up a sender.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "base/status.h"
#include "transport/net.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace daisy::transport {

class ClusterKey;

struct TlsFiles {
  std::string cert, key, ca;  // PEM files: this node's certificate (chain), its private key, the cluster CA
};

class TlsContext {
 public:
  static Result<std::shared_ptr<TlsContext>> FromClusterKey(const ClusterKey& key);
  static Result<std::shared_ptr<TlsContext>> FromFiles(const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  // "TLS 1.3 (cluster key)" or "TLS 1.3 (certificates)".
  std::string Describe() const;

 private:
  friend class TlsSession;
  TlsContext() = default;
  Status Configure(SSL_CTX* ctx, bool server);

  SSL_CTX* client_ = nullptr;
  SSL_CTX* server_ = nullptr;
  bool psk_ = false;
  unsigned char psk_bytes_[32] = {};
  TlsFiles files_;
};

// What the --tls and --tls-cert/--tls-key/--tls-ca flags ask for: certificates when any file is
// given, else (with --tls) the cluster key, which must then be given; nullptr: plain links.
Result<std::shared_ptr<const TlsContext>> TlsFromFlags(bool tls, const TlsFiles& files, const ClusterKey* key);

class TlsSession {
 public:
  // Runs the handshake on `fd` (which it makes non-blocking), within `timeout`.
  static Result<std::unique_ptr<TlsSession>> Handshake(const TlsContext& ctx, int fd, bool dialer,
                                                       const std::string& peer, Millis timeout);
  ~TlsSession();
  // Writes every byte (the pieces concatenated), or fails when the peer is gone.
  Status WriteAll(std::span<const std::span<const uint8_t>> pieces);
  // Reads exactly out.size() bytes; DeadlineExceeded ("timed out") after `timeout` (> 0) of silence.
  Status ReadAll(std::span<uint8_t> out, Millis timeout);
  // The negotiated protocol and cipher, e.g. "TLSv1.3 TLS_AES_128_GCM_SHA256".
  std::string Describe() const;

 private:
  TlsSession(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  SSL* ssl_;
  int fd_;
  std::mutex mu_;  // every SSL_* call on ssl_
};

}  // namespace daisy::transport
