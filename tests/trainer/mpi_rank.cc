// One rank of MpiComm's tests (mpi_comm_test.cc), started by mpirun with
// two processes and the path of a file that does not exist yet. Through
// granary's Comm over MPI it:
//  1. all-reduces a float32 and a bfloat16 tensor larger than the backend's
//     slice, and counts the elements that are not the sum over ranks;
//  2. starts an all-reduce on rank 0 and measures rank 0's CPU seconds while
//     its training thread sleeps a second; rank 1 joins the all-reduce only
//     once rank 0 has written the file, after that second.
// Rank 0 prints one JSON object with both.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "trainer/clock.h"
#include "trainer/comm/comm.h"
#include "trainer/launch/job_place.h"

namespace {

void ExitUnlessOk(const granary::Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "mpi_rank: %s\n", s.message().c_str());
  std::exit(1);
}

// Rank r holds (r + 1) * (i % period) at i: small integers, exact in
// bfloat16 too, whose sum over two ranks is 3 * (i % period).
int64_t WrongSums(granary::Comm& comm, torch::ScalarType dtype, int64_t count, int period) {
  const torch::Tensor pattern = torch::arange(count, torch::kInt64).remainder(period);
  torch::Tensor t = (pattern * (comm.rank() + 1)).to(dtype);
  ExitUnlessOk(comm.AllReduceSum(t));
  return t.to(torch::kInt64).ne(pattern * 3).sum().item<int64_t>();
}

}  // namespace

int main(int argc, char** argv) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (rank == nullptr || world == nullptr || argc != 2) {
    std::fprintf(stderr, "mpi_rank: start it with mpirun -np 2 mpi_rank SIGNAL_FILE\n");
    return 2;
  }
  const std::string measured = argv[1];  // rank 0 writes it once it has measured
  granary::CommOptions o;
  o.backend = granary::Backend::kMpi;
  o.rank = std::atoi(rank);
  o.world = std::atoi(world);
  o.timeout_s = 60;
  o.mpi_job = granary::StartedByMpiLauncher(granary::Environment::OfProcess());
  torch::set_num_threads(1);
  granary::StatusOr<std::unique_ptr<granary::Comm>> created = granary::Comm::Create(o);
  ExitUnlessOk(created.status());
  granary::Comm& comm = *created.value();

  // 40 MiB and 24 MiB: three and two slices, the last ones partial.
  const int64_t wrong_float = WrongSums(comm, torch::kFloat, (int64_t{40} << 20) / 4 + 3, 1000);
  const int64_t wrong_bf16 = WrongSums(comm, torch::kBFloat16, (int64_t{24} << 20) / 2 + 5, 64);

  torch::Tensor late = torch::ones({1 << 18});
  double cpu = 0, wall = 0;
  if (o.rank == 0) {
    auto pending = comm.AllReduceSumAsync(late);
    ExitUnlessOk(pending.status());
    const double cpu_start = granary::ProcessCpuSeconds();
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(1));  // as backward would compute
    cpu = granary::ProcessCpuSeconds() - cpu_start;
    wall = granary::SecondsSince(start);
    std::ofstream(measured) << "measured\n";
    ExitUnlessOk(pending.value()->Wait());
  } else {
    while (::access(measured.c_str(), F_OK) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ExitUnlessOk(comm.AllReduceSum(late));
  }
  if (o.rank == 0) {
    std::printf("{\"wrong_float\": %lld, \"wrong_bf16\": %lld, ", static_cast<long long>(wrong_float),
                static_cast<long long>(wrong_bf16));
    std::printf("\"late_peer_cpu_s\": %.4f, \"late_peer_wall_s\": %.4f}\n", cpu, wall);
  }
  return 0;
}
