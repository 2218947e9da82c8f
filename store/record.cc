// Record encoding per docs/FORMAT.md, "Record values".
#include "store/record.h"

#define XXH_STATIC_LINKING_ONLY   // for stack-allocated XXH64_state_t
#define ZSTD_STATIC_LINKING_ONLY  // for ZSTD_c_format (magicless frames of codec zstd-dict)
#include <xxhash.h>
#include <zdict.h>
#include <zstd.h>

#include <cassert>
#include <cstring>

#include "store/format.h"

namespace granary {
namespace {

using format::Codec;

void PutU16(std::string* s, uint16_t v) {
  char b[2] = {static_cast<char>(v & 0xFF), static_cast<char>(v >> 8)};
  s->append(b, 2);
}
void PutU32(std::string* s, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  s->append(b, 4);
}
void PutU64(std::string* s, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  s->append(b, 8);
}
uint64_t GetLE(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Dim-table bytes per sample: every dim of every variable-shape field.
size_t DimTableBytesPerSample(const Schema& schema) {
  size_t n = 0;
  for (const FieldSpec& f : schema.fields) {
    if (f.HasVariableDims()) n += f.shape.size() * format::kDimBytes;
  }
  return n;
}

// The record checksum covers the header before it and the body as stored, so
// any changed byte is caught before decompression (a checksum of the
// uncompressed bytes misses changes that zstd's decoder tolerates).
uint64_t StoredChecksum(std::string_view header, std::string_view body) {
  XXH64_state_t state;
  XXH64_reset(&state, format::kChecksumSeed);
  XXH64_update(&state, header.data(), header.size());
  XXH64_update(&state, body.data(), body.size());
  return XXH64_digest(&state);
}

std::string ShapeMismatch(const FieldSpec& spec, const Shape& shape) {
  return "field '" + spec.name + "': shape " + ShapeToString(shape) + " does not match schema " +
         ShapeToString(spec.shape);
}

struct ZstdCCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct ZstdDCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};
struct ZstdCDictDeleter {
  void operator()(ZSTD_CDict* d) const { ZSTD_freeCDict(d); }
};
struct ZstdDDictDeleter {
  void operator()(ZSTD_DDict* d) const { ZSTD_freeDDict(d); }
};

// A record value's fixed header and dim table, checked (docs/FORMAT.md,
// "Record values"): the version, sample count, checksum, codec and sizes.
struct RecordHeader {
  uint64_t num_samples = 0;
  uint8_t codec = 0;
  uint64_t payload_bytes = 0;
  size_t header_bytes = 0;  // fixed header + dim table
  size_t body_at = 0;       // after the checksum
  uint64_t checksum = 0;
};

StatusOr<RecordHeader> ParseRecordHeader(std::string_view value, const Schema& schema, size_t dims_per_sample,
                                         bool has_dictionary) {
  const auto* p = reinterpret_cast<const uint8_t*>(value.data());
  if (value.size() < format::kFixedHeaderBytes + format::kChecksumBytes) {
    return Status::Corruption("record of " + std::to_string(value.size()) + " bytes is shorter than a header");
  }
  if (p[0] != format::kRecordVersion) {
    return Status::Corruption("record version " + std::to_string(p[0]) + " is not " +
                              std::to_string(format::kRecordVersion));
  }
  RecordHeader h;
  h.num_samples = GetLE(p + 8, 4);
  if (h.num_samples == 0 || h.num_samples > format::kMaxRecordSamples) {
    return Status::Corruption("record holds " + std::to_string(h.num_samples) + " samples");
  }
  // Invariant: header_bytes <= value.size(), so no product below overflows.
  if (dims_per_sample > 0 && h.num_samples > value.size() / dims_per_sample) {
    return Status::Corruption("dim table of " + std::to_string(h.num_samples) + " samples exceeds the record");
  }
  h.header_bytes = format::kFixedHeaderBytes + h.num_samples * dims_per_sample;
  h.body_at = h.header_bytes + format::kChecksumBytes;
  if (value.size() < h.body_at) return Status::Corruption("record is shorter than its header");
  h.checksum = GetLE(p + h.header_bytes, 8);
#ifndef GRANARY_FUZZING_IGNORE_CHECKSUMS  // tools/fuzz: let mutated records reach the checks below
  if (StoredChecksum(value.substr(0, h.header_bytes), value.substr(h.body_at)) != h.checksum) {
    return Status::Corruption("checksum mismatch");
  }
#endif
  h.codec = p[1];
  if (h.codec > static_cast<uint8_t>(Codec::kZstdDict)) {
    return Status::Corruption("unknown codec " + std::to_string(h.codec));
  }
  if (h.codec == static_cast<uint8_t>(Codec::kZstdDict) && !has_dictionary) {
    return Status::Corruption("record needs the db's dictionary, and the db has none");
  }
  const uint64_t field_count = GetLE(p + 2, 2);
  if (field_count != schema.fields.size()) {
    return Status::Corruption("record has " + std::to_string(field_count) + " fields, schema has " +
                              std::to_string(schema.fields.size()));
  }
  h.payload_bytes = GetLE(p + 4, 4);
  if (h.payload_bytes > format::kMaxPayloadBytes) {
    return Status::Corruption("payload of " + std::to_string(h.payload_bytes) + " bytes exceeds the 1 GiB limit");
  }
  return h;
}

// Each sample's fields' shapes (from the schema and the dim table after the
// fixed header of `p`) and byte sizes into out->fields; their sizes must sum
// to the header's payload.
Status LayOutFields(const Schema& schema, const RecordHeader& h, const uint8_t* p, DecodedRecord* out) {
  const size_t n = schema.fields.size();
  out->num_samples = static_cast<uint32_t>(h.num_samples);
  out->num_fields = n;
  // Only grows: FieldViews past num_samples * n keep their shape buffers for
  // the next record, so a run of decodes settles into allocating nothing.
  if (out->fields.size() < h.num_samples * n) out->fields.resize(h.num_samples * n);
  const uint8_t* table = p + format::kFixedHeaderBytes;
  uint64_t total = 0;
  for (uint64_t s = 0; s < h.num_samples && total <= h.payload_bytes; ++s) {
    for (size_t i = 0; i < n; ++i) {
      const FieldSpec& spec = schema.fields[i];
      FieldView& view = out->fields[s * n + i];
      view.shape.assign(spec.shape.begin(), spec.shape.end());
      if (spec.HasVariableDims()) {
        for (size_t d = 0; d < spec.shape.size(); ++d, table += format::kDimBytes) {
          int64_t dim = static_cast<int64_t>(GetLE(table, 4));
          if (spec.shape[d] != kVariableDim && dim != spec.shape[d]) {
            return Status::Corruption("field '" + spec.name + "': dim " + std::to_string(d) + " is " +
                                      std::to_string(dim) + ", schema says " + std::to_string(spec.shape[d]));
          }
          view.shape[d] = dim;
        }
      }
      // Invariant: every product stays <= payload_bytes < 2^32, so nothing overflows.
      uint64_t bytes = DTypeBytes(spec.dtype);
      for (int64_t dim : view.shape) {
        if (dim != 0 && bytes > h.payload_bytes / static_cast<uint64_t>(dim)) {
          bytes = h.payload_bytes + 1;
          break;
        }
        bytes *= static_cast<uint64_t>(dim);
      }
      view.bytes = static_cast<size_t>(bytes);
      total += bytes;
    }
  }
  if (total != h.payload_bytes) {
    return Status::Corruption("field shapes need " + std::to_string(total) + " bytes, header says " +
                              std::to_string(h.payload_bytes));
  }
  return Status::OK();
}

// One zstd frame (without magic when `magicless`: codec zstd-dict) holding
// exactly `payload_bytes` decompressed into *payload.
Status Decompress(std::string_view body, uint64_t payload_bytes, bool magicless, ZSTD_DCtx* dctx,
                  std::vector<uint8_t>* payload) {
  // A zstd block takes at least 4 bytes and yields at most 128 KiB, so a
  // frame can never hold more than 32768 times its size: a record claiming
  // more is refused before its payload is allocated.
  constexpr uint64_t kZstdMaxExpansion = (uint64_t{128} << 10) / 4;
  if (payload_bytes / kZstdMaxExpansion > body.size()) {
    return Status::Corruption("a zstd frame of " + std::to_string(body.size()) + " bytes cannot hold the " +
                              std::to_string(payload_bytes) + " bytes the header says");
  }
  ZSTD_frameHeader frame;
  size_t rc = ZSTD_getFrameHeader_advanced(&frame, body.data(), body.size(),
                                           magicless ? ZSTD_f_zstd1_magicless : ZSTD_f_zstd1);
  if (rc != 0 || frame.frameContentSize != payload_bytes) {
    return Status::Corruption("zstd frame header does not declare " + std::to_string(payload_bytes) + " bytes");
  }
  payload->resize(payload_bytes);
  size_t got = ZSTD_decompressDCtx(dctx, payload->data(), payload_bytes, body.data(), body.size());
  if (ZSTD_isError(got)) return Status::Corruption(std::string("zstd: ") + ZSTD_getErrorName(got));
  if (got != payload_bytes) return Status::Corruption("zstd frame decompressed to " + std::to_string(got) + " bytes");
  return Status::OK();
}

}  // namespace

// ---------------------------------------------------------------------------

struct CompressionDictionary::Impl {
  std::string bytes;
  std::unique_ptr<ZSTD_CDict, ZstdCDictDeleter> cdict;
  std::unique_ptr<ZSTD_DDict, ZstdDDictDeleter> ddict;
};

CompressionDictionary::CompressionDictionary() : impl_(new Impl) {}
CompressionDictionary::~CompressionDictionary() = default;
const std::string& CompressionDictionary::bytes() const { return impl_->bytes; }

StatusOr<std::shared_ptr<const CompressionDictionary>> CompressionDictionary::Create(std::string bytes,
                                                                                     int compression_level) {
  std::shared_ptr<CompressionDictionary> dict(new CompressionDictionary());
  dict->impl_->bytes = std::move(bytes);
  const std::string& b = dict->impl_->bytes;
  dict->impl_->ddict.reset(ZSTD_createDDict(b.data(), b.size()));
  if (dict->impl_->ddict == nullptr) return Status::InvalidArgument("zstd rejects the dictionary");
  if (compression_level > 0) {
    dict->impl_->cdict.reset(ZSTD_createCDict(b.data(), b.size(), compression_level));
    if (dict->impl_->cdict == nullptr) return Status::InvalidArgument("zstd rejects the dictionary");
  }
  return std::shared_ptr<const CompressionDictionary>(std::move(dict));
}

StatusOr<std::string> TrainDictionary(const std::string& samples, const std::vector<size_t>& sample_bytes,
                                      size_t max_bytes) {
  std::string dict(max_bytes, '\0');
  size_t n = ZDICT_trainFromBuffer(dict.data(), dict.size(), samples.data(), sample_bytes.data(),
                                   static_cast<unsigned>(sample_bytes.size()));
  if (ZDICT_isError(n)) {
    return Status::InvalidArgument(ZDICT_getErrorName(n));  // the callers say what was being trained
  }
  dict.resize(n);
  return dict;
}

// ---------------------------------------------------------------------------

struct RecordEncoder::Impl {
  Schema schema;
  int level = 0;
  std::shared_ptr<const CompressionDictionary> dictionary;
  std::unique_ptr<ZSTD_CCtx, ZstdCCtxDeleter> cctx;
  std::string payload;
  std::string body;
};

RecordEncoder::RecordEncoder(Schema schema, int zstd_level, std::shared_ptr<const CompressionDictionary> dictionary)
    : impl_(new Impl) {
  impl_->schema = std::move(schema);
  impl_->level = zstd_level;
  if (zstd_level <= 0) return;
  impl_->cctx.reset(ZSTD_createCCtx());
  ZSTD_CCtx* cctx = impl_->cctx.get();
  if (dictionary != nullptr && dictionary->impl_->cdict != nullptr) {
    impl_->dictionary = std::move(dictionary);
    ZSTD_CCtx_refCDict(cctx, impl_->dictionary->impl_->cdict.get());
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_format, ZSTD_f_zstd1_magicless);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_dictIDFlag, 0);
  } else {
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, zstd_level);
  }
}

