#include "preprocess/image.h"

#include "base/file.h"
#include "preprocess/png_pixels.h"
#include "preprocess/resample.h"

#include <jpeglib.h>
#include <libexif/exif-data.h>
#include <spng.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cctype>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace granary {
namespace {

// Largest width or height accepted, and pixels in total (or, when
// --max-image-mb allows more, one per byte it allows), so that a corrupt
// header cannot make us allocate gigabytes.
constexpr int kMaxSide = 1 << 15;
constexpr uint64_t kMaxPixels = uint64_t{1} << 28;

uint64_t MaxPixels(uint64_t max_bytes) { return std::max(kMaxPixels, max_bytes); }

// "IMAGE needs N MiB to decode, more than the M MiB allowed", IMAGE as
// "PNG of WxH pixels": the decode would take more than --max-image-mb.
Status NeedsTooMuchMemory(const std::string& image, uint64_t need, uint64_t max_bytes) {
  return Status::InvalidArgument(image + " needs " + std::to_string(need >> 20) + " MiB to decode, more than the " +
                                 std::to_string(max_bytes >> 20) + " MiB allowed (--max-image-mb)");
}

// "KIND of WxH pixels is too large (...)", stating the caps.
Status TooManyPixels(const char* kind, uint64_t width, uint64_t height, uint64_t max_bytes) {
  return Status::InvalidArgument(std::string(kind) + " of " + std::to_string(width) + "x" + std::to_string(height) +
                                 " pixels is too large (at most " + std::to_string(kMaxSide) + " a side and " +
                                 std::to_string(MaxPixels(max_bytes)) + " pixels: 2^28, or one a byte of " +
                                 "--max-image-mb where that is more)");
}

bool IsJpeg(const uint8_t* d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }
bool IsPng(const uint8_t* d, size_t n) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return n >= 8 && std::memcmp(d, kSig, 8) == 0;
}

bool IsWebp(const uint8_t* d, size_t n) {
  return n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0;
}

// What a file that is no JPEG, PNG or WebP is, from its first bytes, for
// its reject's reason ("" where they say nothing known): another image
// format under an image's name, a Git LFS pointer (a dataset cloned without
// git-lfs), an HTML page (a download that failed).
std::string NotAnImageKind(const uint8_t* d, size_t n) {
  const std::string_view head(reinterpret_cast<const char*>(d), std::min<size_t>(n, 64));
  const auto starts = [&](std::string_view magic) { return head.substr(0, magic.size()) == magic; };
  if (IsGitLfsPointer(head)) return kGitLfsAdvice;
  if (head.size() >= 12 && head.substr(4, 4) == "ftyp") {
    const std::string_view brand = head.substr(8, 4);
    if (brand == "avif" || brand == "avis") return "an AVIF image";
    if (brand == "heic" || brand == "heix" || brand == "mif1" || brand == "msf1") return "a HEIC/HEIF image";
    return "a video or other ISO media file";
  }
  using namespace std::string_view_literals;  // "..."sv keeps the NUL bytes in a magic number
  static const std::pair<std::string_view, const char*> kMagic[] = {
      {"GIF87a"sv, "a GIF image"},
      {"GIF89a"sv, "a GIF image"},
      {"II*\0"sv, "a TIFF image"},
      {"MM\0*"sv, "a TIFF image"},
      {"\xFF\x0A"sv, "a JPEG XL image"},
      {"\0\0\0\x0CJXL "sv, "a JPEG XL image"},
      {"\0\0\0\x0CjP  "sv, "a JPEG 2000 image"},
      {"%PDF"sv, "a PDF document"},
      {"PK\x03\x04"sv, "a Zip archive"},
      {"\x1F\x8B"sv, "a gzip file"}};
  for (const auto& [magic, kind] : kMagic) {
    if (starts(magic)) return kind;
  }
  if (n >= 26 && starts("BM")) return "a BMP image";
  if (IsHtmlPage(head)) return "an HTML page (a download that failed?)";
  std::string text(head.substr(std::min(head.size(), head.find_first_not_of(" \t\r\n"))));
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (text.rfind("<svg", 0) == 0 || (text.rfind("<?xml", 0) == 0 && head.find("svg") != std::string_view::npos)) {
    return "an SVG drawing";
  }
  return "";
}

