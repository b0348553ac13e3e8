#include "transport/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <fstream>
#include <sstream>

namespace daisy::transport {
namespace {

constexpr size_t kNonce = 32, kMac = 32, kMaxAuthFrame = 256;
using Bytes32 = std::array<uint8_t, 32>;

Bytes32 Mac(const ClusterKey& key, const char* role, const uint8_t* a, const uint8_t* b) {
  std::vector<uint8_t> msg(role, role + std::strlen(role));
  msg.insert(msg.end(), a, a + kNonce);
  msg.insert(msg.end(), b, b + kNonce);
  Bytes32 out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.bytes().data(), static_cast<int>(key.bytes().size()), msg.data(),
       msg.size(), out.data(), &len);
  return out;
}

Status Random(uint8_t* out, size_t n) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1) return Internal("no random bytes from OpenSSL");
  return Status::Ok();
}

}  // namespace

Result<ClusterKey> ClusterKey::Load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read the cluster key file %s", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  while (!bytes.empty() && (bytes.back() == '\n' || bytes.back() == '\r')) bytes.pop_back();
  if (bytes.size() < 16) {
    return InvalidArgument("cluster key file %s holds %zu bytes; use at least 16 (for example "
                           "`head -c 32 /dev/urandom | base64 > %s`)", path.c_str(), bytes.size(),
                           path.c_str());
  }
  if (bytes.size() > 4096) return InvalidArgument("cluster key file %s is over 4096 bytes", path.c_str());
  return ClusterKey(std::move(bytes));
}

Status AuthenticateAcceptor(Connection& conn, const ClusterKey* key, Millis timeout, const TlsContext* tls) {
  if (tls != nullptr) {
    DAISY_RETURN_IF_ERROR(conn.Send(kStartTls, std::span<const uint8_t>{}));
    DAISY_RETURN_IF_ERROR(conn.StartTls(*tls, /*dialer=*/false, timeout));
  }
  uint8_t nonce_s[kNonce];
  DAISY_RETURN_IF_ERROR(Random(nonce_s, kNonce));
  Encoder hello;
  hello.Put<uint8_t>(key != nullptr ? 1 : 0);
  hello.PutBytes(nonce_s);
  DAISY_RETURN_IF_ERROR(conn.Send(kHello, hello.bytes()));
  DAISY_ASSIGN_OR_RETURN(Frame f, conn.Receive(kMaxAuthFrame, timeout));
  if (f.type != kAuth) return DataLoss("%s: expected an authentication frame, got type %u", conn.peer().c_str(), f.type);
  Decoder d(f.payload, "auth frame");
  uint8_t keyed = 0;
  std::span<const uint8_t> nonce_c, mac_c;
  DAISY_RETURN_IF_ERROR(d.Get(keyed));
  DAISY_RETURN_IF_ERROR(d.GetBytes(kNonce, nonce_c));
  DAISY_RETURN_IF_ERROR(d.GetBytes(kMac, mac_c));
  DAISY_RETURN_IF_ERROR(d.ExpectEnd());
  auto refuse = [&](const std::string& reason) {
    Encoder e;
    e.PutString(reason);
    (void)conn.Send(kAuthFail, e.bytes());
    return PermissionDenied("%s: %s", conn.peer().c_str(), reason.c_str());
  };
  if (key == nullptr) {
    if (keyed) return refuse("this node runs without a cluster key, the peer has one");
    Encoder ok;
    ok.PutBytes(Bytes32{});
    return conn.Send(kAuthOk, ok.bytes());
  }
  if (!keyed) return refuse("this node requires a cluster key (--key-file)");
  const Bytes32 want = Mac(*key, "daisy-dialer", nonce_s, nonce_c.data());
  if (CRYPTO_memcmp(want.data(), mac_c.data(), kMac) != 0) {
    return refuse("wrong cluster key");
  }
  Encoder ok;
  ok.PutBytes(Mac(*key, "daisy-acceptor", nonce_c.data(), nonce_s));
  return conn.Send(kAuthOk, ok.bytes());
}

Status AuthenticateDialer(Connection& conn, const ClusterKey* key, Millis timeout, const TlsContext* tls) {
  DAISY_ASSIGN_OR_RETURN(Frame f, conn.Receive(kMaxAuthFrame, timeout));
  if (f.type == kStartTls) {
    if (tls == nullptr) {
      return PermissionDenied("%s requires TLS: start this side with --tls (and the same --key-file) or the "
                              "cluster's --tls-cert/--tls-key/--tls-ca", conn.peer().c_str());
    }
    DAISY_RETURN_IF_ERROR(conn.StartTls(*tls, /*dialer=*/true, timeout));
    DAISY_ASSIGN_OR_RETURN(f, conn.Receive(kMaxAuthFrame, timeout));
  } else if (f.type == kHello && tls != nullptr) {
    return PermissionDenied("%s does not use TLS; refusing to talk to it in the clear (start it with --tls too)",
                            conn.peer().c_str());
  }
  if (f.type != kHello) return DataLoss("%s: expected a hello frame, got type %u", conn.peer().c_str(), f.type);
  Decoder d(f.payload, "hello frame");
  uint8_t keyed = 0;
  std::span<const uint8_t> nonce_s;
  DAISY_RETURN_IF_ERROR(d.Get(keyed));
  DAISY_RETURN_IF_ERROR(d.GetBytes(kNonce, nonce_s));
  DAISY_RETURN_IF_ERROR(d.ExpectEnd());
  if (key != nullptr && !keyed) {
    return PermissionDenied("%s runs without a cluster key; refusing to talk to it with one "
                            "(start it with --key-file too)", conn.peer().c_str());
  }
  uint8_t nonce_c[kNonce];
  DAISY_RETURN_IF_ERROR(Random(nonce_c, kNonce));
  Encoder auth;
  auth.Put<uint8_t>(key != nullptr ? 1 : 0);
  auth.PutBytes(nonce_c);
  auth.PutBytes(key != nullptr ? Mac(*key, "daisy-dialer", nonce_s.data(), nonce_c) : Bytes32{});
  DAISY_RETURN_IF_ERROR(conn.Send(kAuth, auth.bytes()));
  DAISY_ASSIGN_OR_RETURN(Frame r, conn.Receive(kMaxAuthFrame, timeout));
  if (r.type == kAuthFail) {
    Decoder rd(r.payload, "auth failure");
    std::string reason;
    DAISY_RETURN_IF_ERROR(rd.GetString(reason, kMaxAuthFrame));
    return PermissionDenied("%s refused the connection: %s", conn.peer().c_str(), reason.c_str());
  }
  if (r.type != kAuthOk || r.payload.size() != kMac) {
    return DataLoss("%s: malformed authentication reply", conn.peer().c_str());
  }
  if (key != nullptr) {
    const Bytes32 want = Mac(*key, "daisy-acceptor", nonce_c, nonce_s.data());
    if (CRYPTO_memcmp(want.data(), r.payload.data(), kMac) != 0) {
      return PermissionDenied("%s failed to prove it holds the cluster key", conn.peer().c_str());
    }
  }
  return Status::Ok();
}

}  // namespace daisy::transport
