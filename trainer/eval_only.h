// train --eval-only: a saved TorchScript classifier (fp32, or INT8 from
// --quantize int8) evaluated on a db's eval split in this one process, at
// --threads (0: every usable core): accuracy, mean loss and inference
// samples/s, as text or (json) one JSON object. The model is checked against
// the db's input and classes before anything is read. Errors are printed as
// one line; returns the exit status.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace granary {

// The flags --eval-only reads (besides --eval-only itself and --json); any
// other flag on its command line is refused, named, before work starts.
const std::vector<std::string>& EvalOnlyFlags();

// `given`: the flags on the command line, as "--name".
int RunEvalOnly(TrainConfig config, bool json, const std::vector<std::string>& given);

}  // namespace granary
