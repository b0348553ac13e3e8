// TLS on daisy's links, over loopback: keyed by the cluster key and by certificates; frames both
// ways at once (a reader and senders on different threads, as in a worker); the wire carries no
// plaintext; every mismatch (wrong key, wrong CA, one side without TLS, a silent peer) is a
// named error within its timeout.
#include "transport/tls.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "transport/auth.h"
#include "transport/frame.h"

namespace daisy::transport {
namespace {

namespace fs = std::filesystem;
constexpr Millis kWait(3000);

struct Pair {
  std::unique_ptr<Connection> dialer, acceptor;
};

// A connected pair over loopback; `relay` (optional) receives every byte the dialer sends.
Pair Connected(std::string* relay = nullptr) {
  auto l = Listener::Listen(HostPort{"127.0.0.1", 0});
  EXPECT_TRUE(l.ok());
  if (relay == nullptr) {
    auto d = Connect(HostPort{"127.0.0.1", l->port()}, kWait);
    std::string peer;
    auto a = l->Accept(&peer);
    return {std::make_unique<Connection>(std::move(*d), "acceptor"), std::make_unique<Connection>(std::move(*a), "dialer")};
  }
  // dialer -> relay listener -> (recorded) -> target listener -> acceptor
  auto target = Listener::Listen(HostPort{"127.0.0.1", 0});
  auto d = Connect(HostPort{"127.0.0.1", l->port()}, kWait);
  std::string peer;
  auto mid_in = l->Accept(&peer);
  auto mid_out = Connect(HostPort{"127.0.0.1", target->port()}, kWait);
  auto a = target->Accept(&peer);
  auto pump = [](int from, int to, std::string* log) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(from, buf, sizeof buf, 0)) > 0) {
      if (log) log->append(buf, static_cast<size_t>(n));
      if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    ::shutdown(to, SHUT_WR);
  };
  static std::vector<std::pair<Socket, Socket>> keep;  // the relay's sockets live as long as the test binary
  keep.emplace_back(std::move(*mid_in), std::move(*mid_out));
  const int in = keep.back().first.fd(), out = keep.back().second.fd();
  std::thread(pump, in, out, relay).detach();
  std::thread(pump, out, in, nullptr).detach();
  return {std::make_unique<Connection>(std::move(*d), "acceptor"), std::make_unique<Connection>(std::move(*a), "dialer")};
}

// Both sides' authentication at once; returns (dialer status, acceptor status).
std::pair<Status, Status> Authenticate(Pair& p, const ClusterKey* dk, const TlsContext* dt, const ClusterKey* ak,
                                       const TlsContext* at) {
  auto acc = std::async(std::launch::async, [&] { return AuthenticateAcceptor(*p.acceptor, ak, kWait, at); });
  Status d = AuthenticateDialer(*p.dialer, dk, kWait, dt);
  if (!d.ok()) p.dialer->Shutdown();
  Status a = acc.get();
  return {d, a};
}

// The first 6 bytes of every frame header: magic "DSY1", then the protocol version (u16 LE).
std::string HeaderStart() {
  return std::string("DSY1") + static_cast<char>(kProtocolVersion & 0xff) + static_cast<char>(kProtocolVersion >> 8);
}

ClusterKey Key(char c) { return ClusterKey::FromBytes(std::string(32, c)); }

