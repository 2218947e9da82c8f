// libFuzzer target: ParseManifest on arbitrary bytes must return a status,
// never crash or throw (run under ASan/UBSan by tools/fuzz).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "store/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = granary::ParseManifest(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (m.ok()) (void)granary::ManifestToJson(m.value());
  return 0;
}