// RGB(A) or gray(A) -> the requested channels; luma as PIL: (299 R + 587 G + 114 B) / 1000.
void ConvertChannels(const uint8_t* src, int src_channels, size_t pixels, int dst_channels, uint8_t* dst) {
  for (size_t i = 0; i < pixels; ++i, src += src_channels, dst += dst_channels) {
    const bool gray_src = src_channels <= 2;
    const uint8_t r = src[0], g = gray_src ? src[0] : src[1], b = gray_src ? src[0] : src[2];
    if (dst_channels == 1) {
      dst[0] = gray_src ? r : static_cast<uint8_t>((299u * r + 587u * g + 114u * b + 500u) / 1000u);
    } else {
      dst[0] = r, dst[1] = g, dst[2] = b;
    }
  }
}

// ---- EXIF orientation -------------------------------------------------------

// Orientation 1..8 from an APP1 "Exif" marker payload; 1 if absent or unreadable.
int ExifOrientation(const uint8_t* app1, size_t size) {
  std::unique_ptr<ExifData, void (*)(ExifData*)> exif(exif_data_new_from_data(app1, static_cast<unsigned>(size)),
                                                       exif_data_unref);
  if (!exif) return 1;
  ExifEntry* entry = exif_content_get_entry(exif->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
  if (entry == nullptr || entry->format != EXIF_FORMAT_SHORT || entry->components < 1) return 1;
  const int o = exif_get_short(entry->data, exif_data_get_byte_order(exif.get()));
  return o >= 1 && o <= 8 ? o : 1;
}

// Applies EXIF orientation `o` (the transform that makes the stored image upright).
void Orient(int o, Image* img) {
  if (o == 1) return;
  const int w = img->width, h = img->height, c = img->channels;
  const bool swap = o >= 5;
  const int ow = swap ? h : w, oh = swap ? w : h;
  std::vector<uint8_t> out(img->pixels.size());
  for (int y = 0; y < oh; ++y) {
    for (int x = 0; x < ow; ++x) {
      int sx, sy;  // source pixel of output (x, y)
      switch (o) {
        case 2: sx = w - 1 - x, sy = y; break;
        case 3: sx = w - 1 - x, sy = h - 1 - y; break;
        case 4: sx = x, sy = h - 1 - y; break;
        case 5: sx = y, sy = x; break;
        case 6: sx = y, sy = h - 1 - x; break;
        case 7: sx = w - 1 - y, sy = h - 1 - x; break;
        default: sx = w - 1 - y, sy = x; break;  // 8
      }
      std::memcpy(&out[(static_cast<size_t>(y) * ow + x) * c], &img->pixels[(static_cast<size_t>(sy) * w + sx) * c], c);
    }
  }
  img->pixels.swap(out);
  img->width = ow;
  img->height = oh;
}

// ---- JPEG ---------------------------------------------------------------------

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  std::string message;
  int warnings = 0;
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  char buf[JMSG_LENGTH_MAX];
  cinfo->err->format_message(cinfo, buf);
  err->message = buf;
  std::longjmp(err->jump, 1);
}

void JpegMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  if (err->warnings++ == 0) {
    char buf[JMSG_LENGTH_MAX];
    cinfo->err->format_message(cinfo, buf);
    err->message = buf;
  }
}

// `min_width`/`min_height`: the decoded image may be DCT-downscaled while it
// stays at least this large (0: full size).
// The EXIF orientation (1..8) in a PNG's eXIf chunk (the TIFF data that
// follows "Exif\0\0" in a JPEG's APP1); 1 if none. Chunks are walked by
// their lengths, each checked against the bytes there are.
int PngOrientation(const uint8_t* data, size_t size) {
  size_t at = 8;  // past the signature
  while (at + 12 <= size) {
    const uint32_t length = uint32_t{data[at]} << 24 | uint32_t{data[at + 1]} << 16 | uint32_t{data[at + 2]} << 8 |
                            data[at + 3];
    if (length > size - at - 12) return 1;
    const uint8_t* type = data + at + 4;
    if (std::memcmp(type, "eXIf", 4) == 0) {
      std::vector<uint8_t> app1 = {'E', 'x', 'i', 'f', 0, 0};
      app1.insert(app1.end(), data + at + 8, data + at + 8 + length);
      return ExifOrientation(app1.data(), app1.size());
    }
    if (std::memcmp(type, "IEND", 4) == 0) return 1;
    at += size_t{12} + length;
  }
  return 1;
}