TEST(Tls, ClusterKeyLinkCarriesFramesBothWaysAtOnceAndNoPlaintext) {
  const ClusterKey key = Key('k');
  auto tls = TlsContext::FromClusterKey(key);
  ASSERT_TRUE(tls.ok()) << tls.status().message();
  std::string wire;
  Pair p = Connected(&wire);
  auto [d, a] = Authenticate(p, &key, tls->get(), &key, tls->get());
  ASSERT_TRUE(d.ok()) << d.message();
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(p.dialer->Security(), "TLSv1.3 TLS_AES_128_GCM_SHA256");
  EXPECT_EQ(p.acceptor->Security(), "TLSv1.3 TLS_AES_128_GCM_SHA256");
  // 40 frames of up to 1 MiB each way, sent while the other side's reader is blocked in Receive.
  const std::string marker = "PLAINTEXT-MARKER-0123456789";
  auto payload = [&](int i) {
    std::vector<uint8_t> v(static_cast<size_t>(marker.size() + i * 26000));
    for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<uint8_t>(j * 7 + static_cast<size_t>(i));
    std::copy(marker.begin(), marker.end(), v.begin());
    return v;
  };
  auto reader = std::async(std::launch::async, [&] {
    for (int i = 0; i < 40; ++i) {
      auto f = p.acceptor->Receive(size_t{2} << 20, kWait);
      if (!f.ok() || f->type != 100 + i || f->payload != payload(i)) return false;
      if (!p.acceptor->Send(200 + static_cast<uint16_t>(i), payload(i)).ok()) return false;
    }
    return true;
  });
  auto writer = std::async(std::launch::async, [&] {
    for (int i = 0; i < 40; ++i) {
      if (!p.dialer->Send(100 + static_cast<uint16_t>(i), payload(i)).ok()) return false;
    }
    return true;
  });
  for (int i = 0; i < 40; ++i) {
    auto f = p.dialer->Receive(size_t{2} << 20, kWait);
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ(f->type, 200 + i);
    EXPECT_EQ(f->payload, payload(i));
  }
  EXPECT_TRUE(writer.get());
  EXPECT_TRUE(reader.get());
  p.dialer->Shutdown();
  p.acceptor->Shutdown();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GT(wire.size(), 40u * 26000u);
  EXPECT_EQ(wire.find(marker), std::string::npos) << "the marker crossed the wire in the clear";
  // The magic and the protocol version together: 6 bytes, so ~40 MB of ciphertext holds them by
  // chance with odds ~1e-7 (the 4-byte magic alone turns up in ~1% of runs).
  EXPECT_EQ(wire.find(HeaderStart()), std::string::npos) << "frame headers travel encrypted too";
}

TEST(Tls, ThePlainLinkDoesCarryTheMarker) {  // so the test above can fail
  std::string wire;
  Pair p = Connected(&wire);
  auto [d, a] = Authenticate(p, nullptr, nullptr, nullptr, nullptr);
  ASSERT_TRUE(d.ok() && a.ok());
  const std::string marker = "PLAINTEXT-MARKER-0123456789";
  ASSERT_TRUE(p.dialer->Send(7, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(marker.data()), marker.size())).ok());
  ASSERT_TRUE(p.acceptor->Receive(1024, kWait).ok());
  EXPECT_NE(wire.find(marker), std::string::npos);
  EXPECT_NE(wire.find(HeaderStart()), std::string::npos);
}

TEST(Tls, MismatchesAreNamed) {
  const ClusterKey k1 = Key('a'), k2 = Key('b');
  auto t1 = TlsContext::FromClusterKey(k1), t2 = TlsContext::FromClusterKey(k2);
  ASSERT_TRUE(t1.ok() && t2.ok());
  {
    Pair p = Connected();
    auto [d, a] = Authenticate(p, &k1, t1->get(), &k2, t2->get());
    EXPECT_EQ(d.code(), StatusCode::kPermissionDenied) << d.ToString();
    EXPECT_NE(d.message().find("TLS handshake failed"), std::string::npos) << d.message();
    EXPECT_FALSE(a.ok());
  }
  {
    Pair p = Connected();
    auto [d, a] = Authenticate(p, &k1, t1->get(), &k1, nullptr);
    EXPECT_NE(d.message().find("does not use TLS; refusing to talk to it in the clear"), std::string::npos) << d.message();
  }
  {
    Pair p = Connected();
    auto [d, a] = Authenticate(p, &k1, nullptr, &k1, t1->get());
    EXPECT_NE(d.message().find("requires TLS: start this side with --tls"), std::string::npos) << d.message();
    EXPECT_FALSE(a.ok());
  }
  EXPECT_NE(TlsFromFlags(true, {}, nullptr).status().message().find("--tls needs the cluster key"), std::string::npos);
  EXPECT_EQ(TlsFromFlags(false, {}, nullptr).value(), nullptr);
}

