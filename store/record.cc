// Record encoding per docs/FORMAT.md, "Record values".
#include "store/record.h"

#define XXH_STATIC_LINKING_ONLY  // for stack-allocated XXH64_state_t
#include <xxhash.h>
#include <zstd.h>

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

// Bytes of the header up to (not including) the checksum, or 0 if `value` is
// too short to say. Invariant: the table's size depends only on the schema.
size_t HeaderBytesBeforeChecksum(const Schema& schema) {
  size_t n = format::kFixedHeaderBytes;
  for (const FieldSpec& f : schema.fields) {
    n += format::kFieldLengthBytes;
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

struct ZstdCCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct ZstdDCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

}  // namespace

struct RecordEncoder::Impl {
  Schema schema;
  int level;
  size_t header_bytes;
  std::unique_ptr<ZSTD_CCtx, ZstdCCtxDeleter> cctx;
  std::string payload;
  std::string body;
};

RecordEncoder::RecordEncoder(Schema schema, int zstd_level) : impl_(new Impl) {
  impl_->header_bytes = HeaderBytesBeforeChecksum(schema);
  impl_->schema = std::move(schema);
  impl_->level = zstd_level;
  if (zstd_level > 0) impl_->cctx.reset(ZSTD_createCCtx());
}

RecordEncoder::~RecordEncoder() = default;

Status RecordEncoder::Encode(const std::vector<FieldInput>& fields, std::string* out, uint64_t* payload_hash) {
  const Schema& schema = impl_->schema;
  if (fields.size() != schema.fields.size()) {
    return Status::InvalidArgument("record has " + std::to_string(fields.size()) + " fields, schema has " +
                                   std::to_string(schema.fields.size()));
  }
  out->clear();
  out->push_back(static_cast<char>(format::kRecordVersion));
  out->push_back(static_cast<char>(impl_->level > 0 ? Codec::kZstd : Codec::kNone));
  PutU16(out, static_cast<uint16_t>(fields.size()));
  size_t payload_bytes = 0;
  for (const FieldInput& f : fields) payload_bytes += f.bytes;
  if (payload_bytes > UINT32_MAX) return Status::InvalidArgument("record payload exceeds 4 GiB");
  PutU32(out, static_cast<uint32_t>(payload_bytes));

  for (size_t i = 0; i < fields.size(); ++i) {
    const FieldSpec& spec = schema.fields[i];
    const FieldInput& f = fields[i];
    const Shape& shape = spec.HasVariableDims() ? f.shape : spec.shape;
    if (shape.size() != spec.shape.size()) {
      return Status::InvalidArgument("field '" + spec.name + "': shape " + ShapeToString(shape) +
                                     " does not match schema " + ShapeToString(spec.shape));
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      bool fits = spec.shape[d] == kVariableDim ? (shape[d] >= 0 && shape[d] <= UINT32_MAX)
                                                 : shape[d] == spec.shape[d];
      if (!fits) {
        return Status::InvalidArgument("field '" + spec.name + "': shape " + ShapeToString(shape) +
                                       " does not match schema " + ShapeToString(spec.shape));
      }
    }
    size_t expected = static_cast<size_t>(NumElements(shape)) * DTypeBytes(spec.dtype);
    if (f.bytes != expected) {
      return Status::InvalidArgument("field '" + spec.name + "': " + std::to_string(f.bytes) +
                                     " bytes, shape " + ShapeToString(shape) + " needs " +
                                     std::to_string(expected));
    }
    PutU32(out, static_cast<uint32_t>(f.bytes));
    if (spec.HasVariableDims()) {
      for (int64_t d : shape) PutU32(out, static_cast<uint32_t>(d));
    }
  }

  std::string& payload = impl_->payload;
  payload.clear();
  for (const FieldInput& f : fields) payload.append(static_cast<const char*>(f.data), f.bytes);
  if (payload_hash != nullptr) *payload_hash = XXH64(payload.data(), payload.size(), format::kChecksumSeed);

  std::string& body = impl_->body;
  if (impl_->level <= 0) {
    body = payload;
  } else {
    body.resize(ZSTD_compressBound(payload.size()));
    size_t n = ZSTD_compressCCtx(impl_->cctx.get(), body.data(), body.size(), payload.data(), payload.size(),
                                 impl_->level);
    if (ZSTD_isError(n)) return Status::InvalidArgument(std::string("zstd compression: ") + ZSTD_getErrorName(n));
    body.resize(n);
  }
  PutU64(out, StoredChecksum(*out, body));
  out->append(body);
  return Status::OK();
}

struct RecordDecoder::Impl {
  Schema schema;
  size_t header_bytes;
  std::unique_ptr<ZSTD_DCtx, ZstdDCtxDeleter> dctx;
};

RecordDecoder::RecordDecoder(Schema schema) : impl_(new Impl) {
  impl_->header_bytes = HeaderBytesBeforeChecksum(schema);
  impl_->schema = std::move(schema);
  impl_->dctx.reset(ZSTD_createDCtx());
}

RecordDecoder::~RecordDecoder() = default;

Status RecordDecoder::Decode(std::string_view value, DecodedRecord* out) {
  const Schema& schema = impl_->schema;
  const auto* p = reinterpret_cast<const uint8_t*>(value.data());
  const size_t header_bytes = impl_->header_bytes;
  if (value.size() < header_bytes + format::kChecksumBytes) {
    return Status::Corruption("record of " + std::to_string(value.size()) + " bytes is shorter than its header (" +
                              std::to_string(header_bytes + format::kChecksumBytes) + ")");
  }
  if (p[0] != format::kRecordVersion) {
    return Status::Corruption("record version " + std::to_string(p[0]) + " is not " +
                              std::to_string(format::kRecordVersion));
  }
  const uint64_t stored_checksum = GetLE(p + header_bytes, 8);
  const size_t body_at = header_bytes + format::kChecksumBytes;
  if (StoredChecksum(value.substr(0, header_bytes), value.substr(body_at)) != stored_checksum) {
    return Status::Corruption("checksum mismatch");
  }
  const uint8_t codec = p[1];
  if (codec != static_cast<uint8_t>(Codec::kNone) && codec != static_cast<uint8_t>(Codec::kZstd)) {
    return Status::Corruption("unknown codec " + std::to_string(codec));
  }
  const uint64_t field_count = GetLE(p + 2, 2);
  if (field_count != schema.fields.size()) {
    return Status::Corruption("record has " + std::to_string(field_count) + " fields, schema has " +
                              std::to_string(schema.fields.size()));
  }
  const uint64_t payload_bytes = GetLE(p + 4, 4);

  out->fields.resize(schema.fields.size());
  const uint8_t* table = p + format::kFixedHeaderBytes;
  uint64_t offset = 0;
  for (size_t i = 0; i < schema.fields.size(); ++i) {
    const FieldSpec& spec = schema.fields[i];
    FieldView& view = out->fields[i];
    view.bytes = GetLE(table, 4);
    table += format::kFieldLengthBytes;
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
    uint64_t expected = static_cast<uint64_t>(NumElements(view.shape)) * DTypeBytes(spec.dtype);
    if (view.bytes != expected) {
      return Status::Corruption("field '" + spec.name + "': length " + std::to_string(view.bytes) +
                                " does not match shape " + ShapeToString(view.shape));
    }
    offset += view.bytes;
  }
  if (offset != payload_bytes) {
    return Status::Corruption("field lengths sum to " + std::to_string(offset) + ", header says " +
                              std::to_string(payload_bytes));
  }
  const uint8_t* body = p + body_at;
  const size_t body_bytes = value.size() - body_at;

  out->payload.resize(payload_bytes);
  if (codec == static_cast<uint8_t>(Codec::kNone)) {
    if (body_bytes != payload_bytes) {
      return Status::Corruption("body of " + std::to_string(body_bytes) + " bytes, header says " +
                                std::to_string(payload_bytes));
    }
    if (payload_bytes > 0) std::memcpy(out->payload.data(), body, payload_bytes);
  } else {
    unsigned long long frame_size = ZSTD_getFrameContentSize(body, body_bytes);
    if (frame_size != payload_bytes) {
      return Status::Corruption("zstd frame content size does not match header (" + std::to_string(payload_bytes) +
                                " bytes)");
    }
    size_t n = ZSTD_decompressDCtx(impl_->dctx.get(), out->payload.data(), payload_bytes, body, body_bytes);
    if (ZSTD_isError(n)) return Status::Corruption(std::string("zstd: ") + ZSTD_getErrorName(n));
    if (n != payload_bytes) return Status::Corruption("zstd frame decompressed to " + std::to_string(n) + " bytes");
  }

  out->checksum = stored_checksum;

  uint8_t* cursor = out->payload.data();
  for (FieldView& view : out->fields) {
    view.data = cursor;
    cursor += view.bytes;
  }
  return Status::OK();
}

uint64_t PayloadHash(const DecodedRecord& record) {
  return XXH64(record.payload.data(), record.payload.size(), format::kChecksumSeed);
}

}  // namespace granary
