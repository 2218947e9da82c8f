#include "base/status.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace granary {

Status Status::IOError(const std::string& path, const std::string& what, int err) {
  std::string msg = path + ": " + what + " failed";
  if (err != 0) msg += std::string(": ") + std::strerror(err) + " (errno " + std::to_string(err) + ")";
  return Status(Code::kIOError, std::move(msg));
}

std::string Status::ToString() const {
  switch (code_) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument: " + message_;
    case Code::kNotFound: return "NotFound: " + message_;
    case Code::kCorruption: return "Corruption: " + message_;
    case Code::kIOError: return "IOError: " + message_;
    case Code::kFailedPrecondition: return "FailedPrecondition: " + message_;
    case Code::kBusy: return "Busy: " + message_;
  }
  return "Unknown: " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

Status Status::WithNote(const std::string& note) const {
  if (ok()) return *this;
  return Status(code_, message_ + note);
}

void AbortOnValueOfError(const Status& status) {
  std::fprintf(stderr, "granary: the value of a StatusOr that holds %s was read (a bug: it was not checked)\n",
               status.ok() ? "no value (made from an OK Status)" : status.ToString().c_str());
  std::abort();
}

}  // namespace granary
