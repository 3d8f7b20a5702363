#include "parallel/communicator.hpp"

#include <chrono>
#include <cstdlib>
#include <string>

#include "core/common.hpp"
#include "parallel/mpi_communicator.hpp"
#include "parallel/nccl_communicator.hpp"

namespace crema {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool BuiltWithMpi() {
#ifdef CREMA_USE_MPI
  return true;
#else
  return false;
#endif
}

bool BuiltWithNccl() {
#ifdef CREMA_USE_NCCL
  return true;
#else
  return false;
#endif
}

namespace {

// The number of processes an MPI launcher started, from what it sets in each one's environment (Open MPI's
// OMPI_COMM_WORLD_SIZE; PMI_SIZE for MPICH's Hydra and Slurm); 1 when there is none.
int LaunchedProcesses(std::string* variable) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    *variable = name;
    char* end = nullptr;
    const long count = std::strtol(value, &end, 10);
    return end != value && *end == '\0' && count > 0 ? static_cast<int>(count) : 1;
  }
  return 1;
}

}  // namespace

std::unique_ptr<Communicator> ProcessGroupFromEnvironment() {
  std::string variable;
  const int processes = LaunchedProcesses(&variable);
  if (processes <= 1) return nullptr;
#ifdef CREMA_USE_MPI
  return std::make_unique<MpiCommunicator>();
#else
  CREMA_FAIL() << "this process is one of " << processes << " started by an MPI launcher (" << variable
               << " is set), but this crema was built without MPI (USE_MPI=0, or no MPI was found when it was "
               << "configured): each process would train alone and overwrite the others' snapshots. Build with "
               << "USE_MPI=1 (Debian: libopenmpi-dev), or run crema without mpirun";
  return nullptr;
#endif
}

std::unique_ptr<Communicator> OverNccl(std::unique_ptr<Communicator> host, int device) {
#ifdef CREMA_USE_NCCL
  return std::make_unique<NcclCommunicator>(std::move(host), device);
#else
  CREMA_FAIL() << "data parallelism on GPUs sums the gradients with NCCL, and this crema was built without it "
               << "(CPU_ONLY=1, USE_NCCL=0, or no NCCL was found when it was configured)";
  return nullptr;
#endif
}

}  // namespace crema
