// Where trainer calls into LibTorch and Gloo, their exceptions become Status.
#pragma once

#include <exception>
#include <string>

#include "base/status.h"

namespace granary {

// The line of a LibTorch exception's message that says what went wrong: the
// first that says something (TorchScript's compile errors start with a
// newline; c10::Error's lines after the first are its C++ backtrace), or,
// for an error raised inside a TorchScript model, the model's own, which the
// interpreter puts last, after its traceback.
inline std::string TorchMessage(std::string msg) {
  msg.erase(0, msg.find_first_not_of(" \n"));
  if (msg.rfind("The following operation failed in the TorchScript interpreter", 0) == 0) {
    msg.erase(msg.find_last_not_of(" \n") + 1);
    msg.erase(0, msg.rfind('\n') + 1);
  }
  if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
  return msg;
}

// Runs f(); an exception becomes FailedPrecondition("<what>: <TorchMessage>").
template <typename F>
Status CatchTorch(const char* what, F&& f) {
  try {
    f();
    return Status::OK();
  } catch (const std::exception& e) {
    return Status::FailedPrecondition(std::string(what) + ": " + TorchMessage(e.what()));
  }
}

// Runs f(), which returns a StatusOr; an exception becomes
// FailedPrecondition("<what>: <TorchMessage>") in its place.
template <typename F>
auto CatchTorchOr(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status::FailedPrecondition(std::string(what) + ": " + TorchMessage(e.what()));
  }
}

}  // namespace granary
