#include "store/status.h"

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

}  // namespace granary
