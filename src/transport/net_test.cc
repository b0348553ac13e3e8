// Connections: Connect refuses a socket connected to itself (a loopback connect to a port with
// nothing listening that was given that port as its own), and a real connection is not one.
#include "transport/net.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace daisy::transport {
namespace {

TEST(Net, TellsASocketConnectedToItself) {
  // Bound to a port, then connected to that same port: the simultaneous open the kernel may
  // hand a retried connect by chance, made on purpose.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
  socklen_t len = sizeof(at);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &len), 0);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
  EXPECT_TRUE(ConnectedToItself(fd));
  ::close(fd);
}

TEST(Net, AConnectionToAListenerIsNotToItself) {
  auto l = Listener::Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(l.ok()) << l.status().message();
  auto s = Connect(HostPort{"127.0.0.1", l->port()}, Millis(2000));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(ConnectedToItself(s->fd()));
  std::string peer;
  auto a = l->Accept(&peer);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(ConnectedToItself(a->fd()));
}

}  // namespace
}  // namespace daisy::transport
