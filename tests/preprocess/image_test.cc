#include "preprocess/image.h"

#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/encode.h>
#include <webp/mux.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "preprocess/build.h"
#include "preprocess/png.h"
#include "preprocess/source.h"
#include "preprocess/stratified.h"
#include "store/db.h"
#include "store/verify.h"
#include "tests/preprocess/cancelling_split.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// A w x h RGB image: left half `left`, right half `right` (each an RGB triple).
std::vector<uint8_t> TwoColour(int w, int h, const uint8_t left[3], const uint8_t right[3]) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) std::memcpy(&px[(static_cast<size_t>(y) * w + x) * 3], x < w / 2 ? left : right, 3);
  }
  return px;
}

// Encodes pixels of `in_space` (JCS_RGB, JCS_GRAYSCALE or JCS_CMYK) as a JPEG,
// with an EXIF orientation tag unless orientation is 0.
std::string Jpeg(const std::vector<uint8_t>& px, int w, int h, J_COLOR_SPACE in_space, int orientation = 0,
                 bool progressive = false) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = in_space == JCS_RGB ? 3 : in_space == JCS_CMYK ? 4 : 1;
  c.in_color_space = in_space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  if (orientation != 0) {
    // "Exif\0\0", little-endian TIFF header, IFD0 with one SHORT entry 0x0112.
    const uint8_t exif[] = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0,
                            1, 0, 0, 0, static_cast<uint8_t>(orientation), 0, 0, 0, 0, 0, 0, 0};
    jpeg_write_marker(&c, JPEG_APP0 + 1, exif, sizeof(exif));
  }
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&px[static_cast<size_t>(c.next_scanline) * w * c.input_components]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<char*>(buf), size);
  std::free(buf);
  return out;
}

std::string Png(const std::vector<uint8_t>& px, int w, int h, int channels, const TempDir& dir) {
  EXPECT_TRUE(WritePng(dir.Sub("tmp.png"), px.data(), w, h, channels).ok());
  return testing::ReadFile(dir.Sub("tmp.png"));
}

// A palette PNG: index 0 = red, 1 = blue; left half 0, right half 1.
std::string PalettePng(int w, int h, const TempDir& dir) {
  FILE* f = std::fopen(dir.Sub("pal.png").c_str(), "wb");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_color palette[2] = {{255, 0, 0}, {0, 0, 255}};
  png_set_PLTE(png, info, palette, 2);
  png_write_info(png, info);
  std::vector<uint8_t> row(w);
  for (int x = 0; x < w; ++x) row[x] = x < w / 2 ? 0 : 1;
  for (int y = 0; y < h; ++y) png_write_row(png, row.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
  return testing::ReadFile(dir.Sub("pal.png"));
}

// An 8-bit RGB PNG (interlaced: libspng's path; else the fast path) with an
// eXIf chunk holding EXIF orientation `orientation`.
std::string OrientedPng(const std::vector<uint8_t>& px, int w, int h, int orientation, bool interlaced,
                        const TempDir& dir) {
  FILE* f = std::fopen(dir.Sub("exif.png").c_str(), "wb");
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_RGB, interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  // Little-endian TIFF header, IFD0 with one SHORT entry 0x0112 (no "Exif\0\0" in PNG).
  uint8_t exif[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0,
                    1, 0, 0, 0, static_cast<uint8_t>(orientation), 0, 0, 0, 0, 0, 0, 0};
  png_set_eXIf_1(png, info, sizeof(exif), exif);
  png_write_info(png, info);
  const int passes = png_set_interlace_handling(png);
  for (int pass = 0; pass < passes; ++pass) {
    for (int y = 0; y < h; ++y) png_write_row(png, const_cast<uint8_t*>(&px[static_cast<size_t>(y) * w * 3]));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
  return testing::ReadFile(dir.Sub("exif.png"));
}

Image Decode(const std::string& bytes, int channels, int w = 0, int h = 0) {
  Image img;
  Status s = w > 0 ? DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), {w, h, channels}, &img)
                   : DecodeImageFull(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), channels, &img);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return img;
}

// Pixel (x, y) channel c.
int At(const Image& img, int x, int y, int c = 0) {
  return img.pixels[(static_cast<size_t>(y) * img.width + x) * img.channels + c];
}

const uint8_t kRed[3] = {220, 20, 20}, kBlue[3] = {20, 20, 220};

// `px` (RGB, or RGBA where channels is 4) as a WebP: lossless, or lossy at quality 90.
std::string Webp(const std::vector<uint8_t>& px, int w, int h, int channels, bool lossless) {
  uint8_t* out = nullptr;
  const int stride = w * channels;
  const size_t size =
      channels == 4 ? (lossless ? WebPEncodeLosslessRGBA(px.data(), w, h, stride, &out)
                                : WebPEncodeRGBA(px.data(), w, h, stride, 90, &out))
                    : (lossless ? WebPEncodeLosslessRGB(px.data(), w, h, stride, &out)
                                : WebPEncodeRGB(px.data(), w, h, stride, 90, &out));
  std::string bytes(reinterpret_cast<char*>(out), size);
  WebPFree(out);
  EXPECT_GT(size, 0u);
  return bytes;
}

// `webp` with an EXIF chunk holding orientation `orientation` (TIFF data,
// with the "Exif\0\0" of a JPEG's APP1 before it when `prefixed`, as some
// cameras write it).
std::string OrientedWebp(const std::string& webp, int orientation, bool prefixed) {
  std::vector<uint8_t> exif = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0,
                               1, 0, 0, 0, static_cast<uint8_t>(orientation), 0, 0, 0, 0, 0, 0, 0};
  if (prefixed) exif.insert(exif.begin(), {'E', 'x', 'i', 'f', 0, 0});
  const WebPData image = {reinterpret_cast<const uint8_t*>(webp.data()), webp.size()};
  const WebPData chunk = {exif.data(), exif.size()};
  WebPMux* mux = WebPMuxCreate(&image, 1);
  EXPECT_EQ(WebPMuxSetChunk(mux, "EXIF", &chunk, 1), WEBP_MUX_OK);
  WebPData assembled;
  EXPECT_EQ(WebPMuxAssemble(mux, &assembled), WEBP_MUX_OK);
  std::string bytes(reinterpret_cast<const char*>(assembled.bytes), assembled.size);
  WebPDataClear(&assembled);
  WebPMuxDelete(mux);
  return bytes;
}

