// All-reduce bus bandwidth on this machine: octet's deterministic all-reduce (core/distributed.h:
// MPI_Ialltoall + an ordered sum + MPI_Iallgather) beside Open MPI's own MPI_Allreduce on the same
// f32 buffers, alternating rounds, for messages of 4 KiB to 256 MiB. Bus bandwidth is NCCL's
// measure: 2 (N-1)/N x bytes / time, the bytes each rank moves in a ring all-reduce.
//   mpirun --oversubscribe -np 2 ./build/tools/bench/octet_bench_allreduce [--max-mib 256]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/octet.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
  using namespace octet;
  double max_mib = 256;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--max-mib") max_mib = std::atof(argv[i + 1]);
  dist::ProcessGroup& pg = dist::ProcessGroup::world();  // starts MPI
  const int n = pg.size(), me = pg.rank();
  if (me == 0) {
    std::printf("ranks %d; bus bandwidth GB/s = 2(N-1)/N x bytes / time (best of the rounds)\n\n", n);
    std::printf("| message | octet all_reduce | MPI_Allreduce | octet / MPI |\n|---|---|---|---|\n");
  }
  for (double bytes = 4096; bytes <= max_mib * 1048576.0; bytes *= 4) {
    const auto count = static_cast<int64_t>(bytes / 4);
    Tensor x = full({count}, 1.0 + me);
    std::vector<float> y(static_cast<size_t>(count), 1.0f), z(y.size());
    // Rounds: enough to last ~0.2 s per kind, at least 3; octet and MPI alternate.
    const int rounds = static_cast<int>(std::clamp(2e8 / std::max(bytes, 1.0) / 20, 3.0, 200.0));
    double best_octet = 1e30, best_mpi = 1e30;
    for (int r = 0; r < rounds; ++r) {
      pg.barrier();
      double t0 = now();
      pg.all_reduce(x, dist::ReduceOp::sum);
      best_octet = std::min(best_octet, now() - t0);
      pg.barrier();
      t0 = now();
      MPI_Allreduce(y.data(), z.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      best_mpi = std::min(best_mpi, now() - t0);
    }
    // The slowest rank's best time sets the pace.
    double t[2] = {best_octet, best_mpi}, worst[2];
    MPI_Allreduce(t, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double factor = 2.0 * (n - 1) / n * bytes / 1e9;
    if (me == 0) {
      char size[32];
      if (bytes < 1048576)
        std::snprintf(size, sizeof size, "%.0f KiB", bytes / 1024);
      else
        std::snprintf(size, sizeof size, "%.0f MiB", bytes / 1048576);
      std::printf("| %s | %.2f | %.2f | %.2f |\n", size, factor / worst[0], factor / worst[1], worst[1] / worst[0]);
    }
  }
  return 0;
}