RecordEncoder::~RecordEncoder() = default;

Status RecordEncoder::Encode(const std::vector<SampleInput>& samples, std::string* out,
                             std::vector<uint64_t>* payload_hashes) {
  const Schema& schema = impl_->schema;
  if (samples.empty()) return Status::InvalidArgument("a record needs at least one sample");
  Codec codec = Codec::kNone;
  if (impl_->level > 0) codec = impl_->dictionary != nullptr ? Codec::kZstdDict : Codec::kZstd;
  size_t payload_bytes = 0;
  for (const SampleInput& fields : samples) {
    for (const FieldInput& f : fields) payload_bytes += f.bytes;
  }
  if (payload_bytes > format::kMaxPayloadBytes) return Status::InvalidArgument("record payload exceeds 1 GiB");
  if (samples.size() > format::kMaxRecordSamples) return Status::InvalidArgument("more than 65536 samples in a record");

  out->clear();
  out->push_back(static_cast<char>(format::kRecordVersion));
  out->push_back(static_cast<char>(codec));
  PutU16(out, static_cast<uint16_t>(schema.fields.size()));
  PutU32(out, static_cast<uint32_t>(payload_bytes));
  PutU32(out, static_cast<uint32_t>(samples.size()));
  for (const SampleInput& fields : samples) {
    if (fields.size() != schema.fields.size()) {
      return Status::InvalidArgument("sample has " + std::to_string(fields.size()) + " fields, schema has " +
                                     std::to_string(schema.fields.size()));
    }
    for (size_t i = 0; i < fields.size(); ++i) {
      const FieldSpec& spec = schema.fields[i];
      const FieldInput& f = fields[i];
      const Shape& shape = spec.HasVariableDims() ? f.shape : spec.shape;
      if (shape.size() != spec.shape.size()) return Status::InvalidArgument(ShapeMismatch(spec, shape));
      for (size_t d = 0; d < shape.size(); ++d) {
        bool fits = spec.shape[d] == kVariableDim ? (shape[d] >= 0 && shape[d] <= UINT32_MAX)
                                                   : shape[d] == spec.shape[d];
        if (!fits) return Status::InvalidArgument(ShapeMismatch(spec, shape));
      }
      size_t expected = static_cast<size_t>(NumElements(shape)) * DTypeBytes(spec.dtype);
      if (f.bytes != expected) {
        return Status::InvalidArgument("field '" + spec.name + "': " + std::to_string(f.bytes) + " bytes, shape " +
                                       ShapeToString(shape) + " needs " + std::to_string(expected));
      }
      if (spec.HasVariableDims()) {
        for (int64_t d : shape) PutU32(out, static_cast<uint32_t>(d));
      }
    }
  }

  std::string& payload = impl_->payload;
  payload.clear();
  if (payload_hashes != nullptr) payload_hashes->clear();
  for (const SampleInput& fields : samples) {
    const size_t sample_at = payload.size();
    for (const FieldInput& f : fields) payload.append(static_cast<const char*>(f.data), f.bytes);
    if (payload_hashes != nullptr) {
      payload_hashes->push_back(XXH64(payload.data() + sample_at, payload.size() - sample_at, format::kChecksumSeed));
    }
  }

  std::string& body = impl_->body;
  if (codec != Codec::kNone) {
    body.resize(ZSTD_compressBound(payload.size()));
    size_t n = ZSTD_compress2(impl_->cctx.get(), body.data(), body.size(), payload.data(), payload.size());
    if (ZSTD_isError(n)) return Status::InvalidArgument(std::string("zstd compression: ") + ZSTD_getErrorName(n));
    body.resize(n);
  }
  const std::string& stored = codec == Codec::kNone ? payload : body;
  PutU64(out, StoredChecksum(*out, stored));
  out->append(stored);
  return Status::OK();
}