// An animated WebP of two w x h frames, red then blue.
std::string AnimatedWebp(int w, int h) {
  WebPAnimEncoderOptions options;
  WebPAnimEncoderOptionsInit(&options);
  WebPAnimEncoder* encoder = WebPAnimEncoderNew(w, h, &options);
  WebPConfig config;
  WebPConfigInit(&config);
  int timestamp = 0;
  for (const uint8_t* colour : {kRed, kBlue}) {
    const std::vector<uint8_t> px = TwoColour(w, h, colour, colour);
    WebPPicture picture;
    WebPPictureInit(&picture);
    picture.width = w, picture.height = h, picture.use_argb = 1;
    WebPPictureImportRGB(&picture, px.data(), w * 3);
    EXPECT_TRUE(WebPAnimEncoderAdd(encoder, &picture, timestamp, &config));
    WebPPictureFree(&picture);
    timestamp += 100;
  }
  WebPAnimEncoderAdd(encoder, nullptr, timestamp, nullptr);
  WebPData assembled;
  WebPDataInit(&assembled);
  EXPECT_TRUE(WebPAnimEncoderAssemble(encoder, &assembled));
  std::string bytes(reinterpret_cast<const char*>(assembled.bytes), assembled.size);
  WebPDataClear(&assembled);
  WebPAnimEncoderDelete(encoder);
  return bytes;
}

TEST(Image, JpegAndPngInEveryColourModeBecomeRgbOrGray) {
  TempDir dir;
  const auto rgb = TwoColour(32, 16, kRed, kBlue);
  std::vector<uint8_t> gray(32 * 16), rgba(32 * 16 * 4), cmyk(32 * 16 * 4);
  for (size_t i = 0; i < gray.size(); ++i) {
    gray[i] = rgb[i * 3] > 100 ? 200 : 40;
    std::memcpy(&rgba[i * 4], &rgb[i * 3], 3);
    rgba[i * 4 + 3] = 128;
    // libjpeg writes CMYK with an Adobe marker, which means inverted values
    // (Photoshop's convention, 255 = no ink): C' = R etc., K' = 255.
    for (int c = 0; c < 3; ++c) cmyk[i * 4 + c] = rgb[i * 3 + c];
    cmyk[i * 4 + 3] = 255;
  }
  struct Case {
    std::string name;
    std::string bytes;
    bool is_gray;
  };
  const std::vector<Case> cases = {{"jpeg rgb", Jpeg(rgb, 32, 16, JCS_RGB), false},
                                   {"jpeg gray", Jpeg(gray, 32, 16, JCS_GRAYSCALE), true},
                                   {"jpeg cmyk", Jpeg(cmyk, 32, 16, JCS_CMYK), false},
                                   {"png rgb", Png(rgb, 32, 16, 3, dir), false},
                                   {"png rgba", Png(rgba, 32, 16, 4, dir), false},
                                   {"png gray", Png(gray, 32, 16, 1, dir), true},
                                   {"png palette", PalettePng(32, 16, dir), false}};
  for (const Case& c : cases) {
    Image img = Decode(c.bytes, 3);
    ASSERT_EQ(img.width, 32) << c.name;
    ASSERT_EQ(img.height, 16) << c.name;
    ASSERT_EQ(img.channels, 3);
    EXPECT_EQ(img.gray_source, c.is_gray) << c.name;  // what the build's note on gray folders counts
    if (c.is_gray) {
      EXPECT_NEAR(At(img, 2, 8, 0), 200, 12) << c.name;
      EXPECT_EQ(At(img, 2, 8, 0), At(img, 2, 8, 2)) << c.name;
    } else {
      EXPECT_GT(At(img, 2, 8, 0), 150) << c.name << ": left is red";
      EXPECT_LT(At(img, 2, 8, 2), 100) << c.name;
      EXPECT_GT(At(img, 29, 8, 2), 150) << c.name << ": right is blue";
    }
    Image one = Decode(c.bytes, 1);
    ASSERT_EQ(one.channels, 1);
    // Luma of red (220, 20, 20) is ~80; of gray 200 is 200.
    EXPECT_NEAR(At(one, 2, 8), c.is_gray ? 200 : (c.name == "png palette" ? 76 : 80), 15) << c.name;
  }
}

TEST(Image, ExifOrientationIsApplied) {
  // 40 x 20, red left half: rotated 90 degrees clockwise (orientation 6) it
  // becomes 20 x 40 with red at the top.
  const auto rgb = TwoColour(40, 20, kRed, kBlue);
  Image upright = Decode(Jpeg(rgb, 40, 20, JCS_RGB, 6), 3);
  ASSERT_EQ(upright.width, 20);
  ASSERT_EQ(upright.height, 40);
  EXPECT_GT(At(upright, 10, 2, 0), 150);   // top: red
  EXPECT_GT(At(upright, 10, 37, 2), 150);  // bottom: blue
  Image mirrored = Decode(Jpeg(rgb, 40, 20, JCS_RGB, 2), 3);  // horizontal flip
  ASSERT_EQ(mirrored.width, 40);
  EXPECT_GT(At(mirrored, 37, 10, 0), 150);  // red moved right
  // A PNG's eXIf chunk is applied the same way, on either decoding path.
  TempDir dir;
  for (bool interlaced : {false, true}) {
    SCOPED_TRACE(interlaced ? "libspng" : "fast path");
    Image png = Decode(OrientedPng(rgb, 40, 20, 6, interlaced, dir), 3);
    ASSERT_EQ(png.width, 20);
    ASSERT_EQ(png.height, 40);
    EXPECT_GT(At(png, 10, 2, 0), 150);
    EXPECT_GT(At(png, 10, 37, 2), 150);
  }
}