// The EXIF orientation (1..8) in a JPEG's saved APP1 markers; 1 if none.
int JpegOrientation(const jpeg_decompress_struct& cinfo) {
  int orientation = 1;
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length > 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0) {
      orientation = ExifOrientation(m->data, m->data_length);
    }
  }
  return orientation;
}

// The largest DCT-domain downscaling (1/8, 1/4, 1/2) that still gives at
// least need_w x need_h stored pixels (0: decode at full size), and the IDCT
// and upsampling that go with it. Header fields only: never longjmps.
void ChooseJpegScale(int need_w, int need_h, jpeg_decompress_struct* cinfo) {
  cinfo->scale_num = 1;
  cinfo->scale_denom = 1;
  for (unsigned denom : {8u, 4u, 2u}) {
    if (need_w > 0 && cinfo->image_width / denom >= static_cast<unsigned>(need_w) &&
        cinfo->image_height / denom >= static_cast<unsigned>(need_h)) {
      cinfo->scale_denom = denom;
      break;
    }
  }
  // When shrinking anyway, the fast integer IDCT and plain chroma upsampling
  // lose nothing visible after the resize (PIL's draft() makes the same choice).
  const bool shrinking = cinfo->scale_denom > 1;
  cinfo->dct_method = shrinking ? JDCT_IFAST : JDCT_ISLOW;
  cinfo->do_fancy_upsampling = shrinking ? FALSE : TRUE;
}

// `pixels` CMYK pixels as `channels` channels. Adobe writes CMYK inverted
// (0 = full ink); others plain. RGB = (1 - C)(1 - K) etc.
void CmykToChannels(const std::vector<uint8_t>& cmyk, size_t pixels, bool adobe_inverted, int channels,
                    uint8_t* out) {
  std::vector<uint8_t> rgb(pixels * 3);
  for (size_t i = 0; i < pixels; ++i) {
    const uint8_t* p = &cmyk[i * 4];
    const unsigned k = adobe_inverted ? p[3] : 255u - p[3];
    for (int ch = 0; ch < 3; ++ch) {
      const unsigned v = adobe_inverted ? p[ch] : 255u - p[ch];
      rgb[i * 3 + ch] = static_cast<uint8_t>((v * k + 127) / 255);
    }
  }
  ConvertChannels(rgb.data(), 3, pixels, channels, out);
}

