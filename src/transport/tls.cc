#include "transport/tls.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <vector>

#include "transport/auth.h"

namespace daisy::transport {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kIdentity[] = "daisy-cluster-key";
constexpr unsigned char kAes128GcmSha256[2] = {0x13, 0x01};

// The OpenSSL error queue as one line (and cleared), or `fallback` when it is empty.
std::string OpenSslErrors(const char* fallback) {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? fallback : out;
}

SSL_SESSION* PskSession(SSL* ssl, const unsigned char* psk) {
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes128GcmSha256);
  if (cipher == nullptr) return nullptr;
  SSL_SESSION* s = SSL_SESSION_new();
  if (s == nullptr || SSL_SESSION_set1_master_key(s, psk, 32) != 1 || SSL_SESSION_set_cipher(s, cipher) != 1 ||
      SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION) != 1) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}

const unsigned char* PskOf(SSL* ssl) {
  return static_cast<const unsigned char*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), 0));
}

int UsePsk(SSL* ssl, const EVP_MD* md, const unsigned char** id, size_t* idlen, SSL_SESSION** sess) {
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, kAes128GcmSha256);
  *sess = nullptr;
  if (cipher == nullptr || (md != nullptr && md != SSL_CIPHER_get_handshake_digest(cipher))) return 1;
  *sess = PskSession(ssl, PskOf(ssl));
  *id = reinterpret_cast<const unsigned char*>(kIdentity);
  *idlen = sizeof kIdentity - 1;
  return *sess != nullptr ? 1 : 0;
}

int FindPsk(SSL* ssl, const unsigned char* id, size_t len, SSL_SESSION** sess) {
  *sess = nullptr;
  if (len != sizeof kIdentity - 1 || std::memcmp(id, kIdentity, len) != 0) return 1;  // not ours: no PSK
  *sess = PskSession(ssl, PskOf(ssl));
  return *sess != nullptr ? 1 : 0;
}

// Waits until `fd` is ready for `events`, at most until `deadline` (no bound when `bounded` is
// false). False: the time ran out.
bool WaitFor(int fd, short events, bool bounded, Clock::time_point deadline) {
  while (true) {
    int ms = -1;
    if (bounded) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      ms = static_cast<int>(std::min<long long>(left, INT_MAX));
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, ms);
    if (rc < 0 && errno == EINTR) continue;
    return rc != 0;  // ready, or an error the next SSL call reports
  }
}

// OpenSSL writes with write(2), which raises SIGPIPE when the peer is gone; the plain links send
// with MSG_NOSIGNAL instead. The signal goes to the writing thread, so this thread blocks it for
// the call and takes a SIGPIPE the call raised before unblocking (one raised earlier stays).
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

}  // namespace

TlsContext::~TlsContext() {
  SSL_CTX_free(client_);
  SSL_CTX_free(server_);
}

Status TlsContext::Configure(SSL_CTX* ctx, bool server) {
  if (ctx == nullptr) return Internal("OpenSSL: %s", OpenSslErrors("cannot create a TLS context").c_str());
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);  // a peer that exits without close_notify just closed
  if (server) SSL_CTX_set_num_tickets(ctx, 0);  // no resumption: links are long-lived
  if (psk_) {
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256");
    SSL_CTX_set_ex_data(ctx, 0, psk_bytes_);
    if (server) {
      SSL_CTX_set_psk_find_session_callback(ctx, FindPsk);
    } else {
      SSL_CTX_set_psk_use_session_callback(ctx, UsePsk);
    }
    return Status::Ok();
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, files_.cert.c_str()) != 1) {
    return InvalidArgument("cannot load the TLS certificate %s: %s", files_.cert.c_str(),
                           OpenSslErrors("unreadable").c_str());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, files_.key.c_str(), SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    const std::string why = OpenSslErrors("unreadable");
    if (why.find("mismatch") == std::string::npos) {
      return InvalidArgument("cannot load the TLS private key %s: %s", files_.key.c_str(), why.c_str());
    }
    return InvalidArgument("the TLS private key %s does not match the certificate %s", files_.key.c_str(),
                           files_.cert.c_str());
  }
  if (SSL_CTX_load_verify_locations(ctx, files_.ca.c_str(), nullptr) != 1) {
    return InvalidArgument("cannot load the cluster CA %s: %s", files_.ca.c_str(), OpenSslErrors("unreadable").c_str());
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return Status::Ok();
}

Result<std::shared_ptr<TlsContext>> TlsContext::FromClusterKey(const ClusterKey& key) {
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->psk_ = true;
  static const char kLabel[] = "daisy tls 1.3 external psk";
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.bytes().data(), static_cast<int>(key.bytes().size()),
       reinterpret_cast<const unsigned char*>(kLabel), sizeof kLabel - 1, c->psk_bytes_, &len);
  c->client_ = SSL_CTX_new(TLS_client_method());
  DAISY_RETURN_IF_ERROR(c->Configure(c->client_, false));
  c->server_ = SSL_CTX_new(TLS_server_method());
  DAISY_RETURN_IF_ERROR(c->Configure(c->server_, true));
  return c;
}

Result<std::shared_ptr<TlsContext>> TlsContext::FromFiles(const TlsFiles& files) {
  if (files.cert.empty() || files.key.empty() || files.ca.empty()) {
    return InvalidArgument("TLS with certificates needs all three files: --tls-cert, --tls-key and --tls-ca");
  }
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->files_ = files;
  c->client_ = SSL_CTX_new(TLS_client_method());
  DAISY_RETURN_IF_ERROR(c->Configure(c->client_, false));
  c->server_ = SSL_CTX_new(TLS_server_method());
  DAISY_RETURN_IF_ERROR(c->Configure(c->server_, true));
  return c;
}

