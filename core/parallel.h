// One thread count for every heavy kernel (OpenMP underneath, shared with oneDNN).
//   set_num_threads(2);
//   parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) { for (...) ...; });
#pragma once

#include <cstdint>
#include <functional>

namespace octet {

void set_num_threads(int n);  // n >= 1; also caps oneDNN
int get_num_threads();
// The cores this process may run on (its CPU affinity mask, as taskset or a cgroup's cpuset set it).
int usable_cores();

// Splits [begin, end) into contiguous chunks of at least `grain` elements, one chunk per thread;
// runs serially when the range is small or already inside a parallel region. `fn` must not throw.
void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace octet
