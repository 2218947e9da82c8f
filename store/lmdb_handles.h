// RAII owners for LMDB handles; private to store/ (not a public header).
// LMDB's rules: at most one write transaction per environment at a time, used
// by one thread; never use an MDB_env across fork(); keep read transactions
// short when a writer is active (granary's dbs are immutable once published,
// so readers may keep theirs open).
#pragma once

#include <lmdb.h>

#include <string>

#include "base/status.h"

namespace granary::lmdb {

// "<path>: <what>: <mdb_strerror(rc)>" as IOError, or Corruption for the
// codes that mean the file is not a valid LMDB environment.
Status Error(const std::string& path, const std::string& what, int rc);

class Env {
 public:
  Env() = default;
  ~Env() { Close(); }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  Env(Env&& other) noexcept : env_(other.env_) { other.env_ = nullptr; }
  Env& operator=(Env&& other) noexcept {
    if (this != &other) {
      Close();
      env_ = other.env_;
      other.env_ = nullptr;
    }
    return *this;
  }

  // Opens the single-file environment at `path` (MDB_NOSUBDIR | MDB_NOLOCK | flags).
  Status Open(const std::string& path, unsigned flags, size_t map_bytes);
  void Close() {
    if (env_ != nullptr) mdb_env_close(env_);
    env_ = nullptr;
  }
  MDB_env* get() const { return env_; }

 private:
  MDB_env* env_ = nullptr;
};

// A transaction; aborts in the destructor unless Commit() succeeded.
class Txn {
 public:
  Txn() = default;
  ~Txn() { Abort(); }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  Txn(Txn&& other) noexcept : txn_(other.txn_) { other.txn_ = nullptr; }

  Status Begin(MDB_env* env, unsigned flags, const std::string& path);
  // mdb_txn_commit frees the handle whatever it returns, so ownership is
  // given up before the call.
  Status Commit(const std::string& path);
  void Abort() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
    txn_ = nullptr;
  }
  MDB_txn* get() const { return txn_; }

 private:
  MDB_txn* txn_ = nullptr;
};

// A cursor; closed in the destructor, which must run before its transaction
// ends (declare it after the Txn it belongs to).
class Cursor {
 public:
  Cursor() = default;
  ~Cursor() { Close(); }
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;

  Status Open(MDB_txn* txn, MDB_dbi dbi, const std::string& path);
  void Close() {
    if (cursor_ != nullptr) mdb_cursor_close(cursor_);
    cursor_ = nullptr;
  }
  MDB_cursor* get() const { return cursor_; }

 private:
  MDB_cursor* cursor_ = nullptr;
};

}  // namespace granary::lmdb