// WebP, as torchvision's ImageFolder (PIL) reads it: lossless pixels exact,
// alpha dropped, gray as PIL's luma, EXIF orientation applied as for JPEG and
// PNG; an animated or cut WebP is rejected with its reason.
TEST(Image, WebpStillImagesAreDecodedAndBadOnesRejected) {
  const auto rgb = TwoColour(32, 16, kRed, kBlue);
  std::vector<uint8_t> rgba(32 * 16 * 4);
  for (size_t i = 0; i < 32 * 16; ++i) {
    std::memcpy(&rgba[i * 4], &rgb[i * 3], 3);
    rgba[i * 4 + 3] = 128;
  }
  for (const std::string& lossless : {Webp(rgb, 32, 16, 3, true), Webp(rgba, 32, 16, 4, true)}) {
    Image img = Decode(lossless, 3);
    ASSERT_EQ(img.width, 32);
    ASSERT_EQ(img.height, 16);
    EXPECT_EQ(img.pixels, rgb);
    Image gray = Decode(lossless, 1);
    ASSERT_EQ(gray.channels, 1);
    EXPECT_EQ(At(gray, 2, 8), (299 * 220 + 587 * 20 + 114 * 20 + 500) / 1000);  // PIL's "L" of red
    EXPECT_EQ(At(gray, 29, 8), (299 * 20 + 587 * 20 + 114 * 220 + 500) / 1000);
  }
  Image lossy = Decode(Webp(rgb, 32, 16, 3, false), 3, 8, 8);
  EXPECT_GT(At(lossy, 0, 4, 0), 150);  // 8 x 8 from the centre 16 x 16: red, then blue
  EXPECT_GT(At(lossy, 7, 4, 2), 150);

  const auto wide = TwoColour(40, 20, kRed, kBlue);
  for (bool prefixed : {false, true}) {
    Image upright = Decode(OrientedWebp(Webp(wide, 40, 20, 3, true), 6, prefixed), 3);
    ASSERT_EQ(upright.width, 20) << prefixed;
    ASSERT_EQ(upright.height, 40);
    EXPECT_GT(At(upright, 10, 2, 0), 150);  // rotated 90 degrees clockwise: red on top
    EXPECT_GT(At(upright, 10, 37, 2), 150);
  }

  auto decode = [](const std::string& b, uint64_t max_bytes = kDefaultMaxDecodeBytes) {
    Image img;
    ImageTransform t{16, 16, 3};
    t.max_decode_bytes = max_bytes;
    return DecodeImage(reinterpret_cast<const uint8_t*>(b.data()), b.size(), t, &img);
  };
  const std::string animated = AnimatedWebp(16, 16);
  EXPECT_NE(decode(animated).message().find("animated WebP"), std::string::npos) << decode(animated).message();
  const std::string webp = Webp(wide, 40, 20, 3, false);
  for (size_t keep : {size_t{20}, webp.size() / 2, webp.size() - 4}) {
    const Status cut = decode(webp.substr(0, keep));
    EXPECT_EQ(cut.code(), Status::Code::kInvalidArgument) << keep;
    EXPECT_NE(cut.message().find("WebP"), std::string::npos) << keep << ": " << cut.message();
  }
  const Status big = decode(webp, 1000);  // 40 x 20 x 3 bytes to decode: more than allowed
  EXPECT_NE(big.message().find("WebP of 40x20 pixels needs"), std::string::npos) << big.message();
  // A lossless WebP whose header declares 16384 x 16384 (its VP8L bits after
  // the 0x2f signature byte: width - 1 and height - 1, 14 bits each) is
  // refused from the header, before any pixel is decoded.
  std::string lie = Webp(wide, 40, 20, 3, true);
  ASSERT_EQ(lie.substr(12, 4), "VP8L");
  ASSERT_EQ(static_cast<uint8_t>(lie[20]), 0x2f);
  uint32_t bits = 0;
  for (int k = 0; k < 4; ++k) bits |= uint32_t{static_cast<uint8_t>(lie[21 + k])} << (8 * k);
  bits = (bits & ~((uint32_t{1} << 28) - 1)) | 16383u | (16383u << 14);
  for (int k = 0; k < 4; ++k) lie[21 + k] = static_cast<char>(bits >> (8 * k));
  const Status huge = decode(lie);
  EXPECT_NE(huge.message().find("WebP of 16384x16384 pixels needs 768 MiB to decode, more than the 256 MiB allowed"),
            std::string::npos)
      << huge.message();
}

TEST(Image, ResizeShortSideThenCentreCrop) {
  // 300 x 100: left third red, rest blue. To 50 x 50: scaled to 150 x 50, the
  // centre 50 columns are source columns 100..200: all blue.
  std::vector<uint8_t> px(300 * 100 * 3);
  for (int y = 0; y < 100; ++y) {
    for (int x = 0; x < 300; ++x) std::memcpy(&px[(y * 300 + x) * 3], x < 100 ? kRed : kBlue, 3);
  }
  for (const std::string& bytes : {Jpeg(px, 300, 100, JCS_RGB)}) {
    Image img = Decode(bytes, 3, 50, 50);
    ASSERT_EQ(img.width, 50);
    ASSERT_EQ(img.height, 50);
    EXPECT_GT(At(img, 5, 25, 2), 150);
    EXPECT_GT(At(img, 45, 25, 2), 150);
    Image wide = Decode(bytes, 3, 60, 10);  // 60 x 10 from 300 x 100: scale 0.2, whole width
    EXPECT_GT(At(wide, 2, 5, 0), 150);      // left edge red
    EXPECT_GT(At(wide, 57, 5, 2), 150);
  }
  // A large JPEG to a small size goes through DCT downscaling and still
  // keeps its colours.
  std::vector<uint8_t> big = TwoColour(640, 480, kRed, kBlue);
  Image small = Decode(Jpeg(big, 640, 480, JCS_RGB), 3, 72, 72);
  EXPECT_GT(At(small, 5, 36, 0), 150);
  EXPECT_GT(At(small, 66, 36, 2), 150);
}

TEST(Image, BadFilesAreRejectedWithAReason) {
  const auto rgb = TwoColour(64, 64, kRed, kBlue);
  const std::string jpeg = Jpeg(rgb, 64, 64, JCS_RGB);
  TempDir dir;
  const std::string png = Png(rgb, 64, 64, 3, dir);
  auto decode = [](const std::string& b) {
    Image img;
    return DecodeImage(reinterpret_cast<const uint8_t*>(b.data()), b.size(), {16, 16, 3}, &img);
  };
  EXPECT_NE(decode("hello").message().find("not a JPEG, PNG or WebP"), std::string::npos);
  EXPECT_NE(decode("").message().find("not a JPEG, PNG or WebP"), std::string::npos);
  // Files under an image's name that are something else say what.
  using namespace std::string_literals;
  const std::pair<std::string, const char*> others[] = {
      {"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1\n", ": a Git LFS pointer, not the file"},
      {"\n <!DOCTYPE html><html><body>429 Too Many Requests</body></html>", ": an HTML page (a download that failed?)"},
      {"<HTML><HEAD>", ": an HTML page"},
      {"GIF89a\x01\x00\x01\x00"s, ": a GIF image"},
      {"II*\0\x08\0\0\0"s, ": a TIFF image"},
      {"\0\0\0\x18" "ftypheic\0\0\0\0"s, ": a HEIC/HEIF image"},
      {"\0\0\0\x1C" "ftypavif\0\0\0\0"s, ": an AVIF image"},
      {"\0\0\0\x0CJXL \r\n\x87\n"s, ": a JPEG XL image"},
      {"BM" + std::string(40, '\0'), ": a BMP image"},
      {"%PDF-1.4", ": a PDF document"},
      {"<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>", ": an SVG drawing"}};
  for (const auto& [bytes, kind] : others) {
    EXPECT_NE(decode(bytes).message().find(std::string("not a JPEG, PNG or WebP image") + kind), std::string::npos)
        << decode(bytes).message();
  }
  EXPECT_EQ(decode("BM").message(), "not a JPEG, PNG or WebP image");  // two letters say nothing
  Status cut_jpeg = decode(jpeg.substr(0, jpeg.size() / 2));
  EXPECT_NE(cut_jpeg.message().find("corrupt JPEG"), std::string::npos) << cut_jpeg.message();
  Status cut_png = decode(png.substr(0, png.size() - 20));
  EXPECT_NE(cut_png.message().find("corrupt PNG"), std::string::npos) << cut_png.message();
  std::string flipped = png;
  flipped[png.size() / 2] ^= 0x55;  // CRC mismatch
  EXPECT_NE(decode(flipped).message().find("corrupt PNG"), std::string::npos);
}

