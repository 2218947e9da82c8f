// WebDataset shards: tar files whose members are grouped into samples by
// their names (000001.jpg beside 000001.cls), as webdataset's ShardWriter,
// img2dataset and torchvision-era pipelines write them. Internal to
// preprocess.
#pragma once

#include <string>

#include "base/status.h"
#include "preprocess/source.h"

namespace granary {

// Whether `raw` is a .tar file, or a folder of .tar files alone (hidden
// files aside), whose first shard holds images: WebDataset shards.
bool IsWebDataset(const std::string& raw);

// The shards at `raw` (IsWebDataset) as image samples: each image member
// (.jpg, .jpeg, .png, .webp) decoded and transformed as an image folder's
// are (options: size, channels, max_decode_bytes, val_fraction, limit,
// like), its label the integer in the .cls member beside it (classes as a
// table's integer labels are: dense indices, or numbered in order of value).
// Splits by the shards' names (a word train, val or test; train where none),
// with val_fraction a held-out share of train by a hash of each sample's
// key. A sample without an image, or with one and no .cls, is rejected by
// name ("shard.tar:KEY"); a shard with images and no .cls at all (captions)
// is refused, saying what writes it; a damaged tar named. Members are read
// in place: nothing is extracted.
StatusOr<Source> OpenWebDatasetSource(const std::string& raw, const ImageFolderOptions& options);

}  // namespace granary
