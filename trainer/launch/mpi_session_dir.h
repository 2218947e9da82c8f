// A folder for one MPI job's shared-memory segments and session files
// (OpenMPI's btl_vader_backing_directory and orte_tmpdir_base), owned by the
// launcher that starts mpirun. Used from the launcher's thread only.
#pragma once

#include <string>

namespace granary {

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
  // if it cannot be made (OpenMPI's defaults are used then).
  void Create();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace granary