// `jpeg` with the width and height its SOF marker declares replaced: a
// header that promises far more pixels than the file holds.
std::string DeclareSize(std::string jpeg, int w, int h) {
  for (size_t i = 0; i + 9 < jpeg.size(); ++i) {
    const uint8_t m = static_cast<uint8_t>(jpeg[i + 1]);
    if (static_cast<uint8_t>(jpeg[i]) == 0xFF && (m == 0xC0 || m == 0xC2)) {
      jpeg[i + 5] = static_cast<char>(h >> 8), jpeg[i + 6] = static_cast<char>(h);
      jpeg[i + 7] = static_cast<char>(w >> 8), jpeg[i + 8] = static_cast<char>(w);
      return jpeg;
    }
  }
  ADD_FAILURE() << "no SOF marker";
  return jpeg;
}

// A ~600-byte progressive JPEG declaring 16384 x 16384 cost ~800 MB
// before its rejection. Its decode cost is computed from the header and
// refused before any allocation.
TEST(Image, DecodeMemoryIsBoundedByTheDeclaredSize) {
  const uint8_t shade[3] = {10, 200, 30};
  const std::string progressive = DeclareSize(Jpeg(TwoColour(16, 16, shade, kRed), 16, 16, JCS_RGB, 0, true), 16384,
                                              16384);
  ASSERT_LT(progressive.size(), 2000u);
  Image out;
  ImageTransform t{64, 64, 3};
  Status s = DecodeImage(reinterpret_cast<const uint8_t*>(progressive.data()), progressive.size(), t, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("JPEG of 16384x16384 pixels (progressive) needs 780 MiB to decode, more than the "
                             "256 MiB allowed"),
            std::string::npos)
      << s.message();
  // Within the budget the same lie is decoded, and found corrupt.
  const std::string smaller = DeclareSize(progressive, 2048, 2048);
  s = DecodeImage(reinterpret_cast<const uint8_t*>(smaller.data()), smaller.size(), t, &out);
  EXPECT_NE(s.message().find("corrupt JPEG"), std::string::npos) << s.message();
  t.max_decode_bytes = 8 << 20;  // ... or refused under a smaller one
  s = DecodeImage(reinterpret_cast<const uint8_t*>(smaller.data()), smaller.size(), t, &out);
  EXPECT_NE(s.message().find("needs 12 MiB to decode, more than the 8 MiB allowed"), std::string::npos) << s.message();

  // A PNG larger than the side limit is "too large", not "corrupt".
  TempDir dir;
  std::string png = Png(TwoColour(8, 8, shade, kBlue), 8, 8, 3, dir);
  png[16] = 0, png[17] = 1, png[18] = 0, png[19] = 0;  // IHDR width 65536 (its CRC no longer matches)
  s = DecodeImage(reinterpret_cast<const uint8_t*>(png.data()), png.size(), ImageTransform{64, 64, 3}, &out);
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
}

// An image folder with a bad file: skipped and named by default, fatal with
// --on-error fail, and over --max-rejects a failed build.
class ImageFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Sub("raw/cats"));
    std::filesystem::create_directories(dir_.Sub("raw/dogs"));
    for (int i = 0; i < 30; ++i) {
      const uint8_t shade[3] = {static_cast<uint8_t>(i * 8), 100, 50};
      testing::WriteFile(dir_.Sub("raw/cats/c" + std::to_string(i) + ".jpg"),
                         Jpeg(TwoColour(48, 40, shade, kRed), 48, 40, JCS_RGB));
      testing::WriteFile(dir_.Sub("raw/dogs/d" + std::to_string(i) + ".png"),
                         Png(TwoColour(40, 48, shade, kBlue), 40, 48, 3, dir_));
    }
    testing::WriteFile(dir_.Sub("raw/dogs/broken.jpg"), "not really a jpeg");
    testing::WriteFile(dir_.Sub("raw/dogs/notes.txt"), "ignored, but reported");
  }

  StatusOr<BuildSummary> Build(const std::string& name, BuildOptions o, int threads = 2) {
    ImageFolderOptions io;
    io.width = io.height = 16;
    auto source = OpenImageFolderSource(dir_.Sub("raw"), io);
    if (!source.ok()) return source.status();
    EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"cats", "dogs"}));
    EXPECT_EQ(source->info.notes.size(), 1u);
    o.db_path = dir_.Sub(name);
    o.threads = threads;
    return BuildDb(source.value(), o);
  }

  TempDir dir_;
};

TEST_F(ImageFolder, BadFileIsSkippedCountedAndNamed) {
  BuildOptions o;
  o.max_reject_fraction = 0.05;
  auto summary = Build("db", o);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->splits[0].read, 61u);
  EXPECT_EQ(summary->splits[0].written, 60u);
  EXPECT_EQ(summary->splits[0].rejected, 1u);
  ASSERT_EQ(summary->rejected.size(), 1u);
  EXPECT_EQ(summary->rejected[0].item, "dogs/broken.jpg");
  EXPECT_NE(summary->rejected[0].reason.find("not a JPEG, PNG or WebP"), std::string::npos);
  auto db = DbReader::Open(dir_.Sub("db"));
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(db.value()->manifest().rejected.size(), 1u);
  EXPECT_EQ(db.value()->schema().fields[0].shape, (Shape{16, 16, 3}));
  EXPECT_EQ(db.value()->schema().fields[0].layout, "HWC");
  auto report = VerifyDb(dir_.Sub("db"));
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  // Sample 30 is the first dog (cats come first, files sorted).
  auto reader = SplitReader::Create(*db.value(), "train");
  const FieldView* f = nullptr;
  ASSERT_TRUE(reader.value()->Read(30, &f).ok());
  int64_t label;
  std::memcpy(&label, f[1].data, 8);
  EXPECT_EQ(label, 1);
}

