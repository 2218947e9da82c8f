// The names each of the run's choices knows, declared without LibTorch's
// headers so that checking a config (config.cc) and listing the choices in
// --help (train_main.cc) parse none of them. The open ones (a table a new
// entry may join) are defined beside their table: models/registry.cc,
// optim/optimizer.cc, optim/schedule.cc; the closed sets below are enums
// (choices.cc).
#pragma once

#include <string>

namespace granary {

// --model
bool IsKnownModel(const std::string& name);
// True for the names --model takes as a TorchScript file (models/script.h):
// ending ".pt" or ".pth".
bool IsModelFile(const std::string& name);
std::string KnownModelNames();  // "mlp, convnet, resnet, mobilenet"
// ModelSpec::width's bounds (--width): beyond them a width is a typo.
inline constexpr double kMinModelWidth = 0.0625, kMaxModelWidth = 16;

// --optimizer, and what it uses when --lr and --weight-decay are not given
struct OptimizerDefaults {
  double lr;
  double weight_decay;
};
bool IsKnownOptimizer(const std::string& name);
std::string KnownOptimizerNames();  // "sgd, adam, adamw"
// Precondition: IsKnownOptimizer(name).
OptimizerDefaults DefaultsOf(const std::string& name);

// --schedule
bool IsKnownSchedule(const std::string& name);
std::string KnownScheduleNames();  // "constant, step, cosine"

// The choices of a closed set, as enums: parsed once from their names (the
// flags, a config's JSON), named back for --help, JSON and messages, and
// compared as values everywhere else.
enum class ComputeType { kFp32, kBf16 };                       // --precision
enum class LrScaling { kNone, kLinear };                       // --lr-scaling
enum class SyncMethod { kBucketed, kAfterBackward };           // --sync (trainer/comm/gradient_sync.h)
enum class Compression { kNone, kFp16, kBf16, kPowerSgd };     // --sync-compress (trainer/comm/compress.h)
enum class Backend { kAuto, kGloo, kMpi };                     // --backend (trainer/comm/comm.h)
enum class Quantize { kNone, kInt8 };                          // --quantize
enum class Allocator { kAuto, kGlibc, kJemalloc, kTcmalloc };  // launch --allocator
enum class RankPrefix { kAuto, kAll, kNone };                  // launch --prefix

const char* NameOf(ComputeType c);  // "fp32", "bf16"
const char* NameOf(LrScaling c);
const char* NameOf(SyncMethod c);   // "bucketed", "after-backward"
const char* NameOf(Compression c);  // "none", "fp16", "bf16", "powersgd"
const char* NameOf(Backend c);
const char* NameOf(Quantize c);
const char* NameOf(Allocator c);
const char* NameOf(RankPrefix c);

// `text` as one of E's names into *out; false (and *out untouched) if it is
// none of them.
bool ParseChoice(const std::string& text, ComputeType* out);
bool ParseChoice(const std::string& text, LrScaling* out);
bool ParseChoice(const std::string& text, SyncMethod* out);
bool ParseChoice(const std::string& text, Compression* out);
bool ParseChoice(const std::string& text, Backend* out);
bool ParseChoice(const std::string& text, Quantize* out);
bool ParseChoice(const std::string& text, Allocator* out);
bool ParseChoice(const std::string& text, RankPrefix* out);

// E's names in order, "a, b or c", for --help and messages; E is told by the
// argument's type (its value unused).
std::string ChoiceNames(ComputeType);
std::string ChoiceNames(LrScaling);
std::string ChoiceNames(SyncMethod);
std::string ChoiceNames(Compression);
std::string ChoiceNames(Backend);
std::string ChoiceNames(Quantize);
std::string ChoiceNames(Allocator);
std::string ChoiceNames(RankPrefix);

}  // namespace granary
