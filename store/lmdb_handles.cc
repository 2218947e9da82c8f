#include "store/lmdb_handles.h"

#include <cerrno>
#include <cstdint>

#include "base/file.h"

namespace granary::lmdb {

// Free space below which an EIO from a write is taken for a full disk: LMDB
// writes whole pages, so a full disk leaves less than a few pages free.
constexpr int64_t kFullDiskBytes = int64_t{1} << 20;

Status Error(const std::string& path, const std::string& what, int rc) {
  // LMDB reports a write cut short by a full disk as EIO (a short pwrite),
  // not ENOSPC: the free space tells the two apart.
  if (rc == ENOSPC || rc == EDQUOT || rc == EIO) {
    const int64_t free_bytes = FreeDiskBytes(path);
    if (rc != EIO || (free_bytes >= 0 && free_bytes < kFullDiskBytes)) return Status::IOError(path, what, ENOSPC);
  }
  std::string msg = path + ": " + what + ": " + mdb_strerror(rc);
  if (rc == MDB_INVALID || rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_VERSION_MISMATCH ||
      rc == MDB_BAD_TXN) {
    return Status::Corruption(msg);
  }
  if (rc == MDB_MAP_FULL) return Status::FailedPrecondition(msg + " (the shard outgrew its map: use more shards)");
  if (rc == MDB_NOTFOUND) return Status::NotFound(msg);
  return Status::IOError(path, what + " (" + mdb_strerror(rc) + ")", 0);
}

Status Env::Open(const std::string& path, unsigned flags, size_t map_bytes) {
  Close();
  int rc = mdb_env_create(&env_);
  if (rc != 0) return Error(path, "mdb_env_create", rc);
  if (map_bytes > 0) {
    rc = mdb_env_set_mapsize(env_, map_bytes);
    if (rc != 0) return Error(path, "mdb_env_set_mapsize", rc);
  }
  rc = mdb_env_open(env_, path.c_str(), flags | MDB_NOSUBDIR | MDB_NOLOCK, 0644);
  if (rc != 0) {
    Close();
    return Error(path, "open LMDB environment", rc);
  }
  return Status::OK();
}

Status Txn::Begin(MDB_env* env, unsigned flags, const std::string& path) {
  Abort();
  int rc = mdb_txn_begin(env, nullptr, flags, &txn_);
  if (rc != 0) {
    txn_ = nullptr;
    return Error(path, "begin transaction", rc);
  }
  return Status::OK();
}

Status Txn::Commit(const std::string& path) {
  MDB_txn* txn = txn_;
  txn_ = nullptr;
  int rc = mdb_txn_commit(txn);
  if (rc != 0) return Error(path, "commit", rc);
  return Status::OK();
}

Status Cursor::Open(MDB_txn* txn, MDB_dbi dbi, const std::string& path) {
  Close();
  int rc = mdb_cursor_open(txn, dbi, &cursor_);
  if (rc != 0) {
    cursor_ = nullptr;
    return Error(path, "open cursor", rc);
  }
  return Status::OK();
}

}  // namespace granary::lmdb