// A folder as people keep one: WebP photos are taken beside JPEGs and PNGs;
// images of formats prep does not decode are left out and named apart
// from other files, with what to do; a folder of only those is refused
// naming them.
TEST(ImageFolderFormats, WebpIsTakenAndOtherImageFormatsAreNamed) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("raw/birds"));
  std::filesystem::create_directories(dir.Sub("raw/fish"));
  testing::WriteFile(dir.Sub("raw/birds/a.jpg"), Jpeg(TwoColour(24, 24, kRed, kRed), 24, 24, JCS_RGB));
  testing::WriteFile(dir.Sub("raw/birds/b.WEBP"), Webp(TwoColour(24, 24, kBlue, kBlue), 24, 24, 3, true));
  testing::WriteFile(dir.Sub("raw/fish/c.webp"), Webp(TwoColour(24, 24, kRed, kBlue), 24, 24, 3, false));
  testing::WriteFile(dir.Sub("raw/fish/d.bmp"), "BM");
  testing::WriteFile(dir.Sub("raw/fish/e.GIF"), "GIF89a");
  testing::WriteFile(dir.Sub("raw/fish/Thumbs.db"), "");
  ImageFolderOptions io;
  io.width = io.height = 8;
  auto source = OpenImageFolderSource(dir.Sub("raw"), io);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ(source->info.notes.size(), 2u);
  EXPECT_EQ(source->info.notes[0], "left out 2 image(s) of a format prep does not decode: fish/d.bmp fish/e.GIF "
                                   "(prep reads JPEG, PNG and WebP: convert them, or write the folder with "
                                   "granary.write(torchvision.datasets.ImageFolder(...)), which reads what PIL reads)");
  EXPECT_EQ(source->info.notes[1], "ignored 1 file(s) without a .jpg/.jpeg/.png/.webp extension: fish/Thumbs.db");
  BuildOptions o;
  o.db_path = dir.Sub("db");
  auto summary = BuildDb(source.value(), o);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->splits[0].written, 3u);
  EXPECT_EQ(summary->splits[0].rejected, 0u);
  auto db = DbReader::Open(dir.Sub("db"));
  ASSERT_TRUE(db.ok());
  auto reader = SplitReader::Create(*db.value(), "train");
  const FieldView* f = nullptr;
  ASSERT_TRUE(reader.value()->Read(1, &f).ok());  // birds/b.WEBP: all blue
  EXPECT_EQ(f[0].data[2], kBlue[2]);
  EXPECT_EQ(f[0].data[0], kBlue[0]);

  std::filesystem::remove(dir.Sub("raw/birds/a.jpg"));
  std::filesystem::remove(dir.Sub("raw/birds/b.WEBP"));
  std::filesystem::remove(dir.Sub("raw/fish/c.webp"));
  auto none = OpenImageFolderSource(dir.Sub("raw"), io);
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  EXPECT_NE(none.status().message().find("no .jpg, .jpeg, .png or .webp files in its class folders; left out 2 "
                                         "image(s) of a format prep does not decode: fish/d.bmp fish/e.GIF"),
            std::string::npos)
      << none.status().message();
}

// Folders of images not yet sorted into classes: detected as image folders
// (not as an IDX folder lacking its files) and refused saying what is missing.
TEST(ImageFolderFormats, ImagesOutsideClassFoldersAreNamedInTheRefusal) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("flat"));
  for (const char* name : {"a.jpg", "b.JPG", "c.webp"}) {
    testing::WriteFile(dir.Sub(std::string("flat/") + name), Jpeg(TwoColour(8, 8, kRed, kRed), 8, 8, JCS_RGB));
  }
  EXPECT_EQ(DetectFormat(dir.Sub("flat")), "image-folder");
  auto flat = OpenImageFolderSource(dir.Sub("flat"), ImageFolderOptions{});
  EXPECT_NE(flat.status().message().find("flat: 3 image(s) but no class folders (expected " + dir.Sub("flat") +
                                         "/<class>/*.jpg|jpeg|png|webp, as torchvision's ImageFolder reads labelled "
                                         "images; images labelled by a table, as Kaggle ships them: --labels TABLE; "
                                         "images without labels are written by granary.write"),
            std::string::npos)
      << flat.status().message();
  std::filesystem::create_directories(dir.Sub("flat/unsorted"));  // a class folder, still empty
  auto loose = OpenImageFolderSource(dir.Sub("flat"), ImageFolderOptions{});
  EXPECT_NE(loose.status().message().find("no .jpg, .jpeg, .png or .webp files in its class folders; 3 image(s) "
                                          "beside them, in no class folder: a.jpg, b.JPG, c.webp"),
            std::string::npos)
      << loose.status().message();
  std::filesystem::create_directories(dir.Sub("empty"));
  EXPECT_EQ(DetectFormat(dir.Sub("empty")), "idx");  // says which IDX files it expected
}

// Symlink cycles (a/x -> ., up -> .., links across classes) and
// hard links: each folder is walked once, each file taken once, and every
// link skipped is counted and named.
TEST_F(ImageFolder, SymlinkCyclesAndCrossLinksNeverTakeAFileTwice) {
  namespace fs = std::filesystem;
  const std::string raw = dir_.Sub("raw");
  fs::create_directories(raw + "/cats/inner");
  fs::rename(raw + "/cats/c0.jpg", raw + "/cats/inner/c0.jpg");
  fs::create_directory_symlink(".", raw + "/cats/inner/x");      // a/x -> .
  fs::create_directory_symlink("..", raw + "/cats/inner/up");    // up -> ..
  fs::create_directory_symlink("..", raw + "/dogs/top");         // -> RAW
  fs::create_directory_symlink("../cats", raw + "/dogs/cats");   // -> another class
  fs::create_directory_symlink("../cats/inner", raw + "/dogs/in");  // a cat folder walked already
  fs::create_symlink("../cats/c5.jpg", raw + "/dogs/c5-link.jpg");   // a cat image, as a dog
  fs::create_hard_link(raw + "/dogs/d1.png", raw + "/dogs/d1-again.png");
  fs::create_symlink("nowhere.jpg", raw + "/dogs/dangling.jpg");
  ImageFolderOptions io;
  io.width = io.height = 16;
  auto source = OpenImageFolderSource(raw, io);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ(source->splits.size(), 1u);
  const SplitSource& train = *source->splits[0];
  // 30 cats + 30 dogs + the broken one, each once, under the name that
  // reached it first (cats are walked first).
  EXPECT_EQ(train.size(), 61u);
  std::set<std::string> names;
  for (uint64_t i = 0; i < train.size(); ++i) names.insert(train.ItemName(i));
  EXPECT_EQ(names.size(), 61u);
  EXPECT_TRUE(names.count("cats/inner/c0.jpg"));
  EXPECT_FALSE(names.count("dogs/in/c0.jpg"));
  EXPECT_TRUE(names.count("dogs/d1-again.png") + names.count("dogs/d1.png") == 1);
  std::string notes;
  for (const std::string& n : source->info.notes) notes += n + "\n";
  EXPECT_NE(notes.find("skipped 5 link(s) to a folder already walked"), std::string::npos) << notes;
  for (const char* link : {"cats/inner/x", "cats/inner/up", "dogs/top", "dogs/cats", "dogs/in"}) {
    EXPECT_NE(notes.find(link), std::string::npos) << link << " not named in: " << notes;
  }
  EXPECT_NE(notes.find("skipped 2 image(s) reached a second time"), std::string::npos) << notes;
  EXPECT_NE(notes.find("dogs/c5-link.jpg"), std::string::npos) << notes;
}

