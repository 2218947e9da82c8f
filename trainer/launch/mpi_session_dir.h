// A folder for one MPI job's shared-memory segments and session files
// (OpenMPI's btl_vader_backing_directory and orte_tmpdir_base), owned by the
// launcher that starts mpirun. Used from the launcher's thread only.
#pragma once

#include <string>

#include "base/environment.h"
#include "base/status.h"

namespace granary {

// Whether OpenMPI's shared memory for `local_ranks` ranks on this machine
// fits the file system of `dir` (where btl_vader_backing_directory puts it):
// a segment of btl_vader_segment_size a rank (4 MiB unless `env`'s
// OMPI_MCA_btl_vader_segment_size says otherwise) and the session's files.
// A segment that does not fit kills its rank with SIGBUS inside MPI_Init,
// and OpenMPI says only `An error occurred in MPI_Init_thread`. A
// container's /dev/shm is 64 MiB unless `docker run --shm-size` says more.
Status CheckMpiSharedMemory(const std::string& dir, int local_ranks, const Environment& env);

// A folder for one MPI job's shared-memory segments and session files,
// /dev/shm/granary-mpi.PID (PID: the launcher's), removed with what OpenMPI
// left in it once mpirun has ended, however it ended. Folders of launchers
// that were killed outright are removed by the next launch. Only folders of
// this name, whose launcher is gone, are ever removed.
class MpiSessionDir {
 public:
  MpiSessionDir() = default;
  MpiSessionDir(const MpiSessionDir&) = delete;
  MpiSessionDir& operator=(const MpiSessionDir&) = delete;
  ~MpiSessionDir();  // removes the folder and what OpenMPI left in it

  // Sweeps dead launchers' folders, then makes this one's; path() stays ""
  // if it cannot be made (OpenMPI's defaults are used then). Fails where the
  // shared memory of `ranks` ranks would not fit (CheckMpiSharedMemory).
  Status Create(int ranks, const Environment& env);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace granary
