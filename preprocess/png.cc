#include "preprocess/png.h"

#include <png.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <vector>

namespace granary {

Status WritePng(const std::string& path, const uint8_t* pixels, int width, int height, int channels) {
  static const int kColorTypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                    PNG_COLOR_TYPE_RGB_ALPHA};
  if (channels < 1 || channels > 4 || width < 1 || height < 1) {
    return Status::InvalidArgument("cannot write a PNG of " + std::to_string(width) + "x" + std::to_string(height) +
                                   "x" + std::to_string(channels));
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!file) return Status::IOError(path, "create", errno);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png != nullptr ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    return Status::IOError(path, "set up libpng", 0);
  }
  std::vector<png_bytep> rows(height);
  for (int y = 0; y < height; ++y) {
    rows[y] = const_cast<png_bytep>(pixels + static_cast<size_t>(y) * width * channels);
  }
  if (setjmp(png_jmpbuf(png))) {  // libpng reports errors by longjmp
    png_destroy_write_struct(&png, &info);
    return Status::IOError(path, "write PNG", 0);
  }
  png_init_io(png, file.get());
  png_set_IHDR(png, info, width, height, 8, kColorTypes[channels - 1], PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fflush(file.get()) != 0) return Status::IOError(path, "write", errno);
  return Status::OK();
}

}  // namespace granary