TEST_F(ImageFolder, OnErrorFailAndTheRejectThresholdFailTheBuild) {
  BuildOptions fail;
  fail.on_error = OnError::kFail;
  auto a = Build("a", fail);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("dogs/broken.jpg"), std::string::npos) << a.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("a")));
  BuildOptions strict;
  strict.max_reject_fraction = 0.01;  // 1 of 61 is 1.6%
  auto b = Build("b", strict);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("1 of 61 items rejected"), std::string::npos) << b.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("b")));
}

TEST_F(ImageFolder, SameBytesForAnyThreadCount) {
  BuildOptions o;
  o.max_reject_fraction = 0.05;
  auto one = Build("one", o, 1);
  auto two = Build("two", o, 2);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->content_hash, two->content_hash);
  EXPECT_EQ(testing::ReadFile(dir_.Sub("one/train/shard-00000.mdb")),
            testing::ReadFile(dir_.Sub("two/train/shard-00000.mdb")));
}

}  // namespace
}  // namespace granary

namespace granary {
namespace {

// Interrupted at several points, a resumed build ends with the content hash
// and the reject list of an uninterrupted one.
TEST_F(ImageFolder, ResumeAfterInterruptionGivesTheSameContent) {
  ImageFolderOptions io;
  io.width = io.height = 16;
  io.val_fraction = 0.3;
  auto reference_source = OpenImageFolderSource(dir_.Sub("raw"), io);
  ASSERT_TRUE(reference_source.ok());
  BuildOptions o;
  o.max_reject_fraction = 0.1;
  o.records_per_commit = 3;
  o.block_bytes = 2000;  // several samples per record
  o.db_path = dir_.Sub("reference");
  auto reference = BuildDb(reference_source.value(), o);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();

  for (uint64_t at : {5, 20, 40}) {
    const std::string db = dir_.Sub("db" + std::to_string(at));
    std::atomic<bool> cancel{false};
    auto source = OpenImageFolderSource(dir_.Sub("raw"), io);
    ASSERT_TRUE(source.ok());
    Source interrupted;
    interrupted.info = source->info;
    for (const auto& split : source->splits) {
      interrupted.splits.push_back(std::make_unique<testing::CancellingSplit>(*split, split->name() == "train" ? at : ~0ull, &cancel));
    }
    BuildOptions first = o;
    first.db_path = db;
    first.cancel = &cancel;
    auto failed = BuildDb(interrupted, first);
    ASSERT_FALSE(failed.ok()) << "item " << at;
    EXPECT_FALSE(std::filesystem::exists(db));
    ASSERT_TRUE(std::filesystem::exists(db + ".partial/journal.json")) << "item " << at;

    BuildOptions again = o;
    again.db_path = db;
    again.resume = true;
    auto resumed = BuildDb(source.value(), again);
    ASSERT_TRUE(resumed.ok()) << "item " << at << ": " << resumed.status().ToString();
    EXPECT_EQ(resumed->content_hash, reference->content_hash) << "item " << at;
    ASSERT_EQ(resumed->rejected.size(), reference->rejected.size()) << "item " << at;
    EXPECT_EQ(resumed->rejected[0].item, reference->rejected[0].item);
    uint64_t written = 0;
    for (const auto& s : resumed->splits) written += s.written;
    EXPECT_EQ(written, 60u);
    // The class counts too: the journal keeps those of the samples written before the interruption.
    const auto counts = [](const std::string& at) {
      return nlohmann::json::parse(testing::ReadFile(at + "/manifest.json")).at("class_counts");
    };
    EXPECT_EQ(counts(db), counts(dir_.Sub("reference"))) << "item " << at;
    auto report = VerifyDb(db);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok());
    EXPECT_FALSE(std::filesystem::exists(db + ".partial"));
  }
}

TEST_F(ImageFolder, ResumeRefusesChangedOptions) {
  ImageFolderOptions io;
  io.width = io.height = 16;
  auto source = OpenImageFolderSource(dir_.Sub("raw"), io);
  ASSERT_TRUE(source.ok());
  std::atomic<bool> cancel{false};
  Source interrupted;
  interrupted.info = source->info;
  interrupted.splits.push_back(std::make_unique<testing::CancellingSplit>(*source->splits[0], 30, &cancel));
  BuildOptions o;
  o.db_path = dir_.Sub("db");
  o.cancel = &cancel;
  o.records_per_commit = 2;
  o.max_reject_fraction = 0.1;
  ASSERT_FALSE(BuildDb(interrupted, o).ok());
  BuildOptions other;
  other.db_path = dir_.Sub("db");
  other.resume = true;
  other.zstd_level = 7;
  other.max_reject_fraction = 0.1;
  auto refused = BuildDb(source.value(), other);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("without --resume"), std::string::npos) << refused.status().message();
}

// Image folders as people keep them: which top folders are splits and which
// are classes is decided from the whole folder.
class FolderLayouts : public ::testing::Test {
 protected:
  // A 6 x 6 JPEG at RAW/<path>.
  void Image(const std::string& path) {
    std::filesystem::create_directories(std::filesystem::path(dir_.Sub("raw/" + path)).parent_path());
    const uint8_t shade[3] = {10, 20, 30};
    testing::WriteFile(dir_.Sub("raw/" + path), Jpeg(TwoColour(6, 6, shade, kRed), 6, 6, JCS_RGB));
  }
  StatusOr<Source> Open(FolderLayout layout = FolderLayout::kAuto) {
    ImageFolderOptions io;
    io.width = io.height = 4;
    io.layout = layout;
    return OpenImageFolderSource(dir_.Sub("raw"), io);
  }
  static std::string Notes(const Source& source) {
    std::string notes;
    for (const std::string& n : source.info.notes) notes += n + "\n";
    return notes;
  }
  TempDir dir_;
};

