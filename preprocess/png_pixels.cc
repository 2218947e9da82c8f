#include "preprocess/png_pixels.h"

#include <libdeflate.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace granary {
namespace {

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

bool IsType(const uint8_t* type, const char* name) { return std::memcmp(type, name, 4) == 0; }

// The zlib stream of the image: the IDAT chunks' data, concatenated. False if
// a chunk runs past the end, fails its CRC or is an unknown critical chunk,
// if the IDATs are not consecutive, or if IEND is missing.
bool CollectImageData(const uint8_t* data, size_t size, std::vector<uint8_t>* stream) {
  stream->clear();
  size_t at = 8;  // after the signature
  bool seen_idat = false, idat_ended = false;
  while (true) {
    if (size - at < 12) return false;
    const uint32_t length = BigEndian32(data + at);
    const uint8_t* type = data + at + 4;
    if (length > 0x7FFFFFFFu || size - at - 12 < length) return false;
    const uint8_t* body = type + 4;
    if (libdeflate_crc32(0, type, length + 4) != BigEndian32(body + length)) return false;
    at += 12 + size_t{length};
    if (IsType(type, "IDAT")) {
      if (idat_ended) return false;
      seen_idat = true;
      stream->insert(stream->end(), body, body + length);
      continue;
    }
    idat_ended = seen_idat;
    if (IsType(type, "IEND")) return seen_idat;
    const bool critical = (type[0] & 0x20) == 0;
    if (critical && !IsType(type, "IHDR") && !IsType(type, "PLTE")) return false;
  }
}

// PNG's Paeth predictor: whichever of left, above and upper-left is nearest
// to left + above - upper-left (ties in that order). Branch-free.
inline uint8_t Paeth(int a, int b, int c) {
  const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
  const int ab = pb < pa ? b : a;
  const int p_ab = pb < pa ? pb : pa;
  return static_cast<uint8_t>(pc < p_ab ? c : ab);
}

// Undoes one row's filter: row[i] = filtered[i] + prediction. `prior` is the
// row above, already unfiltered (zeros for the first). BPP is bytes a pixel.
template <int BPP>
bool Unfilter(int filter, const uint8_t* filtered, const uint8_t* prior, size_t length, uint8_t* row) {
  switch (filter) {
    case 0:  // None
      std::memcpy(row, filtered, length);
      return true;
    case 1:  // Sub
      std::memcpy(row, filtered, BPP);
      for (size_t i = BPP; i < length; ++i) row[i] = static_cast<uint8_t>(filtered[i] + row[i - BPP]);
      return true;
    case 2:  // Up
      for (size_t i = 0; i < length; ++i) row[i] = static_cast<uint8_t>(filtered[i] + prior[i]);
      return true;
    case 3:  // Average
      for (size_t i = 0; i < BPP; ++i) row[i] = static_cast<uint8_t>(filtered[i] + (prior[i] >> 1));
      for (size_t i = BPP; i < length; ++i) {
        row[i] = static_cast<uint8_t>(filtered[i] + ((row[i - BPP] + prior[i]) >> 1));
      }
      return true;
    case 4:  // Paeth; the BPP channels of a pixel are independent chains
      for (size_t i = 0; i < BPP; ++i) row[i] = static_cast<uint8_t>(filtered[i] + prior[i]);
      for (size_t i = BPP; i < length; i += BPP) {
        for (int c = 0; c < BPP; ++c) {
          row[i + c] =
              static_cast<uint8_t>(filtered[i + c] + Paeth(row[i + c - BPP], prior[i + c], prior[i + c - BPP]));
        }
      }
      return true;
    default:
      return false;
  }
}

struct DecompressorFree {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

}  // namespace

bool DecodePlainPngPixels(const uint8_t* data, size_t size, uint32_t width, uint32_t height, int channels,
                          uint8_t* out) {
  if (channels != 1 && channels != 3) return false;
  thread_local std::unique_ptr<libdeflate_decompressor, DecompressorFree> inflater(libdeflate_alloc_decompressor());
  // Buffers are kept for the next image unless they grew large.
  thread_local std::vector<uint8_t> stream, filtered, zeros;
  struct Trim {
    ~Trim() {
      for (std::vector<uint8_t>* v : {&stream, &filtered, &zeros}) {
        if (v->capacity() > (size_t{16} << 20)) std::vector<uint8_t>().swap(*v);
      }
    }
  } trim;
  if (!inflater || !CollectImageData(data, size, &stream)) return false;
  const size_t row_bytes = size_t{width} * channels;
  filtered.resize(size_t{height} * (row_bytes + 1));
  if (libdeflate_zlib_decompress(inflater.get(), stream.data(), stream.size(), filtered.data(), filtered.size(),
                                 nullptr) != LIBDEFLATE_SUCCESS) {
    return false;  // corrupt, or not exactly the image's size
  }
  zeros.assign(row_bytes, 0);
  const uint8_t* prior = zeros.data();
  for (uint32_t y = 0; y < height; ++y) {
    const uint8_t* in = &filtered[y * (row_bytes + 1)];
    uint8_t* row = out + y * row_bytes;
    const bool ok = channels == 3 ? Unfilter<3>(in[0], in + 1, prior, row_bytes, row)
                                  : Unfilter<1>(in[0], in + 1, prior, row_bytes, row);
    if (!ok) return false;
    prior = row;
  }
  return true;
}

}  // namespace granary