TEST(Tls, ASilentPeerTimesOutTheHandshake) {
  const ClusterKey k = Key('s');
  auto t = TlsContext::FromClusterKey(k);
  Pair p = Connected();
  // The acceptor says StartTLS and waits for a ClientHello that never comes.
  const auto t0 = std::chrono::steady_clock::now();
  Status a = AuthenticateAcceptor(*p.acceptor, &k, Millis(300), t->get());
  EXPECT_EQ(a.code(), StatusCode::kDeadlineExceeded) << a.ToString();
  EXPECT_NE(a.message().find("TLS handshake timed out"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

// Certificates: a CA, two nodes it signed, and a stranger signed by another CA (openssl CLI).
class TlsCerts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("daisy-tls-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const std::string d = dir_.string();
    const std::string script =
        "set -e; cd " + d + "; q() { \"$@\" >/dev/null 2>&1; }; "
        "for ca in ca other; do q openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
        "-subj /CN=$ca -keyout $ca.key -out $ca.pem; done; "
        "for n in a:ca b:ca stranger:other; do name=${n%:*}; ca=${n#*:}; "
        "q openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=$name -keyout $name.key -out $name.csr; "
        "q openssl x509 -req -in $name.csr -CA $ca.pem -CAkey $ca.key -CAcreateserial -days 2 -out $name.pem; done";
    ok_ = std::system(("bash -c '" + script + "'").c_str()) == 0;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static TlsFiles Files(const std::string& node, const std::string& ca = "ca") {
    return {(dir_ / (node + ".pem")).string(), (dir_ / (node + ".key")).string(), (dir_ / (ca + ".pem")).string()};
  }
  static inline fs::path dir_;
  static inline bool ok_ = false;
};

TEST_F(TlsCerts, NodesOfOneCaTalkAndAStrangerIsRefused) {
  ASSERT_TRUE(ok_) << "the openssl command could not make the test certificates";
  auto a = TlsContext::FromFiles(Files("a")), b = TlsContext::FromFiles(Files("b"));
  auto stranger = TlsContext::FromFiles(Files("stranger", "other"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok() && stranger.ok());
  EXPECT_EQ((*a)->Describe(), "TLS 1.3 (certificates)");
  {
    Pair p = Connected();
    auto [d, acc] = Authenticate(p, nullptr, a->get(), nullptr, b->get());
    ASSERT_TRUE(d.ok()) << d.message();
    ASSERT_TRUE(acc.ok()) << acc.message();
    ASSERT_TRUE(p.dialer->Send(9, std::vector<uint8_t>{1, 2, 3}).ok());
    auto f = p.acceptor->Receive(16, kWait);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->payload, (std::vector<uint8_t>{1, 2, 3}));
  }
  for (bool stranger_dials : {true, false}) {
    Pair p = Connected();
    auto [d, acc] = stranger_dials ? Authenticate(p, nullptr, stranger->get(), nullptr, a->get())
                                   : Authenticate(p, nullptr, a->get(), nullptr, stranger->get());
    EXPECT_FALSE(d.ok());
    EXPECT_FALSE(acc.ok());
    const std::string both = d.message() + " | " + acc.message();
    EXPECT_NE(both.find("certificate"), std::string::npos) << both;
  }
  // Bad files are named.
  TlsFiles missing = Files("a");
  missing.key = (dir_ / "none.key").string();
  EXPECT_NE(TlsContext::FromFiles(missing).status().message().find("cannot load the TLS private key"), std::string::npos);
  TlsFiles mismatched = Files("a");
  mismatched.key = (dir_ / "b.key").string();
  EXPECT_NE(TlsContext::FromFiles(mismatched).status().message().find("does not match"), std::string::npos)
      << TlsContext::FromFiles(mismatched).status().message();
  EXPECT_NE(TlsFromFlags(false, {"x", "", ""}, nullptr).status().message().find("all three files"), std::string::npos);
}

}  // namespace
}  // namespace daisy::transport