// raw/{bus,car,train}/ with train/ holding subfolders: torchvision's
// ImageFolder reads three classes and every image, and so does prep; a note
// says why train/ is a class, and --layout splits refuses to drop bus/, car/.
TEST_F(FolderLayouts, AClassNamedTrainBesideOtherClassesIsAClass) {
  for (int i = 0; i < 6; ++i) Image("bus/b" + std::to_string(i) + ".jpg"), Image("car/c" + std::to_string(i) + ".jpg");
  Image("train/steam/x1.jpg");
  Image("train/electric/x2.jpg");
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"bus", "car", "train"}));
  ASSERT_EQ(source->splits.size(), 1u);
  EXPECT_EQ(source->splits[0]->size(), 14u);
  EXPECT_EQ(source->info.options.at("layout"), "classes");
  EXPECT_NE(Notes(source.value()).find("train/ is a class here"), std::string::npos) << Notes(source.value());
  auto splits = Open(FolderLayout::kSplits);
  ASSERT_FALSE(splits.ok());
  EXPECT_NE(splits.status().message().find("bus/, car/ beside train/ would be left out"), std::string::npos)
      << splits.status().ToString();
  // The same with val/ or test/ as the class folder's name.
  std::filesystem::rename(dir_.Sub("raw/train"), dir_.Sub("raw/val"));
  auto val = Open();
  ASSERT_TRUE(val.ok()) << val.status().ToString();
  EXPECT_EQ(val->info.class_names, (std::vector<std::string>{"bus", "car", "val"}));
  EXPECT_EQ(val->splits[0]->size(), 14u);
}

// The usual train/ + validation/ (or val/, test/) layout is splits;
// validation/ is split "val"; images loose in train/ make it a class
// folder instead of being dropped.
TEST_F(FolderLayouts, SplitFoldersHoldingClassesAreSplits) {
  for (const char* split : {"train", "validation"}) {
    for (const char* c : {"a", "b"}) {
      for (const char* name : {"/1.jpg", "/2.jpg"}) Image(std::string(split) + "/" + c + name);
    }
  }
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(source->splits.size(), 2u);
  EXPECT_EQ(source->splits[0]->name(), "train");
  EXPECT_EQ(source->splits[1]->name(), "val");
  EXPECT_EQ(source->splits[1]->size(), 4u);
  EXPECT_EQ(source->info.options.at("layout"), "splits");
  auto as_classes = Open(FolderLayout::kClasses);
  ASSERT_TRUE(as_classes.ok());
  EXPECT_EQ(as_classes->info.class_names, (std::vector<std::string>{"train", "validation"}));
  EXPECT_EQ(as_classes->splits[0]->size(), 8u);
  Image("train/loose.jpg");
  auto loose = Open();
  ASSERT_TRUE(loose.ok()) << loose.status().ToString();
  EXPECT_EQ(loose->info.class_names, (std::vector<std::string>{"train", "validation"}));
  EXPECT_EQ(loose->splits[0]->size(), 9u);
  // Both val/ and validation/: which is meant cannot be told.
  std::filesystem::remove(dir_.Sub("raw/train/loose.jpg"));
  Image("val/a/3.jpg");
  auto twice = Open();
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("both val/ and validation/"), std::string::npos) << twice.status().ToString();
}

// Where both readings take every image but disagree, the folder is refused
// naming both readings; --layout decides.
TEST_F(FolderLayouts, AnAmbiguousFolderIsRefusedNamingBothReadings) {
  Image("train/steam/1.jpg");
  Image("test/diesel/1.jpg");  // a class train/ lacks
  auto source = Open();
  ASSERT_FALSE(source.ok());
  const std::string message = source.status().message();
  for (const char* part : {"ambiguous layout", "read as splits", "read as classes, the classes are test, train",
                           "test/diesel/ is not a class of train/", "--layout splits or --layout classes"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  }
  auto classes = Open(FolderLayout::kClasses);
  ASSERT_TRUE(classes.ok()) << classes.status().ToString();
  EXPECT_EQ(classes->info.class_names, (std::vector<std::string>{"test", "train"}));
  std::filesystem::remove_all(dir_.Sub("raw/test"));
  std::filesystem::create_directories(dir_.Sub("raw/notes"));  // a folder with no image beside train/
  auto beside = Open();
  ASSERT_FALSE(beside.ok());
  EXPECT_NE(beside.status().message().find("notes/ beside them hold no images"), std::string::npos)
      << beside.status().ToString();
}

// Tiny ImageNet's layout: train/<wnid>/images/*.JPEG beside a boxes file,
// val/images/ labelled by val/val_annotations.txt (tab-separated, no
// header: file, wnid, box), test/images/ without labels. Read as splits:
// val's images labelled with train's classes by the table (an image it does
// not name rejected by name, a class train/ lacks refused), test/ left out
// and noted. Without the table, the folder is as ambiguous as before.
TEST_F(FolderLayouts, ASplitLabelledByATableInItIsReadWithTrainsClasses) {
  const std::vector<std::string> wnids = {"n01443537", "n01629819"};
  for (const std::string& w : wnids) {
    for (int k = 0; k < 3; ++k) Image("train/" + w + "/images/" + w + "_" + std::to_string(k) + ".JPEG");
    testing::WriteFile(dir_.Sub("raw/train/" + w + "/" + w + "_boxes.txt"), w + "_0.JPEG\t0\t0\t5\t5\n");
  }
  std::string annotations;
  for (int k = 0; k < 4; ++k) {
    Image("val/images/val_" + std::to_string(k) + ".JPEG");
    if (k < 3) annotations += "val_" + std::to_string(k) + ".JPEG\t" + wnids[k % 2] + "\t0\t0\t5\t5\n";
  }
  testing::WriteFile(dir_.Sub("raw/val/val_annotations.txt"), annotations);
  Image("test/images/test_0.JPEG");
  testing::WriteFile(dir_.Sub("raw/wnids.txt"), wnids[0] + "\n" + wnids[1] + "\n");
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.options.at("layout"), "splits");
  EXPECT_EQ(source->info.class_names, wnids);
  ASSERT_EQ(source->splits.size(), 2u);
  EXPECT_EQ(source->splits[0]->size(), 6u);
  ASSERT_EQ(source->splits[1]->name(), "val");
  std::vector<std::string> labels;
  for (uint64_t i = 0; i < source->splits[1]->size(); ++i) {
    Sample sample;
    const Status status = source->splits[1]->Produce(i, &sample);
    int64_t label = -1;
    if (status.ok()) std::memcpy(&label, sample.fields[1].data(), sizeof(label));
    labels.push_back(source->splits[1]->ItemName(i) + " " + (status.ok() ? std::to_string(label) : status.message()));
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"val/images/val_0.JPEG 0", "val/images/val_1.JPEG 1",
                                               "val/images/val_2.JPEG 0",
                                               "val/images/val_3.JPEG no label: no row of " +
                                                   dir_.Sub("raw/val/val_annotations.txt") + " names it"}));
  const std::string notes = Notes(source.value());
  EXPECT_NE(notes.find("test/: neither class folders nor a table of labels"), std::string::npos) << notes;
  EXPECT_NE(notes.find("ignored 2 file(s) without"), std::string::npos) << notes;  // the boxes, not the table
  EXPECT_NE(source->info.options.at("val_labels_hash").find("xxh64:"), std::string::npos);
  // A class train/ lacks is refused naming its line.
  testing::WriteFile(dir_.Sub("raw/val/val_annotations.txt"), annotations + "val_3.JPEG\tn09999999\t0\t0\t5\t5\n");
  auto unknown = Open();
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("val_annotations.txt:4: 'val_3.JPEG' is labelled 'n09999999', which is "
                                            "none of train/'s 2 classes (n01443537, n01629819)"),
            std::string::npos)
      << unknown.status().ToString();
  // Without the table, val/images/ and test/images/ make the folder ambiguous, as before.
  std::filesystem::remove(dir_.Sub("raw/val/val_annotations.txt"));
  auto untabled = Open();
  ASSERT_FALSE(untabled.ok());
  EXPECT_NE(untabled.status().message().find("ambiguous layout"), std::string::npos) << untabled.status().ToString();
}