Status DecodeJpeg(const uint8_t* data, size_t size, int channels, int min_width, int min_height,
                  uint64_t max_bytes, Image* out) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegErrorExit;
  err.mgr.emit_message = JpegMessage;
  std::vector<uint8_t> rows;  // declared before setjmp: no destructors skipped
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return Status::InvalidArgument("corrupt JPEG: " + err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&cinfo, TRUE);
  const int orientation = JpegOrientation(cinfo);
  if (cinfo.image_width > kMaxSide || cinfo.image_height > kMaxSide ||
      uint64_t{cinfo.image_width} * cinfo.image_height > MaxPixels(max_bytes)) {
    jpeg_destroy_decompress(&cinfo);
    return TooManyPixels("JPEG", cinfo.image_width, cinfo.image_height, max_bytes);
  }
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : (channels == 1 ? JCS_GRAYSCALE : JCS_RGB);
  // Stored (pre-orientation) dims needed: a 90-degree orientation swaps them.
  const bool swap = orientation >= 5;
  const int need_w = swap ? min_height : min_width, need_h = swap ? min_width : min_height;
  ChooseJpegScale(need_w, need_h, &cinfo);
  // What the decode will hold, from the header alone: the output rows, and
  // for a progressive JPEG every component's coefficients at full size
  // (64 coefficients of 2 bytes a block), however small the output.
  jpeg_calc_output_dimensions(&cinfo);
  uint64_t need = uint64_t{cinfo.output_width} * cinfo.output_height * cinfo.out_color_components;
  if (cinfo.progressive_mode) {
    for (int ci = 0; ci < cinfo.num_components; ++ci) {
      need += uint64_t{cinfo.comp_info[ci].width_in_blocks} * cinfo.comp_info[ci].height_in_blocks * 64 * 2;
    }
  }
  if (need > max_bytes) {
    jpeg_destroy_decompress(&cinfo);
    return NeedsTooMuchMemory("JPEG of " + std::to_string(cinfo.image_width) + "x" +
                                  std::to_string(cinfo.image_height) + " pixels" +
                                  (cinfo.progressive_mode ? " (progressive)" : ""),
                              need, max_bytes);
  }
  cinfo.mem->max_memory_to_use = static_cast<long>(std::min<uint64_t>(max_bytes * 2, LONG_MAX));  // a backstop
  jpeg_start_decompress(&cinfo);
  const int w = static_cast<int>(cinfo.output_width), h = static_cast<int>(cinfo.output_height);
  const int c = cinfo.output_components;
  rows.resize(static_cast<size_t>(w) * h * c);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = rows.data() + static_cast<size_t>(cinfo.output_scanline) * w * c;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  const bool saw_adobe_inverted = cinfo.saw_Adobe_marker;
  const bool gray_file = cinfo.jpeg_color_space == JCS_GRAYSCALE;
  jpeg_destroy_decompress(&cinfo);
  if (err.warnings > 0) return Status::InvalidArgument("corrupt JPEG data: " + err.message);

  out->width = w;
  out->height = h;
  out->channels = channels;
  out->gray_source = gray_file;
  out->pixels.resize(static_cast<size_t>(w) * h * channels);
  if (cmyk) {
    CmykToChannels(rows, static_cast<size_t>(w) * h, saw_adobe_inverted, channels, out->pixels.data());
  } else {
    out->pixels.swap(rows);
  }
  Orient(orientation, out);
  return Status::OK();
}

// ---- PNG ----------------------------------------------------------------------

// The width and height an IHDR chunk declares (big-endian, right after the
// signature and the chunk's length and type), for messages when libspng
// refuses the image before saying them.
std::string PngDeclaredSize(const uint8_t* d, size_t n) {
  if (n < 24) return "?";
  auto be32 = [&](size_t at) { return (uint32_t{d[at]} << 24) | (d[at + 1] << 16) | (d[at + 2] << 8) | d[at + 3]; };
  return std::to_string(be32(16)) + "x" + std::to_string(be32(20));
}

