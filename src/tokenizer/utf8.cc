#include "tokenizer/utf8.h"

#include <array>

namespace daisy::tokenizer {

uint32_t DecodeUtf8(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  size_t len;
  uint32_t cpt;
  if ((lead & 0xE0) == 0xC0) {
    len = 2;
    cpt = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    len = 3;
    cpt = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    len = 4;
    cpt = lead & 0x07;
  } else {
    ++pos;  // continuation byte as lead, or 0xF8..0xFF
    return kReplacementChar;
  }
  if (pos + len > text.size()) {
    ++pos;
    return kReplacementChar;
  }
  for (size_t i = 1; i < len; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) {
      ++pos;
      return kReplacementChar;
    }
    cpt = (cpt << 6) | (byte(pos + i) & 0x3F);
  }
  pos += len;
  if (cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) return kReplacementChar;
  return cpt;
}

bool IsValidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const uint32_t cpt = DecodeUtf8(text, pos);
    if (cpt == kReplacementChar) {
      // Genuine U+FFFD is 3 bytes EF BF BD; anything else that decoded to it was malformed.
      if (pos - start != 3) return false;
      if (static_cast<uint8_t>(text[start]) != 0xEF) return false;
    }
    // Overlong forms decode to a code point whose canonical length differs.
    const size_t len = pos - start;
    const size_t canonical = cpt < 0x80 ? 1 : cpt < 0x800 ? 2 : cpt < 0x10000 ? 3 : 4;
    if (len != canonical) return false;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) AppendUtf8(DecodeUtf8(text, pos), out);
  return out;
}

size_t IncompleteUtf8Tail(std::string_view text) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(text[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead
    if (b < 0x80) return 0;
    const size_t need = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

namespace {
struct ByteMaps {
  std::array<std::string, 256> to_unicode;
  std::array<int, 0x144> to_byte;  // code points 0..0x143 cover the whole alphabet
  ByteMaps() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cpt = printable ? static_cast<uint32_t>(b) : 0x100 + extra++;
      AppendUtf8(cpt, to_unicode[b]);
      to_byte[cpt] = b;
    }
  }
};
const ByteMaps& Maps() {
  static const ByteMaps maps;  // immutable after first use
  return maps;
}
}  // namespace

const std::string& ByteToUnicode(uint8_t byte) { return Maps().to_unicode[byte]; }

int UnicodeToByte(uint32_t cpt) {
  const auto& m = Maps().to_byte;
  return cpt < m.size() ? m[cpt] : -1;
}

}  // namespace daisy::tokenizer
