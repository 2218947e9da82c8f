// Writes seed inputs for the raw-input fuzz targets: IDX files (uint8 images
// and labels, other element types), CSV tables with label "y" (quoted fields,
// missing values, string labels), and small JPEGs (baseline and progressive,
// gray and RGB, EXIF-less), PNGs (gray, RGB, RGBA, palette-less) and WebPs (lossy, lossless) with a
// first byte that picks the target size. Usage: make_input_seeds IDX CSV IMAGE
#include <cstdio>
#include <cstdlib>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include <fstream>
#include <string>
#include <vector>

#include "preprocess/png.h"
#include "tests/ustar.h"

#include <webp/encode.h>

namespace {

void Write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::vector<uint8_t> Pixels(int w, int h, int c) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * c);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37) ^ (i >> 3));
  return px;
}

std::string Jpeg(int w, int h, int c, bool progressive) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = w;
  cinfo.image_height = h;
  cinfo.input_components = c;
  cinfo.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  const std::vector<uint8_t> px = Pixels(w, h, c);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&px[cinfo.next_scanline * w * c]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buf), size);
  std::free(buf);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  const std::string idx = argv[1], csv = argv[2], image = argv[3], tar = argv[4];
  // IDX: magic 0 0 type dims, big-endian dims, then the elements.
  Write(idx + "/images", std::string("\0\0\x08\x03", 4) + Be32(3) + Be32(2) + Be32(2) + std::string(12, '\x07'));
  Write(idx + "/labels", std::string("\0\0\x08\x01", 4) + Be32(4) + std::string("\x01\x02\x03\x04", 4));
  Write(idx + "/floats", std::string("\0\0\x0D\x02", 4) + Be32(2) + Be32(2) + std::string(16, '\x3f'));
  Write(idx + "/int16", std::string("\0\0\x0B\x01", 4) + Be32(3) + std::string(6, '\x01'));
  // CSV: the first byte is the fuzz target's options.
  Write(csv + "/plain", std::string("\0", 1) + "a,b,y\n1,2,0\n3.5,-4e2,1\n5,6,0\n");
  Write(csv + "/quoted", std::string("\1", 1) + "\"a, b\",c,y\n\"1\",,cat\n2,NA,dog\n\"3\"\"\",4,cat\n");
  Write(csv + "/split", std::string("\2", 1) + "\xEF\xBB\xBFx,y\n" + "1,0\n2,1\n3,0\n4,1\n5,0\n6,1\n");
  // As numpy, UCI, R and Weka save tables, and a LIBSVM file.
  Write(csv + "/spaces", std::string("\0", 1) + "# a b y\n1.5e+00  2.0e+00 1\n-3.0e+00 4 0\n");
  Write(csv + "/title", std::string("\1", 1) + "|1x3 Cross validator\nx, z, y\n25, ?, <=50K.\n38, 2, >50K.\n");
  Write(csv + "/rnames", std::string("\0", 1) + "\"x\" \"y\"\n\"1\" 1.5 \"a\"\n\"2\" 3 \"b\"\n");
  Write(csv + "/arff", std::string("\1", 1) + "% c\n@relation r\n@attribute 'a b' real\n@attribute y {p,'q r'}\n"
                                              "@data\n1.5,p\n% c\n?,'q r'\n");
  Write(csv + "/libsvm", std::string("\2", 1) + "-1 3:1 11:0.5\n+1 1:2 # c\n2 0:1 4:x\n");
  // Images: the first byte picks size and channels.
  int n = 0;
  for (bool progressive : {false, true}) {
    for (int c : {1, 3})
      Write(image + "/jpeg" + std::to_string(n++), std::string("\x21", 1) + Jpeg(24, 16, c, progressive));
  }
  for (int c : {1, 2, 3, 4}) {
    const std::string tmp = image + "/tmp.png";
    const std::vector<uint8_t> px = Pixels(20, 12, c);
    if (!granary::WritePng(tmp, px.data(), 20, 12, c).ok()) return 1;
    Write(image + "/png" + std::to_string(c), std::string(c == 1 ? "\x85" : "\x13", 1) + Read(tmp));
    // WebDataset shards: the PNG beside a .cls, one named by a pax header, one by a GNU long name, one without.
    Write(tar + "/shard" + std::to_string(c),
          granary::testing::UstarArchive({{"a/0.png", Read(tmp)}, {"a/0.cls", std::to_string(c)},
                                          {"p|x", "16 path=b/1.png\n"}, {"x.png", Read(tmp)}, {"b/1.cls", "0\n"},
                                          {"././@LongLink|L", "c/2.png"}, {"y", Read(tmp)}, {"3.png", Read(tmp)}}));
    std::remove(tmp.c_str());
  }
  const std::vector<uint8_t> rgb = Pixels(20, 12, 3);
  for (bool lossless : {false, true}) {
    uint8_t* webp = nullptr;
    const size_t size = lossless ? WebPEncodeLosslessRGB(rgb.data(), 20, 12, 60, &webp)
                                 : WebPEncodeRGB(rgb.data(), 20, 12, 60, 80, &webp);
    if (size == 0) return 1;
    Write(image + (lossless ? "/webp-lossless" : "/webp-lossy"),
          std::string("\x13", 1) + std::string(reinterpret_cast<char*>(webp), size));
    WebPFree(webp);
  }
  return 0;
}
