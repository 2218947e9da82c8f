// The PNG fast path (preprocess/png_pixels.h) against libspng: the same pixels
// for every filter, both sample kinds and awkward widths, and a refusal (so
// that libspng decides) for anything off.
#include "preprocess/png_pixels.h"

#include <gtest/gtest.h>
#include <png.h>
#include <spng.h>
#include <zlib.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace granary {
namespace {

// Writes a PNG with libpng, rows filtered by `filters` (PNG_FILTER_*).
std::string WritePngBytes(const std::vector<uint8_t>& px, int w, int h, int channels, int filters) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, size_t n) {
        static_cast<std::string*>(png_get_io_ptr(p))->append(reinterpret_cast<char*>(data), n);
      },
      nullptr);
  png_set_IHDR(png, info, w, h, 8, channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, filters);
  png_set_compression_buffer_size(png, 256);  // several IDAT chunks
  png_write_info(png, info);
  for (int y = 0; y < h; ++y) png_write_row(png, &px[static_cast<size_t>(y) * w * channels]);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// Pixels with smooth gradients, edges and noise, so every filter is chosen.
std::vector<uint8_t> Picture(int w, int h, int channels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * channels);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        const int smooth = (x * 7 + y * 3 + c * 50) & 0xFF;
        const int edge = (x > w / 2) != (y > h / 3) ? 128 : 0;
        px[(static_cast<size_t>(y) * w + x) * channels + c] =
            static_cast<uint8_t>(rng() % 4 == 0 ? rng() : smooth + edge);
      }
    }
  }
  return px;
}

std::vector<uint8_t> DecodeWithSpng(const std::string& png) {
  spng_ctx* ctx = spng_ctx_new(0);
  spng_set_png_buffer(ctx, png.data(), png.size());
  size_t n = 0;
  EXPECT_EQ(spng_decoded_image_size(ctx, SPNG_FMT_PNG, &n), 0);
  std::vector<uint8_t> out(n);
  EXPECT_EQ(spng_decode_image(ctx, out.data(), out.size(), SPNG_FMT_PNG, 0), 0);
  spng_ctx_free(ctx);
  return out;
}

bool Fast(const std::string& png, int w, int h, int channels, std::vector<uint8_t>* out) {
  out->assign(static_cast<size_t>(w) * h * channels, 0);
  return DecodePlainPngPixels(reinterpret_cast<const uint8_t*>(png.data()), png.size(), w, h, channels, out->data());
}

TEST(PngPixels, EqualLibspngForEveryFilterSampleKindAndWidth) {
  const int filters[] = {PNG_FILTER_NONE, PNG_FILTER_SUB,   PNG_FILTER_UP,
                         PNG_FILTER_AVG,  PNG_FILTER_PAETH, PNG_ALL_FILTERS};
  int cases = 0;
  for (int channels : {1, 3}) {
    for (int w : {1, 2, 3, 17, 64}) {
      for (int filter : filters) {
        const int h = 9;
        const std::vector<uint8_t> px = Picture(w, h, channels, static_cast<uint32_t>(w * 31 + filter));
        const std::string png = WritePngBytes(px, w, h, channels, filter);
        std::vector<uint8_t> fast;
        ASSERT_TRUE(Fast(png, w, h, channels, &fast)) << w << "x" << h << "x" << channels << " filter " << filter;
        EXPECT_EQ(fast, px) << w << "x" << h << "x" << channels << " filter " << filter;
        EXPECT_EQ(fast, DecodeWithSpng(png));
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 60);
}

// Rewrites the CRC of the chunk starting at `at` (its length field).
void FixCrc(std::string* png, size_t at) {
  auto be32 = [&](size_t i) {
    return (uint32_t{static_cast<uint8_t>((*png)[i])} << 24) | (uint32_t{static_cast<uint8_t>((*png)[i + 1])} << 16) |
           (uint32_t{static_cast<uint8_t>((*png)[i + 2])} << 8) | uint32_t{static_cast<uint8_t>((*png)[i + 3])};
  };
  const uint32_t length = be32(at);
  const uint32_t crc = crc32(0, reinterpret_cast<const Bytef*>(png->data() + at + 4), length + 4);
  for (int k = 0; k < 4; ++k) (*png)[at + 8 + length + k] = static_cast<char>(crc >> (24 - 8 * k));
}

size_t FindChunk(const std::string& png, const char* type) { return png.find(type) - 4; }

// `png` with its IDAT chunks replaced by one holding `raw` (filtered rows)
// compressed, CRC and all.
std::string WithImageData(const std::string& png, const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> z(compressBound(raw.size()));
  uLongf zn = z.size();
  EXPECT_EQ(compress(z.data(), &zn, raw.data(), raw.size()), Z_OK);
  const size_t idat = FindChunk(png, "IDAT");
  const auto n = static_cast<uint32_t>(zn);
  std::string out = png.substr(0, idat) +
                    std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                                static_cast<char>(n)} +
                    "IDAT" + std::string(reinterpret_cast<char*>(z.data()), zn) + std::string(4, '\0');
  FixCrc(&out, idat);
  return out + png.substr(FindChunk(png, "IEND"));
}

TEST(PngPixels, AnythingOffIsLeftToLibspng) {
  const int w = 20, h = 10;
  const std::string good = WritePngBytes(Picture(w, h, 3, 7), w, h, 3, PNG_ALL_FILTERS);
  std::vector<uint8_t> out;
  ASSERT_TRUE(Fast(good, w, h, 3, &out));

  std::string flipped = good;  // a changed byte inside IDAT: its CRC fails
  flipped[FindChunk(good, "IDAT") + 10] ^= 0x40;
  EXPECT_FALSE(Fast(flipped, w, h, 3, &out));

  for (size_t cut : {good.size() - 1, good.size() - 12, good.size() / 2, size_t{9}}) {
    EXPECT_FALSE(Fast(good.substr(0, cut), w, h, 3, &out)) << "cut at " << cut;
  }

  // A filter byte past 4, with the zlib stream and CRC made valid again.
  std::vector<uint8_t> raw(static_cast<size_t>(h) * (w * 3 + 1), 0);
  raw[(w * 3 + 1) * 5] = 5;
  EXPECT_FALSE(Fast(WithImageData(good, raw), w, h, 3, &out));
  // The same stream with filter 0 decodes: the checks above are what failed.
  raw[(w * 3 + 1) * 5] = 0;
  EXPECT_TRUE(Fast(WithImageData(good, raw), w, h, 3, &out));
  EXPECT_EQ(out, std::vector<uint8_t>(out.size(), 0));

  // The wrong size (the header says one row fewer): the stream holds more.
  EXPECT_FALSE(Fast(good, w, h - 1, 3, &out));
  EXPECT_FALSE(Fast(good, w, h + 1, 3, &out));

  // An unknown critical chunk before IEND.
  std::string critical = good;
  const size_t iend = FindChunk(good, "IEND");
  std::string chunk = std::string(4, '\0') + "ABCD" + std::string(4, '\0');
  critical.insert(iend, chunk);
  FixCrc(&critical, iend);
  EXPECT_FALSE(Fast(critical, w, h, 3, &out));
  std::string ancillary = good;  // ... while an unknown ancillary one is skipped
  chunk[4] = 'a';
  ancillary.insert(iend, chunk);
  FixCrc(&ancillary, iend);
  EXPECT_TRUE(Fast(ancillary, w, h, 3, &out));
}

}  // namespace
}  // namespace granary
