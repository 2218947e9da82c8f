// How a split's items become records (preprocess/build.cc's graph and the
// dictionary trial share it): each item encoded alone in parallel, then
// consecutive items packed (serially) into blocks of about `block_bytes`,
// each block encoded as one record. Internal to preprocess.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "preprocess/field_statistics.h"
#include "preprocess/source.h"
#include "preprocess/value_counts.h"
#include "store/record.h"

namespace granary {

// An item after the parallel encode stage: its sample, and the sample
// encoded alone (the record if its block holds only it; its size otherwise
// estimates its share of a block).
struct Encoded {
  uint64_t index = 0;
  Sample sample;
  std::string value;   // empty if rejected
  std::string reject;  // why the item was rejected
  uint64_t payload_bytes = 0;
  uint64_t payload_hash = 0;
  int64_t item_label = -1;  // the source's ItemLabel of an item that came as a stored record (-1: none)
};
using EncodedPtr = std::shared_ptr<Encoded>;

// Consecutive items that become one record (rejected items ride along so the
// writer can name them in order).
struct Block {
  uint64_t seq = 0;
  std::vector<EncodedPtr> items;
  std::string value;  // empty if every item was rejected
  std::vector<uint64_t> payload_hashes;
  StatisticsAccumulator statistics;  // of the accepted samples, in order
  ValueCounter counts;               // of their labels (scalar integer fields)
  std::string error;  // encoding the block failed
};
using BlockPtr = std::shared_ptr<Block>;

// A block never holds more than this many items or uncompressed bytes, so a
// reader never decompresses much to get one sample, and the limiter (which
// must admit more than one block) stays small.
inline constexpr size_t kMaxBlockItems = 256;
inline constexpr uint64_t kMaxBlockPayloadBytes = 64 << 10;

// Per-thread state of the encode nodes.
struct EncodeScratch {
  EncodeScratch(const Schema& schema, int level, std::shared_ptr<const CompressionDictionary> dict)
      : has_dictionary(dict != nullptr), encoder(schema, level, std::move(dict)), decoder(schema) {}
  bool has_dictionary;
  RecordEncoder encoder;
  std::vector<SampleInput> inputs;
  RecordDecoder decoder;  // of stored records (Sample::fields_in_record), which have no dictionary
  DecodedRecord decoded;
  int label_field = -1;  // the schema's field that a source's ItemLabel is the value of (-1: none)
};

// Sets sample->fields and ->shapes to copies of the `n` decoded `fields`.
void CopyDecodedFields(const FieldView* fields, size_t n, Sample* sample);

// Encodes out->sample alone, or rejects it with `status` if that is an error.
void EncodeProduced(const Schema& schema, Status status, EncodeScratch& s, Encoded* out);
// Produces item out->index of `split` (as a stored record alone where the
// source has one and the build has no dictionary) and encodes it alone.
void EncodeItem(const Schema& schema, const SplitSource& split, EncodeScratch& s, Encoded* out);
// Encodes the accepted items of `block` as one record, and accumulates their
// statistics and label counts (block->statistics, ->counts).
void EncodeBlock(const Schema& schema, EncodeScratch& s, Block* block);

// Groups consecutive items into blocks whose record should fit `block_bytes`,
// estimating each sample's share by its size encoded alone. Serial.
class Packer {
 public:
  Packer(const Schema& schema, uint64_t items, size_t block_bytes)
      : schema_(schema), items_(items), block_bytes_(block_bytes) {}

  // Adds `e`; returns the blocks that are complete (at most two).
  std::vector<BlockPtr> Add(const EncodedPtr& e);
  // The last block of a split whose length was not known (items = kUnknown):
  // what was added since the last complete block; null if nothing was.
  BlockPtr Rest();

  static constexpr uint64_t kUnknown = UINT64_MAX;

 private:
  BlockPtr Take();

  const Schema& schema_;
  const uint64_t items_;
  const size_t block_bytes_;
  uint64_t seen_ = 0;
  BlockPtr current_ = std::make_shared<Block>();
  size_t accepted_ = 0;
  size_t body_bytes_ = 0;
  uint64_t payload_bytes_ = 0;
};

// The shard bytes of the records `samples` become when packed into blocks as
// BuildSplit packs them (rejected samples left out), LMDB's pages counted.
uint64_t PackedBytes(const Schema& schema, const std::vector<Sample>& samples, int level,
                     std::shared_ptr<const CompressionDictionary> dictionary, size_t block_bytes);

}  // namespace granary
