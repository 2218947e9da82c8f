// Where trainer calls into LibTorch and Gloo, their exceptions become Status.
#pragma once

#include <exception>
#include <string>

#include "store/status.h"

namespace granary {

// Runs f(); an exception becomes FailedPrecondition("<what>: <first non-empty line of its message>").
template <typename F>
Status CatchTorch(const char* what, F&& f) {
  try {
    f();
    return Status::OK();
  } catch (const std::exception& e) {
    // The first line that says something (TorchScript's errors start with a newline).
    std::string msg = e.what();
    msg.erase(0, msg.find_first_not_of(" \n"));
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    return Status::FailedPrecondition(std::string(what) + ": " + msg);
  }
}

}  // namespace granary