Status RecordEncoder::EncodeOne(const SampleInput& sample, std::string* out, uint64_t* payload_hash) {
  std::vector<uint64_t> hashes;
  GRANARY_RETURN_IF_ERROR(Encode({sample}, out, payload_hash != nullptr ? &hashes : nullptr));
  if (payload_hash != nullptr) *payload_hash = hashes[0];
  return Status::OK();
}

// ---------------------------------------------------------------------------

struct RecordDecoder::Impl {
  Schema schema;
  size_t dims_per_sample = 0;  // dim-table bytes per sample
  std::shared_ptr<const CompressionDictionary> dictionary;
  std::unique_ptr<ZSTD_DCtx, ZstdDCtxDeleter> dctx;       // codec zstd
  std::unique_ptr<ZSTD_DCtx, ZstdDCtxDeleter> dict_dctx;  // codec zstd-dict
};

RecordDecoder::RecordDecoder(Schema schema, std::shared_ptr<const CompressionDictionary> dictionary)
    : impl_(new Impl) {
  impl_->dims_per_sample = DimTableBytesPerSample(schema);
  impl_->schema = std::move(schema);
  impl_->dctx.reset(ZSTD_createDCtx());
  if (dictionary != nullptr) {
    impl_->dictionary = std::move(dictionary);
    impl_->dict_dctx.reset(ZSTD_createDCtx());
    ZSTD_DCtx_refDDict(impl_->dict_dctx.get(), impl_->dictionary->impl_->ddict.get());
    ZSTD_DCtx_setParameter(impl_->dict_dctx.get(), ZSTD_d_format, ZSTD_f_zstd1_magicless);
  }
}

