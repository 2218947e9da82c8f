// Status and StatusOr: how granary's libraries (store, preprocess, loader,
// trainer) and the Python module report errors.
// Values are immutable once made and safe to copy between threads.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace granary {

// A result code plus a message that names the file, key or flag involved and
// the check that failed, e.g. "train/shard-00000.mdb, key 1234: checksum mismatch".
class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,     // a caller's option or a user's flag is wrong
    kNotFound,            // a file, split, field or key does not exist
    kCorruption,          // bytes on disk fail a check
    kIOError,             // the OS said no; the message carries path and errno
    kFailedPrecondition,  // the operation is not possible in this state
    kBusy,                // another process holds what this needs (a build's lock)
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status FailedPrecondition(std::string msg) {
    return Status(Code::kFailedPrecondition, std::move(msg));
  }
  static Status Busy(std::string msg) { return Status(Code::kBusy, std::move(msg)); }
  // `what` says what was attempted ("open", "rename to db/"), `err` is errno.
  static Status IOError(const std::string& path, const std::string& what, int err);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Corruption: <message>", or "OK".
  std::string ToString() const;
  // Returns a copy whose message starts with `context + ": "`.
  Status WithContext(const std::string& context) const;
  // Returns a copy whose message ends with `note` (what to do about it).
  Status WithNote(const std::string& note) const;

  // Marks a deliberately ignored status; greppable.
  void PermitUncheckedError() const {}

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// StatusOr::value() of an error: prints the status (or that an OK status
// was given without a value) to stderr and aborts.
[[noreturn]] void AbortOnValueOfError(const Status& status);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // Precondition: ok(). Reading the value of an error is a bug in the
  // caller: it aborts, printing the error, in every build (not undefined
  // behaviour, not a value-initialised T).
  T& value() & { return Checked(), *value_; }
  const T& value() const& { return Checked(), *value_; }
  T&& value() && { return Checked(), std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void Checked() const {
    if (!value_.has_value()) AbortOnValueOfError(status_);
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace granary

// Returns early from the enclosing function if `expr` is not OK.
#define GRANARY_RETURN_IF_ERROR(expr)             \
  do {                                            \
    ::granary::Status granary_status_ = (expr);   \
    if (!granary_status_.ok()) return granary_status_; \
  } while (0)

// `lhs = value of expr` (a StatusOr), or returns early from the enclosing
// function with its error. `lhs` may declare: GRANARY_ASSIGN_OR_RETURN(auto
// db, DbReader::Open(path)); each use takes a line of its own.
#define GRANARY_ASSIGN_OR_RETURN(lhs, expr) \
  GRANARY_ASSIGN_OR_RETURN_IMPL_(GRANARY_STATUS_CONCAT_(granary_statusor_, __LINE__), lhs, expr)
#define GRANARY_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return statusor.status();             \
  lhs = std::move(statusor).value()
#define GRANARY_STATUS_CONCAT_(a, b) GRANARY_STATUS_CONCAT_INNER_(a, b)
#define GRANARY_STATUS_CONCAT_INNER_(a, b) a##b
