// The MPI backend lives in a plugin, libgranary_mpi.so (mpi_comm.cc), opened
// the first time MPI is asked for, so train starts, and trains over Gloo, on
// a machine without OpenMPI's libraries; --backend mpi there is one line
// saying what is missing. The plugin leaves granary's own symbols to the
// executable (which exports them: -rdynamic), so there is one copy of each
// (the heartbeat's slot, the status types).
#include <dlfcn.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "trainer/comm/comm_backend.h"

namespace granary {
namespace {

constexpr const char* kMpiPluginName = "libgranary_mpi.so";

// What the plugin exports: the backend, or why not, into *out.
using CreateMpiBackendFn = void (*)(const CommOptions* options, StatusOr<std::unique_ptr<CommBackend>>* out);

struct MpiPlugin {
  CreateMpiBackendFn create = nullptr;
  std::string error;  // why it did not load
};

// The plugin beside the executable (a build's trainer/), else where the
// build put it (for the tests' executables); opened once.
const MpiPlugin& LoadMpiPlugin() {
  static const MpiPlugin plugin = [] {
    MpiPlugin p;
    std::vector<std::string> paths;
    char exe[4096];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
      const std::string self(exe, static_cast<size_t>(n));
      paths.push_back(self.substr(0, self.rfind('/') + 1) + kMpiPluginName);
    }
    paths.push_back(GRANARY_MPI_PLUGIN);
    for (const std::string& path : paths) {
      if (::access(path.c_str(), F_OK) != 0) continue;
      // Global: OpenMPI's own components, opened by libmpi, look up its symbols.
      void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (handle == nullptr) {
        const char* why = ::dlerror();
        p.error = why != nullptr ? why : path + ": cannot be opened";
        return p;
      }
      p.create = reinterpret_cast<CreateMpiBackendFn>(::dlsym(handle, "granary_create_mpi_backend"));
      if (p.create == nullptr) p.error = path + ": not train's MPI plugin (no granary_create_mpi_backend)";
      return p;
    }
    p.error = std::string("no ") + kMpiPluginName + " beside " + (paths.size() > 1 ? paths[0] : "train") +
              " or at " + GRANARY_MPI_PLUGIN;
    return p;
  }();
  return plugin;
}

}  // namespace

bool CommHasMpi() { return LoadMpiPlugin().create != nullptr; }

std::string CommMpiUnavailable() {
  return "--backend mpi needs OpenMPI's libraries (Debian: libopenmpi3) and train's MPI plugin: " +
         LoadMpiPlugin().error;
}

std::string MpirunPath() { return GRANARY_MPIRUN; }

StatusOr<std::unique_ptr<CommBackend>> CreateMpiBackend(const CommOptions& options) {
  const MpiPlugin& plugin = LoadMpiPlugin();
  if (plugin.create == nullptr) return Status::FailedPrecondition(CommMpiUnavailable());
  StatusOr<std::unique_ptr<CommBackend>> backend = Status::FailedPrecondition("the MPI plugin made no backend");
  plugin.create(&options, &backend);
  return backend;
}

}  // namespace granary