Result<std::shared_ptr<const TlsContext>> TlsFromFlags(bool tls, const TlsFiles& files, const ClusterKey* key) {
  if (!files.cert.empty() || !files.key.empty() || !files.ca.empty()) {
    DAISY_ASSIGN_OR_RETURN(std::shared_ptr<TlsContext> c, TlsContext::FromFiles(files));
    return std::shared_ptr<const TlsContext>(std::move(c));
  }
  if (!tls) return std::shared_ptr<const TlsContext>();
  if (key == nullptr) {
    return InvalidArgument("--tls needs the cluster key (--key-file) or certificates (--tls-cert, --tls-key, --tls-ca)");
  }
  DAISY_ASSIGN_OR_RETURN(std::shared_ptr<TlsContext> c, TlsContext::FromClusterKey(*key));
  return std::shared_ptr<const TlsContext>(std::move(c));
}

std::string TlsContext::Describe() const { return psk_ ? "TLS 1.3 (cluster key)" : "TLS 1.3 (certificates)"; }

Result<std::unique_ptr<TlsSession>> TlsSession::Handshake(const TlsContext& ctx, int fd, bool dialer,
                                                          const std::string& peer, Millis timeout) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return Internal("fcntl: %s", std::strerror(errno));
  ERR_clear_error();
  SSL* ssl = SSL_new(dialer ? ctx.client_ : ctx.server_);
  if (ssl == nullptr) return Internal("OpenSSL: %s", OpenSslErrors("SSL_new failed").c_str());
  std::unique_ptr<TlsSession> s(new TlsSession(ssl, fd));
  SSL_set_fd(ssl, fd);
  const auto deadline = Clock::now() + timeout;
  while (true) {
    ERR_clear_error();
    int rc;
    {
      NoSigpipe guard;
      rc = dialer ? SSL_connect(ssl) : SSL_accept(ssl);
    }
    if (rc == 1) return s;
    const int err = SSL_get_error(ssl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      if (!WaitFor(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, timeout.count() > 0, deadline)) {
        return DeadlineExceeded("%s: the TLS handshake timed out", peer.c_str());
      }
      continue;
    }
    std::string why = OpenSslErrors(err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN
                                        ? "the connection closed during the handshake"
                                        : "handshake failed");
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK) why += std::string(" (certificate: ") + X509_verify_cert_error_string(verify) + ")";
    return PermissionDenied("%s: TLS handshake failed: %s (same --key-file, or certificates from the same CA, "
                            "on both sides?)", peer.c_str(), why.c_str());
  }
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

std::string TlsSession::Describe() const {
  return std::string(SSL_get_version(ssl_)) + " " + SSL_CIPHER_get_name(SSL_get_current_cipher(ssl_));
}

Status TlsSession::WriteAll(std::span<const std::span<const uint8_t>> pieces) {
  // One buffer, so a frame goes out in as few records as possible.
  std::vector<uint8_t> joined;
  std::span<const uint8_t> data;
  if (pieces.size() == 1) {
    data = pieces[0];
  } else {
    size_t n = 0;
    for (auto p : pieces) n += p.size();
    joined.reserve(n);
    for (auto p : pieces) joined.insert(joined.end(), p.begin(), p.end());
    data = joined;
  }
  size_t at = 0;
  while (at < data.size()) {
    int n, err = SSL_ERROR_NONE;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      NoSigpipe guard;
      ERR_clear_error();
      n = SSL_write(ssl_, data.data() + at, static_cast<int>(std::min<size_t>(data.size() - at, INT_MAX)));
      if (n <= 0) {
        err = SSL_get_error(ssl_, n);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) why = OpenSslErrors(std::strerror(errno));
      }
    }
    if (n > 0) {
      at += static_cast<size_t>(n);
      continue;
    }
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      WaitFor(fd_, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, false, {});
      continue;
    }
    return Unavailable("send failed: %s", why.c_str());
  }
  return Status::Ok();
}

Status TlsSession::ReadAll(std::span<uint8_t> out, Millis timeout) {
  size_t got = 0;
  auto deadline = Clock::now() + timeout;  // on silence, as Socket::RecvAll
  while (got < out.size()) {
    int n, err = SSL_ERROR_NONE;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      NoSigpipe guard;
      ERR_clear_error();
      n = SSL_read(ssl_, out.data() + got, static_cast<int>(std::min<size_t>(out.size() - got, INT_MAX)));
      if (n <= 0) {
        err = SSL_get_error(ssl_, n);
        if (err == SSL_ERROR_SSL) why = OpenSslErrors("TLS error");
      }
    }
    if (n > 0) {
      got += static_cast<size_t>(n);
      deadline = Clock::now() + timeout;
      continue;
    }
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      if (!WaitFor(fd_, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, timeout.count() > 0, deadline)) {
        return DeadlineExceeded("timed out");
      }
      continue;
    }
    if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && (errno == 0 || errno == ECONNRESET))) {
      return Unavailable("connection closed by the peer");
    }
    return Unavailable("receive failed: %s", why.empty() ? std::strerror(errno) : why.c_str());
  }
  return Status::Ok();
}

}  // namespace daisy::transport
