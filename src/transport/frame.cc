#include "transport/frame.h"

namespace daisy::transport {

Status Connection::Send(uint16_t type, std::span<const std::span<const uint8_t>> pieces) {
  size_t n = 0;
  for (auto p : pieces) n += p.size();
  if (n > UINT32_MAX) return InvalidArgument("frame of %zu bytes is too large", n);
  uint8_t header[kHeaderBytes];
  const uint32_t magic = kMagic, len = static_cast<uint32_t>(n);
  const uint16_t version = kProtocolVersion;
  std::memcpy(header, &magic, 4);
  std::memcpy(header + 4, &version, 2);
  std::memcpy(header + 6, &type, 2);
  std::memcpy(header + 8, &len, 4);
  std::vector<std::span<const uint8_t>> all;
  all.reserve(pieces.size() + 1);
  all.push_back(header);
  all.insert(all.end(), pieces.begin(), pieces.end());
  std::lock_guard<std::mutex> lock(send_mu_);
  return tls_ ? tls_->WriteAll(all) : socket_.SendAll(all);
}

Status Connection::StartTls(const TlsContext& ctx, bool dialer, Millis timeout) {
  DAISY_ASSIGN_OR_RETURN(tls_, TlsSession::Handshake(ctx, socket_.fd(), dialer, peer_, timeout));
  return Status::Ok();
}

Result<Frame> Connection::Receive(size_t max_payload, Millis timeout) {
  uint8_t header[kHeaderBytes];
  DAISY_RETURN_IF_ERROR(tls_ ? tls_->ReadAll(header, timeout) : socket_.RecvAll(header, timeout));
  uint32_t magic = 0, len = 0;
  uint16_t version = 0;
  Frame f;
  std::memcpy(&magic, header, 4);
  std::memcpy(&version, header + 4, 2);
  std::memcpy(&f.type, header + 6, 2);
  std::memcpy(&len, header + 8, 4);
  if (magic != kMagic) return DataLoss("%s: not a daisy frame (bad magic 0x%08x)", peer_.c_str(), magic);
  if (version != kProtocolVersion) {
    return DataLoss("%s: protocol version %u, this daisy speaks %u", peer_.c_str(), version,
                    kProtocolVersion);
  }
  if (len > max_payload) {
    return DataLoss("%s: frame type %u of %u bytes exceeds the limit of %zu", peer_.c_str(),
                    f.type, len, max_payload);
  }
  f.payload.resize(len);
  DAISY_RETURN_IF_ERROR(tls_ ? tls_->ReadAll(f.payload, timeout) : socket_.RecvAll(f.payload, timeout));
  return f;
}

}  // namespace daisy::transport