Status DecodePng(const uint8_t* data, size_t size, int channels, uint64_t max_bytes, Image* out) {
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(0), spng_ctx_free);
  if (!ctx) return Status::InvalidArgument("libspng: out of memory");
  spng_set_image_limits(ctx.get(), kMaxSide, kMaxSide);
  spng_set_chunk_limits(ctx.get(), 64 << 20, 64 << 20);
  spng_set_crc_action(ctx.get(), SPNG_CRC_ERROR, SPNG_CRC_ERROR);
  spng_set_png_buffer(ctx.get(), data, size);
  spng_ihdr ihdr;
  int rc = spng_get_ihdr(ctx.get(), &ihdr);
  if (rc == SPNG_EUSER_WIDTH || rc == SPNG_EUSER_HEIGHT) {
    return Status::InvalidArgument("PNG of " + PngDeclaredSize(data, size) + " pixels is too large (at most " +
                                   std::to_string(kMaxSide) + " a side)");
  }
  if (rc != 0) return Status::InvalidArgument(std::string("corrupt PNG: ") + spng_strerror(rc));
  if (uint64_t{ihdr.width} * ihdr.height > MaxPixels(max_bytes)) {
    return TooManyPixels("PNG", ihdr.width, ihdr.height, max_bytes);
  }
  // 8-bit gray or RGB without interlace, what photo folders hold, takes the
  // fast path (png_pixels.h), the rest libspng to RGB8 (or, for gray, as
  // stored); alpha is dropped either way. Should the fast path find fault,
  // libspng decides.
  const bool gray = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE || ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
  const bool plain = ihdr.bit_depth == 8 && ihdr.interlace_method == SPNG_INTERLACE_NONE &&
                     (ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR || ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE);
  const int fmt = plain ? SPNG_FMT_PNG : SPNG_FMT_RGB8;
  const int decoded_channels = plain && gray ? 1 : 3;
  const size_t bytes = size_t{ihdr.width} * ihdr.height * decoded_channels;
  const size_t need = plain ? 2 * bytes + ihdr.height : bytes;  // the fast path holds the filtered rows too
  if (need > max_bytes) {
    return NeedsTooMuchMemory("PNG of " + std::to_string(ihdr.width) + "x" + std::to_string(ihdr.height) + " pixels",
                              need, max_bytes);
  }
  out->width = static_cast<int>(ihdr.width);
  out->height = static_cast<int>(ihdr.height);
  out->channels = channels;
  out->gray_source = gray;
  std::vector<uint8_t> decoded(bytes);
  if (!plain || !DecodePlainPngPixels(data, size, ihdr.width, ihdr.height, decoded_channels, decoded.data())) {
    rc = spng_decode_image(ctx.get(), decoded.data(), decoded.size(), fmt, 0);
    if (rc != 0) return Status::InvalidArgument(std::string("corrupt PNG: ") + spng_strerror(rc));
  }
  const size_t pixels = static_cast<size_t>(out->width) * out->height;
  if (decoded_channels == channels) {
    out->pixels.swap(decoded);
  } else if (gray && channels == 1) {  // RGB8 of a gray PNG has R = G = B: take it as gray so luma is exact
    out->pixels.resize(pixels);
    for (size_t i = 0; i < pixels; ++i) out->pixels[i] = decoded[i * 3];
  } else {
    out->pixels.resize(pixels * channels);
    ConvertChannels(decoded.data(), decoded_channels, pixels, channels, out->pixels.data());
  }
  Orient(PngOrientation(data, size), out);  // as a JPEG's EXIF orientation is
  return Status::OK();
}

// ---- WebP ---------------------------------------------------------------------

// The EXIF orientation (1..8) in a WebP's EXIF chunk (TIFF data, with or
// without the "Exif\0\0" of a JPEG's APP1 before it); 1 if none.
int WebpOrientation(const uint8_t* data, size_t size) {
  const WebPData bytes = {data, size};
  std::unique_ptr<WebPDemuxer, void (*)(WebPDemuxer*)> demux(WebPDemux(&bytes), WebPDemuxDelete);
  if (!demux || !(WebPDemuxGetI(demux.get(), WEBP_FF_FORMAT_FLAGS) & EXIF_FLAG)) return 1;
  WebPChunkIterator chunk;
  if (!WebPDemuxGetChunk(demux.get(), "EXIF", 1, &chunk)) return 1;
  const uint8_t* exif = chunk.chunk.bytes;
  const size_t length = chunk.chunk.size;
  std::vector<uint8_t> app1 = {'E', 'x', 'i', 'f', 0, 0};
  const bool prefixed = length >= 6 && std::memcmp(exif, app1.data(), 6) == 0;
  app1.insert(app1.end(), exif + (prefixed ? 6 : 0), exif + length);
  WebPDemuxReleaseChunkIterator(&chunk);
  return ExifOrientation(app1.data(), app1.size());
}

