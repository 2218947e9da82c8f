#include "trainer/config/choices.h"

#include <cstddef>

namespace granary {
namespace {

template <typename E>
struct Named {
  E value;
  const char* name;
};

constexpr Named<ComputeType> kComputeTypes[] = {{ComputeType::kFp32, "fp32"}, {ComputeType::kBf16, "bf16"}};
constexpr Named<LrScaling> kLrScalings[] = {{LrScaling::kNone, "none"}, {LrScaling::kLinear, "linear"}};
constexpr Named<SyncMethod> kSyncMethods[] = {{SyncMethod::kBucketed, "bucketed"},
                                              {SyncMethod::kAfterBackward, "after-backward"}};
constexpr Named<Compression> kCompressions[] = {{Compression::kNone, "none"},
                                                {Compression::kFp16, "fp16"},
                                                {Compression::kBf16, "bf16"},
                                                {Compression::kPowerSgd, "powersgd"}};
constexpr Named<Backend> kBackends[] = {{Backend::kAuto, "auto"}, {Backend::kGloo, "gloo"}, {Backend::kMpi, "mpi"}};
constexpr Named<Quantize> kQuantizes[] = {{Quantize::kNone, "none"}, {Quantize::kInt8, "int8"}};
constexpr Named<Allocator> kAllocators[] = {{Allocator::kAuto, "auto"},
                                            {Allocator::kGlibc, "glibc"},
                                            {Allocator::kJemalloc, "jemalloc"},
                                            {Allocator::kTcmalloc, "tcmalloc"}};
constexpr Named<RankPrefix> kRankPrefixes[] = {
    {RankPrefix::kAuto, "auto"}, {RankPrefix::kAll, "all"}, {RankPrefix::kNone, "none"}};

template <typename E, size_t N>
const char* Name(const Named<E> (&table)[N], E value) {
  for (const Named<E>& n : table) {
    if (n.value == value) return n.name;
  }
  return "?";  // not reached: every value is in its table
}

template <typename E, size_t N>
bool Parse(const Named<E> (&table)[N], const std::string& text, E* out) {
  for (const Named<E>& n : table) {
    if (text == n.name) {
      *out = n.value;
      return true;
    }
  }
  return false;
}

template <typename E, size_t N>
std::string Names(const Named<E> (&table)[N]) {
  std::string names;
  for (size_t i = 0; i < N; ++i) names += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].name);
  return names;
}

}  // namespace

const char* NameOf(ComputeType c) { return Name(kComputeTypes, c); }
const char* NameOf(LrScaling c) { return Name(kLrScalings, c); }
const char* NameOf(SyncMethod c) { return Name(kSyncMethods, c); }
const char* NameOf(Compression c) { return Name(kCompressions, c); }
const char* NameOf(Backend c) { return Name(kBackends, c); }
const char* NameOf(Quantize c) { return Name(kQuantizes, c); }
const char* NameOf(Allocator c) { return Name(kAllocators, c); }
const char* NameOf(RankPrefix c) { return Name(kRankPrefixes, c); }

bool ParseChoice(const std::string& text, ComputeType* out) { return Parse(kComputeTypes, text, out); }
bool ParseChoice(const std::string& text, LrScaling* out) { return Parse(kLrScalings, text, out); }
bool ParseChoice(const std::string& text, SyncMethod* out) { return Parse(kSyncMethods, text, out); }
bool ParseChoice(const std::string& text, Compression* out) { return Parse(kCompressions, text, out); }
bool ParseChoice(const std::string& text, Backend* out) { return Parse(kBackends, text, out); }
bool ParseChoice(const std::string& text, Quantize* out) { return Parse(kQuantizes, text, out); }
bool ParseChoice(const std::string& text, Allocator* out) { return Parse(kAllocators, text, out); }
bool ParseChoice(const std::string& text, RankPrefix* out) { return Parse(kRankPrefixes, text, out); }

std::string ChoiceNames(ComputeType) { return Names(kComputeTypes); }
std::string ChoiceNames(LrScaling) { return Names(kLrScalings); }
std::string ChoiceNames(SyncMethod) { return Names(kSyncMethods); }
std::string ChoiceNames(Compression) { return Names(kCompressions); }
std::string ChoiceNames(Backend) { return Names(kBackends); }
std::string ChoiceNames(Quantize) { return Names(kQuantizes); }
std::string ChoiceNames(Allocator) { return Names(kAllocators); }
std::string ChoiceNames(RankPrefix) { return Names(kRankPrefixes); }

}  // namespace granary