// What people keep beside their images is skipped and noted, never counted
// as a reject nor made a class: macOS's ._ files, hidden folders (.git),
// a granary db built inside the raw folder; a class left empty is named.
TEST_F(FolderLayouts, DotfilesHiddenFoldersAndDbsInsideAreSkippedAndNoted) {
  for (const char* c : {"a", "b"}) Image(std::string(c) + "/1.jpg");
  testing::WriteFile(dir_.Sub("raw/a/._1.jpg"), std::string("\0\5\26\7 AppleDouble", 17));
  std::filesystem::create_directories(dir_.Sub("raw/.git/objects"));
  std::filesystem::create_directories(dir_.Sub("raw/empty"));
  std::filesystem::create_directories(dir_.Sub("raw/old.db"));
  testing::WriteFile(dir_.Sub("raw/old.db/manifest.json"), R"({"format": "granary-db"})");
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"a", "b", "empty"}));
  EXPECT_EQ(source->splits[0]->size(), 2u);
  const std::string notes = Notes(source.value());
  for (const char* part : {"hidden or system file(s) or folder(s) (a name starting with '.', lost+found, __MACOSX, "
                           "@eaDir): a/._1.jpg",
                           "hidden or system folder(s) .git/", "granary db(s) old.db/",
                           "1 class(es) with no image in train: empty"}) {
    EXPECT_NE(notes.find(part), std::string::npos) << part << " not in: " << notes;
  }
}

// Folders a file system, an archiver or an OS makes are no classes: photos
// kept on a disk of their own (ext4's lost+found, root's alone: "list failed:
// Permission denied" for anyone else; for root an empty third class), a zip
// made on a Mac extracted (__MACOSX/), a Synology NAS's share (@eaDir/ in
// every folder, thumbnails of each photo), a disk Windows has used.
TEST_F(FolderLayouts, FoldersTheSystemMakesAreNoClassesAndHoldNoSamples) {
  for (const char* c : {"a", "b"}) Image(std::string(c) + "/1.jpg");
  for (const char* system : {"lost+found", "$RECYCLE.BIN", "System Volume Information"}) {
    std::filesystem::create_directories(dir_.Sub(std::string("raw/") + system));
  }
  Image("__MACOSX/a/1.jpg");
  Image("a/@eaDir/1.jpg/SYNOPHOTO_THUMB_XL.jpg");
  std::filesystem::permissions(dir_.Sub("raw/lost+found"), std::filesystem::perms::owner_all);
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(source->splits[0]->size(), 2u);
  const std::string notes = Notes(source.value());
  for (const char* part : {"hidden or system folder(s) $RECYCLE.BIN/, System Volume Information/, __MACOSX/, "
                           "lost+found/", "(a name starting with '.', lost+found, __MACOSX, @eaDir): a/@eaDir"}) {
    EXPECT_NE(notes.find(part), std::string::npos) << part << " not in: " << notes;
  }
}

// raw/{real,dup -> real}: real's images stay real's (its folder comes first
// by real path), dup is an alias named in a note, and left empty, named too;
// real's plain subfolder is not called a link.
TEST_F(FolderLayouts, AClassFolderLinkedToAnotherIsAnAliasNotATakeover) {
  Image("real/1.jpg");
  Image("real/sub/2.jpg");
  std::filesystem::create_directory_symlink("real", dir_.Sub("raw/dup"));
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"dup", "real"}));
  const SplitSource& train = *source->splits[0];
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(train.ItemName(0), "real/1.jpg");
  EXPECT_EQ(train.ItemName(1), "real/sub/2.jpg");
  const std::string notes = Notes(source.value());
  EXPECT_NE(notes.find("1 class folder(s) are links to another class's folder, whose images are taken once, as that "
                       "class's: dup/"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("1 class(es) with no image in train: dup"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("real/sub"), std::string::npos) << notes;
}

// A hard link in val/ of an image in train/ stays in val (as torchvision's
// ImageFolder counts it), and the overlap is noted, naming both splits.
TEST_F(FolderLayouts, AnImageHardLinkedIntoValStaysThereAndTheOverlapIsNoted) {
  for (const char* name : {"train/a/1.jpg", "train/a/2.jpg", "val/a/2.jpg", "val/a/3.jpg"}) Image(name);
  std::filesystem::create_hard_link(dir_.Sub("raw/train/a/1.jpg"), dir_.Sub("raw/val/a/1.jpg"));
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ(source->splits.size(), 2u);
  EXPECT_EQ(source->splits[0]->size(), 2u);
  EXPECT_EQ(source->splits[1]->size(), 3u);
  const std::string notes = Notes(source.value());
  EXPECT_NE(notes.find("1 image(s) are the same file as an image of an earlier split"), std::string::npos) << notes;
  EXPECT_NE(notes.find("val/a/1.jpg (train)"), std::string::npos) << notes;
}

// --limit N keeps every class's share of N (largest remainder), each
// class's first images, not the first N in class order.
TEST_F(FolderLayouts, LimitTakesAStratifiedSubset) {
  for (int c = 0; c < 10; ++c) {
    for (int i = 0; i < 3 + c % 2; ++i) Image("c" + std::to_string(c) + "/" + std::to_string(i) + ".jpg");
  }
  ImageFolderOptions io;
  io.width = io.height = 4;
  io.limit = 10;
  auto source = OpenImageFolderSource(dir_.Sub("raw"), io);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const SplitSource& train = *source->splits[0];
  ASSERT_EQ(train.size(), 10u);
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(train.ItemName(i), "c" + std::to_string(i) + "/0.jpg");
  EXPECT_EQ(StratifiedFirst({0, 0, 0, 0, 1, 1, 2, 2}, 4), (std::vector<size_t>{0, 1, 4, 6}));
  EXPECT_EQ(StratifiedFirst({5, 5, 1}, 0), (std::vector<size_t>{0, 1, 2}));
}

}  // namespace
}  // namespace granary