// A still WebP (lossy or lossless; alpha dropped as PIL's convert("RGB")
// does) decoded with libwebp to RGB, then to `channels`.
Status DecodeWebp(const uint8_t* data, size_t size, int channels, uint64_t max_bytes, Image* out) {
  WebPBitstreamFeatures features;
  const VP8StatusCode rc = WebPGetFeatures(data, size, &features);
  if (rc == VP8_STATUS_NOT_ENOUGH_DATA) return Status::InvalidArgument("truncated WebP");
  if (rc != VP8_STATUS_OK) return Status::InvalidArgument("corrupt WebP (libwebp status " + std::to_string(rc) + ")");
  if (features.has_animation) return Status::InvalidArgument("animated WebP: prep stores still images");
  const uint64_t width = static_cast<uint64_t>(features.width), height = static_cast<uint64_t>(features.height);
  if (width > kMaxSide || height > kMaxSide || width * height > MaxPixels(max_bytes)) {
    return TooManyPixels("WebP", width, height, max_bytes);
  }
  const size_t bytes = width * height * 3;
  if (bytes > max_bytes) {
    return NeedsTooMuchMemory("WebP of " + std::to_string(width) + "x" + std::to_string(height) + " pixels", bytes,
                              max_bytes);
  }
  std::vector<uint8_t> rgb(bytes);
  const int stride = static_cast<int>(width * 3);
  if (WebPDecodeRGBInto(data, size, rgb.data(), rgb.size(), stride) == nullptr) {
    return Status::InvalidArgument("corrupt or truncated WebP");
  }
  out->width = static_cast<int>(width);
  out->height = static_cast<int>(height);
  out->channels = channels;
  out->gray_source = false;
  if (channels == 3) {
    out->pixels.swap(rgb);
  } else {
    out->pixels.resize(width * height);
    ConvertChannels(rgb.data(), 3, width * height, 1, out->pixels.data());
  }
  Orient(WebpOrientation(data, size), out);
  return Status::OK();
}

Status DecodeAny(const uint8_t* data, size_t size, int channels, int min_w, int min_h, uint64_t max_bytes,
                 Image* out) {
  if (channels != 1 && channels != 3) return Status::InvalidArgument("channels must be 1 or 3");
  if (IsJpeg(data, size)) return DecodeJpeg(data, size, channels, min_w, min_h, max_bytes, out);
  if (IsPng(data, size)) return DecodePng(data, size, channels, max_bytes, out);
  if (IsWebp(data, size)) return DecodeWebp(data, size, channels, max_bytes, out);
  const std::string kind = NotAnImageKind(data, size);
  return Status::InvalidArgument("not a JPEG, PNG or WebP image" + (kind.empty() ? "" : ": " + kind));
}

}  // namespace

Status DecodeImageFull(const uint8_t* data, size_t size, int channels, Image* out) {
  return DecodeAny(data, size, channels, 0, 0, kDefaultMaxDecodeBytes, out);
}

Status DecodeImage(const uint8_t* data, size_t size, const ImageTransform& t, Image* out) {
  if (t.width < 1 || t.height < 1) return Status::InvalidArgument("target size must be positive");
  Image full;
  // Decoding at half the target or more is exact enough: the resize below
  // then downsamples by at most 2x less than it would otherwise.
  GRANARY_RETURN_IF_ERROR(DecodeAny(data, size, t.channels, t.width, t.height, t.max_decode_bytes, &full));
  if (full.width < 1 || full.height < 1) return Status::InvalidArgument("image has no pixels");
  // Scale to cover the target, then take the centred crop, computed in
  // source pixels so only the crop is resampled.
  const double scale = std::max(static_cast<double>(t.width) / full.width, static_cast<double>(t.height) / full.height);
  const int crop_w = std::clamp(static_cast<int>(std::lround(t.width / scale)), 1, full.width);
  const int crop_h = std::clamp(static_cast<int>(std::lround(t.height / scale)), 1, full.height);
  const int x0 = (full.width - crop_w) / 2, y0 = (full.height - crop_h) / 2;
  out->width = t.width;
  out->height = t.height;
  out->channels = t.channels;
  out->gray_source = full.gray_source;
  out->enlarged = scale > 1;  // then no DCT downscale was used: full is the file's own size
  out->source_width = full.width;
  out->source_height = full.height;
  out->pixels.resize(static_cast<size_t>(t.width) * t.height * t.channels);
  const size_t stride = static_cast<size_t>(full.width) * full.channels;
  const uint8_t* origin = full.pixels.data() + y0 * stride + static_cast<size_t>(x0) * full.channels;
  if (crop_w == t.width && crop_h == t.height) {
    for (int y = 0; y < t.height; ++y) {
      std::memcpy(&out->pixels[static_cast<size_t>(y) * t.width * t.channels], origin + y * stride,
                  static_cast<size_t>(t.width) * t.channels);
    }
    return Status::OK();
  }
  Resample(origin, crop_w, crop_h, stride, t.channels, t.width, t.height, out->pixels.data());
  return Status::OK();
}

}  // namespace granary
