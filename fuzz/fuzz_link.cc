// A link's bytes as the other side of a socket delivers them: the frame reader (header checks,
// the length bound before allocating) and the authentication exchange, dialer and acceptor side,
// keyed and open. The first byte picks the role; the rest is what the peer sent, then it hangs
// up. Errors are fine; crashes, waits and allocations past the limits are not.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

#include "transport/auth.h"
#include "transport/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace daisy;
  using namespace daisy::transport;
  if (size < 1 || size > 60000) return 0;  // within one socket buffer: the write never blocks
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  int buf = 1 << 20;
  ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  ::setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  size_t at = 1;
  while (at < size) {
    const ssize_t n = ::send(fds[0], data + at, size - at, MSG_NOSIGNAL);
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  ::shutdown(fds[0], SHUT_WR);
  Connection conn(Socket(fds[1]), "fuzz");
  static const ClusterKey key = ClusterKey::FromBytes("fuzz-cluster-key-0123456789");
  const Millis wait(50);
  Status s;
  switch (data[0] % 5) {
    case 0: s = AuthenticateDialer(conn, nullptr, wait); break;
    case 1: s = AuthenticateDialer(conn, &key, wait); break;
    case 2: s = AuthenticateAcceptor(conn, nullptr, wait); break;
    case 3: s = AuthenticateAcceptor(conn, &key, wait); break;
    default: break;
  }
  for (int i = 0; i < 64; ++i) {  // then frames, as a worker's reader takes them
    auto f = conn.Receive(4096, wait);
    if (!f.ok()) break;
  }
  ::close(fds[0]);
  return 0;
}
