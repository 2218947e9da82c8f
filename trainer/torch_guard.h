// Where trainer calls into LibTorch and Gloo, their exceptions become Status.
#pragma once

#include <exception>
#include <string>

#include "store/status.h"

namespace granary {

// Runs f(); an exception becomes FailedPrecondition("<what>: <first line of its message>").
template <typename F>
Status CatchTorch(const char* what, F&& f) {
  try {
    f();
    return Status::OK();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    return Status::FailedPrecondition(std::string(what) + ": " + msg);
  }
}

}  // namespace granary
