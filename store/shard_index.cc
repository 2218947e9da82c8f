#include "store/shard_index.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "store/format.h"
#include "store/lmdb_handles.h"

namespace granary {

std::string EncodeKey(uint64_t index) {
  std::string key(format::kKeyBytes, '\0');
  for (size_t i = 0; i < format::kKeyBytes; ++i) key[format::kKeyBytes - 1 - i] = static_cast<char>((index >> (8 * i)) & 0xFF);
  return key;
}

uint64_t DecodeKey(const void* data) {
  uint64_t v = 0;
  for (size_t i = 0; i < format::kKeyBytes; ++i) v = (v << 8) | static_cast<const uint8_t*>(data)[i];
  return v;
}

std::string ShardRelPath(const std::string& split, int shard) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard-%0*d.mdb", format::kShardDigits, shard);
  return split + "/" + name;
}

namespace {

// Drops what this process has mapped of the map [map, map + bytes). The page
// cache keeps the pages; a read-only file mapping loses nothing. Cheap where
// little is mapped: the kernel skips empty page tables.
void ReleaseMap(uintptr_t map, size_t bytes) { ::madvise(reinterpret_cast<void*>(map), bytes, MADV_DONTNEED); }

}  // namespace

Status WalkShard(MDB_env* env, const std::string& path, uint64_t file_bytes,
                 const std::function<Status(uint64_t, std::string_view, uint64_t)>& visit) {
  lmdb::Txn txn;
  GRANARY_RETURN_IF_ERROR(txn.Begin(env, MDB_RDONLY, path));
  MDB_dbi dbi;
  int rc = mdb_dbi_open(txn.get(), nullptr, 0, &dbi);
  if (rc != 0) return lmdb::Error(path, "open database", rc);
  lmdb::Cursor cursor;
  GRANARY_RETURN_IF_ERROR(cursor.Open(txn.get(), dbi, path));
  MDB_envinfo info;
  mdb_env_info(env, &info);
  MDB_stat stat;
  mdb_env_stat(env, &stat);
  const uintptr_t page_bytes = stat.ms_psize;
  uintptr_t map = 0;   // where LMDB mapped the file, from the first leaf page
  uintptr_t leaf = 0;  // the leaf page holding the current key
  MDB_val k, v;
  for (rc = mdb_cursor_get(cursor.get(), &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cursor.get(), &k, &v, MDB_NEXT)) {
    if (k.mv_size != format::kKeyBytes) {
      return Status::Corruption(path + ": a key of " + std::to_string(k.mv_size) + " bytes");
    }
    const uintptr_t page = reinterpret_cast<uintptr_t>(k.mv_data) & ~(page_bytes - 1);
    if (map == 0) {
      // LMDB does not say where it mapped the file, but each page of the
      // file starts with its page number (a size_t: LMDB's MDB_page header),
      // and the map starts at offset 0: map = page - number * page size.
      // Finding the page by alignment needs the map aligned to LMDB's page
      // size: true when the db's pages are no larger than this OS's (mmap
      // aligns to those). The result is checked too: page 0 is a meta page,
      // whose MDB_meta (after the page header) starts with LMDB's
      // magic number.
      static const uintptr_t os_page_bytes = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
      if (page_bytes > os_page_bytes) {
        return Status::FailedPrecondition(path + ": LMDB pages of " + std::to_string(page_bytes) +
                                          " bytes, larger than this system's " + std::to_string(os_page_bytes));
      }
      size_t number;
      std::memcpy(&number, reinterpret_cast<const void*>(page), sizeof(number));
      if (number > file_bytes / page_bytes) return Status::Corruption(path + ": a leaf page with a bad page number");
      map = page - number * page_bytes;
      constexpr uint32_t kLmdbMagic = 0xBEEFC0DE;
      uint32_t magic;
      std::memcpy(&magic, reinterpret_cast<const void*>(map + kLmdbPageHeaderBytes), sizeof(magic));
      if (magic != kLmdbMagic) {
        return Status::Corruption(path + ": page 0 is not an LMDB meta page where the leaf pages place it");
      }
    } else if (page != leaf) {
      ReleaseMap(map, info.me_mapsize);  // the last leaf, its values and the branch pages above it
    }
    leaf = page;
    const uint64_t key = DecodeKey(k.mv_data);
    const uintptr_t value = reinterpret_cast<uintptr_t>(v.mv_data);
    if (value < map || value - map > file_bytes || v.mv_size > file_bytes - (value - map)) {
      return Status::Corruption(path + ", key " + std::to_string(key) + ": the value lies outside the file");
    }
    GRANARY_RETURN_IF_ERROR(visit(key, std::string_view(static_cast<const char*>(v.mv_data), v.mv_size), value - map));
  }
  if (map != 0) ReleaseMap(map, info.me_mapsize);
  if (rc != MDB_NOTFOUND) return lmdb::Error(path, "walk the B-tree", rc);
  return Status::OK();
}

Status WalkShard(const std::string& file, const std::string& name, uint64_t bytes, RecordDecoder& decoder,
                 DecodedRecord* record, const std::function<void(uint64_t, const Status&)>& on_record) {
  lmdb::Env env;
  GRANARY_RETURN_IF_ERROR(env.Open(file, MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD, static_cast<size_t>(bytes)));
  return WalkShard(env.get(), name, bytes, [&](uint64_t key, std::string_view value, uint64_t) {
    Status decoded = decoder.Decode(value, record);
    on_record(key, decoded.WithContext(name + ", key " + std::to_string(key)));
    return Status::OK();
  });
}

Status BuildShardIndex(MDB_env* env, const std::string& path, uint64_t file_bytes, ShardIndex* index) {
  return WalkShard(env, path, file_bytes, [&](uint64_t key, std::string_view value, uint64_t offset) {
    if (!index->first.empty() && key <= index->first.back()) {
      return Status::Corruption(path + ", key " + std::to_string(key) + ": keys out of order");
    }
    if (value.size() > UINT32_MAX) {
      return Status::Corruption(path + ", key " + std::to_string(key) + ": a value of " +
                                std::to_string(value.size()) + " bytes");
    }
    index->first.push_back(key);
    index->offset.push_back(offset);
    index->bytes.push_back(static_cast<uint32_t>(value.size()));
    index->max_bytes = std::max(index->max_bytes, index->bytes.back());
    return Status::OK();
  });
}


}  // namespace granary
