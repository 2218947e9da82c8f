// Two ranks of a collective, as two threads of one test process.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "trainer/comm/comm.h"

namespace granary {

// Runs `body(comm)` on two ranks (threads of this process) joined over Gloo,
// meeting through a TCPStore on a free port, or through a FileStore at
// `store_file` if given.
template <typename F>
void OnTwoRanks(F body, const std::string& store_file = "") {
  const int port = testing::FreePort();
  ASSERT_NE(port, 0) << "no free port";
  std::vector<std::thread> ranks;
  std::vector<Status> results(2);
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      CommOptions o;
      o.rank = r;
      o.world = 2;
      o.port = port;
      o.store_file = store_file;
      o.timeout_s = 30;
      auto comm = Comm::Create(o);
      if (!comm.ok()) {
        results[r] = comm.status();
        return;
      }
      results[r] = body(*comm.value());
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].ToString();
}

}  // namespace granary
