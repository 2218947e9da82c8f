#include "preprocess/packing.h"

#include <algorithm>
#include <utility>

#include "store/db_writer.h"

namespace granary {
namespace {

// Fills inputs[k] with FieldInputs pointing into `sample`.
Status Inputs(const Schema& schema, const Sample& sample, SampleInput* inputs) {
  if (sample.fields.size() != schema.fields.size()) {
    return Status::InvalidArgument("source produced " + std::to_string(sample.fields.size()) + " fields");
  }
  inputs->resize(schema.fields.size());
  for (size_t f = 0; f < schema.fields.size(); ++f) {
    (*inputs)[f].data = sample.fields[f].data();
    (*inputs)[f].bytes = sample.fields[f].size();
    if (schema.fields[f].HasVariableDims()) (*inputs)[f].shape = sample.shapes.at(f);
  }
  return Status::OK();
}

// Fills sample->fields from `record`, a record holding it alone (Sample::fields_in_record).
Status DecodeStoredFields(EncodeScratch& s, std::string_view record, Sample* sample) {
  GRANARY_RETURN_IF_ERROR(s.decoder.Decode(record, &s.decoded).WithContext("a copied record"));
  if (s.decoded.num_samples != 1) return Status::Corruption("a copied record holds more than its sample");
  CopyDecodedFields(s.decoded.sample(0), s.decoded.num_fields, sample);
  sample->fields_in_record = false;
  return Status::OK();
}

}  // namespace

void CopyDecodedFields(const FieldView* fields, size_t n, Sample* sample) {
  sample->fields.resize(n);
  sample->shapes.resize(n);
  for (size_t f = 0; f < n; ++f) {
    sample->fields[f].assign(reinterpret_cast<const char*>(fields[f].data), fields[f].bytes);
    sample->shapes[f] = fields[f].shape;
  }
}

void EncodeProduced(const Schema& schema, Status status, EncodeScratch& s, Encoded* out) {
  if (status.ok() && out->sample.fields_in_record && !s.has_dictionary) {
    // The record is what this build would make of the sample: kept as it is,
    // its fields decoded only if a block needs them (EncodeBlock).
    out->payload_bytes += out->sample.stored_payload_bytes;
    out->payload_hash = out->sample.stored_payload_hash;
    out->value = std::move(out->sample.stored_record);
    out->sample.stored_record.clear();
    return;
  }
  if (status.ok() && out->sample.fields_in_record) {
    status = DecodeStoredFields(s, out->sample.stored_record, &out->sample);
    out->sample.stored_record.clear();
  }
  s.inputs.resize(1);
  if (status.ok()) status = Inputs(schema, out->sample, &s.inputs[0]);
  if (status.ok()) {
    for (const std::string& f : out->sample.fields) out->payload_bytes += f.size();
    status = s.encoder.EncodeOne(s.inputs[0], &out->value, &out->payload_hash);
  }
  if (!status.ok()) {
    out->value.clear();
    out->sample = Sample();
    out->reject = status.message();
  }
}

void EncodeItem(const Schema& schema, const SplitSource& split, EncodeScratch& s, Encoded* out) {
  const Status produced =
      s.has_dictionary ? split.Produce(out->index, &out->sample) : split.ProduceStored(out->index, &out->sample);
  if (produced.ok() && out->sample.fields_in_record) out->item_label = split.ItemLabel(out->index);
  EncodeProduced(schema, produced, s, out);
}

void EncodeBlock(const Schema& schema, EncodeScratch& s, Block* block) {
  std::vector<Encoded*> accepted;
  for (const EncodedPtr& e : block->items) {
    if (e->reject.empty()) accepted.push_back(e.get());
  }
  block->statistics = StatisticsAccumulator(schema);
  block->counts = ValueCounter(schema);
  // A record of one stored sample (an --update's copy) whose label the
  // source knows is counted by it, not decompressed for it.
  const bool labels_known =
      block->counts.OnlyField(s.label_field) &&
      std::all_of(accepted.begin(), accepted.end(), [](const Encoded* e) {
        return !e->sample.fields_in_record || e->item_label >= 0;
      });
  if (accepted.size() > 1 || !block->statistics.empty() || (!block->counts.empty() && !labels_known)) {
    for (Encoded* e : accepted) {
      if (!e->sample.fields_in_record) continue;
      Status st = DecodeStoredFields(s, e->value, &e->sample);
      if (!st.ok()) {
        block->error = st.message();
        return;
      }
    }
  }
  if (accepted.size() == 1) {
    block->value = std::move(accepted[0]->value);
    block->payload_hashes = {accepted[0]->payload_hash};
  } else if (accepted.size() > 1) {
    s.inputs.resize(accepted.size());
    for (size_t k = 0; k < accepted.size(); ++k) {
      Status st = Inputs(schema, accepted[k]->sample, &s.inputs[k]);
      if (!st.ok()) {
        block->error = st.message();
        return;
      }
    }
    Status st = s.encoder.Encode(s.inputs, &block->value, &block->payload_hashes);
    if (!st.ok()) block->error = st.message();
  }
  for (Encoded* e : accepted) {
    block->statistics.Add(e->sample.fields);  // (none kept where a stored sample was not decoded)
    if (e->sample.fields_in_record) {
      block->counts.AddToOnlyField(e->item_label);
    } else {
      block->counts.Add(e->sample.fields);
    }
  }
  for (Encoded* e : accepted) e->sample = Sample();  // the record holds it now
}

std::vector<BlockPtr> Packer::Add(const EncodedPtr& e) {
  std::vector<BlockPtr> done;
  if (e->reject.empty()) {
    const size_t share = e->value.size() - RecordOverheadBytes(schema_, 1);
    // Compressed together, samples take a little more than alone; 2%
    // headroom keeps blocks from spilling into one more page.
    const size_t expected = RecordOverheadBytes(schema_, accepted_ + 1) + (body_bytes_ + share) * 102 / 100;
    const bool fits = accepted_ == 0 ||
                      (expected <= block_bytes_ && payload_bytes_ + e->payload_bytes <= kMaxBlockPayloadBytes);
    if (!fits) done.push_back(Take());
    ++accepted_;
    body_bytes_ += share;
    payload_bytes_ += e->payload_bytes;
  }
  current_->items.push_back(e);
  if (++seen_ == items_ || current_->items.size() >= kMaxBlockItems) done.push_back(Take());
  return done;
}

BlockPtr Packer::Rest() { return current_->items.empty() ? nullptr : Take(); }

BlockPtr Packer::Take() {
  BlockPtr block = std::move(current_);
  current_ = std::make_shared<Block>();
  current_->seq = block->seq + 1;
  accepted_ = 0;
  body_bytes_ = 0;
  payload_bytes_ = 0;
  return block;
}

uint64_t PackedBytes(const Schema& schema, const std::vector<Sample>& samples, int level,
                     std::shared_ptr<const CompressionDictionary> dictionary, size_t block_bytes) {
  EncodeScratch scratch(schema, level, std::move(dictionary));
  Packer packer(schema, samples.size(), block_bytes);
  uint64_t bytes = 0;
  for (size_t k = 0; k < samples.size(); ++k) {
    auto e = std::make_shared<Encoded>();
    e->index = k;
    e->sample = samples[k];
    EncodeProduced(schema, Status::OK(), scratch, e.get());
    for (const BlockPtr& block : packer.Add(e)) {
      EncodeBlock(schema, scratch, block.get());
      if (!block->value.empty()) bytes += StoredBytesOfValue(block->value.size());
    }
  }
  return bytes;
}

}  // namespace granary