RecordDecoder::~RecordDecoder() = default;

Status RecordDecoder::Decode(std::string_view value, DecodedRecord* out) {
  const Schema& schema = impl_->schema;
  StatusOr<RecordHeader> header =
      ParseRecordHeader(value, schema, impl_->dims_per_sample, impl_->dictionary != nullptr);
  if (!header.ok()) return header.status();
  const RecordHeader& h = header.value();
  GRANARY_RETURN_IF_ERROR(LayOutFields(schema, h, reinterpret_cast<const uint8_t*>(value.data()), out));
  const std::string_view body = value.substr(h.body_at);
  if (h.codec == static_cast<uint8_t>(Codec::kNone)) {
    if (body.size() != h.payload_bytes) {
      return Status::Corruption("body of " + std::to_string(body.size()) + " bytes, header says " +
                                std::to_string(h.payload_bytes));
    }
    out->payload.resize(h.payload_bytes);
    if (h.payload_bytes > 0) std::memcpy(out->payload.data(), body.data(), h.payload_bytes);
  } else {
    const bool dict = h.codec == static_cast<uint8_t>(Codec::kZstdDict);
    GRANARY_RETURN_IF_ERROR(
        Decompress(body, h.payload_bytes, dict, dict ? impl_->dict_dctx.get() : impl_->dctx.get(), &out->payload));
  }
  out->checksum = h.checksum;
  uint8_t* cursor = out->payload.data();
  for (size_t k = 0; k < h.num_samples * schema.fields.size(); ++k) {
    out->fields[k].data = cursor;
    cursor += out->fields[k].bytes;
  }
  return Status::OK();
}

