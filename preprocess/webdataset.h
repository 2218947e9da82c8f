// WebDataset shards (tar files whose members are grouped into samples by
// their names: 000001.jpg beside 000001.cls) where prep is given them for a
// dataset: named, with the shell lines that extract them into class folders
// prep builds. Internal to preprocess.
#pragma once

#include <string>

namespace granary {

// The refusal of `raw`, a .tar file or a folder of them, where its (first)
// shard holds images each beside a .cls label (WebDataset's classification
// layout): the lines that extract every shard and move each image into a
// class folder named by its label (zero-padded, so that their order is the
// labels'), split by the shards' names (train, val, test) where they say
// one, then build `db`; where its images have no .cls (captions, JSON), what
// writes them instead. "" where `raw` is no such shard or folder.
std::string WebDatasetAdvice(const std::string& raw, const std::string& db);

}  // namespace granary
