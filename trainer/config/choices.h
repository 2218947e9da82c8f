// The names each of the run's choices knows, declared without LibTorch's
// headers so that checking a config (config.cc) and listing the choices in
// --help (train_main.cc) parse none of them. Each is defined beside its
// table: models/registry.cc, optim/optimizer.cc, optim/schedule.cc,
// comm/gradient_sync.cc, comm/compress.cc.
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

// --sync and --sync-compress
bool IsKnownGradientSync(const std::string& method);
std::string KnownGradientSyncNames();  // "bucketed, after-backward"
bool IsKnownCompression(const std::string& method);
std::string KnownCompressionNames();  // "none, fp16, bf16, powersgd"

}  // namespace granary