Status RecordDecoder::Check(std::string_view value, uint32_t* samples, uint64_t* payload_bytes) {
  GRANARY_ASSIGN_OR_RETURN(const RecordHeader h, ParseRecordHeader(value, impl_->schema, impl_->dims_per_sample,
                                                                   impl_->dictionary != nullptr));
  *samples = static_cast<uint32_t>(h.num_samples);
  *payload_bytes = h.payload_bytes;
  return Status::OK();
}

size_t RecordOverheadBytes(const Schema& schema, size_t samples) {
  return format::kFixedHeaderBytes + samples * DimTableBytesPerSample(schema) + format::kChecksumBytes;
}

uint64_t SamplePayloadHash(const std::vector<std::string>& fields) {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, format::kChecksumSeed);
  for (const std::string& f : fields) XXH64_update(state, f.data(), f.size());
  const uint64_t hash = XXH64_digest(state);
  XXH64_freeState(state);
  return hash;
}

uint64_t SamplePayloadHash(const FieldView* fields, size_t num_fields) {
  size_t bytes = 0;
  for (size_t i = 0; i < num_fields; ++i) {
    // Invariant: a sample's fields are contiguous in the payload.
    assert(i == 0 || fields[i].data == fields[i - 1].data + fields[i - 1].bytes);
    bytes += fields[i].bytes;
  }
  return XXH64(num_fields > 0 ? fields[0].data : nullptr, bytes, format::kChecksumSeed);
}

uint64_t SamplePayloadHash(const DecodedRecord& record, size_t s) {
  return SamplePayloadHash(record.sample(s), record.num_fields);
}

}  // namespace granary
