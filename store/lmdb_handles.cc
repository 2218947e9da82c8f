#include "store/lmdb_handles.h"

namespace granary::lmdb {

Status Error(const std::string& path, const std::string& what, int rc) {
  std::string msg = path + ": " + what + ": " + mdb_strerror(rc);
  if (rc == MDB_INVALID || rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_VERSION_MISMATCH ||
      rc == MDB_BAD_TXN) {
    return Status::Corruption(msg);
  }
  if (rc == MDB_MAP_FULL) return Status::FailedPrecondition(msg + " (raise the map size)");
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
