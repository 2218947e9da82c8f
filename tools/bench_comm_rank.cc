// One rank of tools/bench_comm: in-place all-reduces (sum) of float32
// tensors of the sizes asked for, through granary's Comm over --backend gloo
// (a FileStore rendezvous at --store, rank and world from the flags) or mpi
// (the rank and world of the mpirun job). After --warmup all-reduces, times
// --iters of them one by one: wall seconds, and CPU seconds of the whole
// process (every thread: Gloo's workers, the MPI thread). Rank 0 prints one
// JSON line per size with the medians.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "trainer/clock.h"
#include "trainer/comm/comm.h"
#include "trainer/launch/job_place.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("one rank of tools/bench_comm");
  granary::CommOptions o;
  std::vector<double> sizes_mib = {1, 4, 12.5, 50};
  int warmup = 5, iters = 30;
  std::string backend;
  app.add_option("--backend", backend)->required();
  app.add_option("--rank", o.rank);
  app.add_option("--world", o.world);
  app.add_option("--store", o.store_file, "gloo: the FileStore's path");
  app.add_option("--mib", sizes_mib);
  app.add_option("--warmup", warmup);
  app.add_option("--iters", iters);
  CLI11_PARSE(app, argc, argv);
  if (!granary::ParseChoice(backend, &o.backend) || o.backend == granary::Backend::kAuto) {
    std::fprintf(stderr, "bench_comm_rank: --backend %s: expected gloo or mpi\n", backend.c_str());
    return 2;
  }
  const granary::Environment env = granary::Environment::OfProcess();
  o.mpi_job = granary::StartedByMpiLauncher(env);
  if (o.backend == granary::Backend::kMpi && env.Has("OMPI_COMM_WORLD_SIZE")) {  // the mpirun job's shape
    o.rank = env.Number("OMPI_COMM_WORLD_RANK");
    o.world = env.Number("OMPI_COMM_WORLD_SIZE");
  }
  torch::set_num_threads(1);
  granary::StatusOr<std::unique_ptr<granary::Comm>> comm = granary::Comm::Create(o);
  if (!comm.ok()) {
    std::fprintf(stderr, "bench_comm_rank: %s\n", comm.status().message().c_str());
    return 1;
  }
  for (double mib : sizes_mib) {
    torch::Tensor t = torch::ones({static_cast<int64_t>(mib * (1 << 20) / 4)}, torch::kFloat32);
    std::vector<double> wall, cpu;
    for (int i = 0; i < warmup + iters; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = granary::ProcessCpuSeconds();
      if (granary::Status s = comm.value()->AllReduceSum(t); !s.ok()) {
        std::fprintf(stderr, "bench_comm_rank: %s\n", s.message().c_str());
        return 1;
      }
      if (i < warmup) continue;
      wall.push_back(granary::SecondsSince(start));
      cpu.push_back(granary::ProcessCpuSeconds() - cpu_start);
    }
    // Rank 0 reports its own; the other ranks' figures are alike (symmetric algorithms).
    if (o.rank == 0) {
      std::printf("{\"backend\": \"%s\", \"mib\": %g, \"wall_ms\": %.3f, \"cpu_ms\": %.3f, \"iters\": %d}\n",
                  backend.c_str(), mib, 1e3 * Median(wall), 1e3 * Median(cpu), iters);
      std::fflush(stdout);
    }
  }
  return 0;
}
