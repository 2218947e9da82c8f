#include "preprocess/image_facts.h"

#include <algorithm>
#include <cstdio>

namespace granary {
namespace {

void AtomicMin(std::atomic<int>* a, int v) {
  for (int now = a->load(); v < now && !a->compare_exchange_weak(now, v);) {
  }
}

void AtomicMax(std::atomic<int>* a, int v) {
  for (int now = a->load(); v > now && !a->compare_exchange_weak(now, v);) {
  }
}

std::string DimsText(int width, int height) { return std::to_string(width) + "x" + std::to_string(height); }

}  // namespace

void ImageFacts::Record(uint64_t index, const Image& image) {
  flags_[index] = kDecoded | (image.gray_source ? kGray : 0) | (image.enlarged ? kEnlarged : 0);
  if (!image.enlarged) return;
  AtomicMin(&min_width_, image.source_width);
  AtomicMin(&min_height_, image.source_height);
  AtomicMax(&max_width_, image.source_width);
  AtomicMax(&max_height_, image.source_height);
}

void ImageFacts::AddTo(Totals* t) const {
  for (uint8_t f : flags_) {
    t->decoded += (f & kDecoded) != 0;
    t->gray += (f & kGray) != 0;
    t->enlarged += (f & kEnlarged) != 0;
  }
  t->min_width = std::min(t->min_width, min_width_.load());
  t->min_height = std::min(t->min_height, min_height_.load());
  t->max_width = std::max(t->max_width, max_width_.load());
  t->max_height = std::max(t->max_height, max_height_.load());
}

Status DecodeImageItem(std::string_view bytes, int64_t label, const ImageTransform& transform, uint64_t index,
                       ImageFacts* facts, Sample* sample) {
  thread_local Image image;
  if (bytes.empty()) return Status::InvalidArgument("empty file");
  GRANARY_RETURN_IF_ERROR(DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), transform, &image));
  sample->fields.resize(2);
  sample->fields[0].assign(reinterpret_cast<const char*>(image.pixels.data()), image.pixels.size());
  sample->fields[1].assign(reinterpret_cast<const char*>(&label), sizeof(label));
  facts->Record(index, image);
  return Status::OK();
}

std::vector<std::string> DecodedImageNotes(const std::vector<const ImageFacts*>& facts,
                                           const ImageTransform& transform) {
  ImageFacts::Totals t;
  for (const ImageFacts* f : facts) f->AddTo(&t);
  if (t.decoded == 0) return {};
  const std::string every = "every image decoded (" + std::to_string(t.decoded) + ")";
  const std::string target = DimsText(transform.width, transform.height);
  std::vector<std::string> notes;
  if (t.gray == t.decoded && transform.channels == 3) {
    notes.push_back(every + " is grayscale, stored as 3 equal channels (--channels 3, the default: RGB, as "
                    "ImageFolder loads images); --channels 1 stores a third of the bytes and trains on one channel");
  }
  if (t.enlarged == 0) return notes;
  if (t.enlarged == t.decoded && t.min_width == t.max_width && t.min_height == t.max_height) {
    const std::string size = DimsText(t.max_width, t.max_height);
    char times[32];
    std::snprintf(times, sizeof(times), "%.1f",
                  static_cast<double>(transform.width) * transform.height / (double{1} * t.max_width * t.max_height));
    const std::string own = t.max_width == t.max_height ? std::to_string(t.max_width) : size;
    notes.push_back(every + " is " + size + ", smaller than --size " + target + ": enlarged to it (" + times +
                    "x the pixels to store and train on); --size " + own + " keeps them as they are");
  } else {
    notes.push_back(std::to_string(t.enlarged) + " of the " + std::to_string(t.decoded) +
                    " images decoded were smaller than --size " + target + " and enlarged to it (sizes up to " +
                    std::to_string(t.max_width) + " wide and " + std::to_string(t.max_height) + " high)");
  }
  return notes;
}

}  // namespace granary
