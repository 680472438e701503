// The quantization maps and their code tables in device memory (quant/cuda/blockwise.h): the very
// tables the CPU kernels use, uploaded once per map and device, never freed (they live as long as
// the process; 17 KB each).
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "core/cuda.h"
#include "core/cuda/cuda_util.h"
#include "core/error.h"
#include "quant/cuda/blockwise.h"

namespace octet::quant::cuda {

const DeviceTables* device_tables(QuantMap map, int device) {
  static std::mutex mu;
  static auto* tables = new std::map<std::pair<int, int>, const DeviceTables*>();  // never destroyed
  const std::pair<int, int> key{device, static_cast<int>(map)};
  std::lock_guard<std::mutex> lock(mu);
  auto it = tables->find(key);
  if (it != tables->end()) return it->second;

  DeviceTables host{};
  const std::array<float, 256>& values = quant_map(map);  // throws for an unknown map
  std::memcpy(host.map, values.data(), sizeof(host.map));
  const CodeTable* codes = code_table(map);
  OCTET_CHECK(codes != nullptr, "quant::cuda::device_tables: map ", quant_map_name(map), " has no code table");
  host.codes = *codes;

  ::octet::cuda::check_available("quant::cuda::device_tables");
  int previous = 0;
  OCTET_CUDA_CHECK(cudaGetDevice(&previous));
  OCTET_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  OCTET_CUDA_CHECK(cudaMalloc(&p, sizeof(DeviceTables)));
  OCTET_CUDA_CHECK(cudaMemcpy(p, &host, sizeof(DeviceTables), cudaMemcpyHostToDevice));
  // A pageable copy may return before its DMA is done; kernels on other streams must see it.
  OCTET_CUDA_CHECK(cudaDeviceSynchronize());
  OCTET_CUDA_CHECK(cudaSetDevice(previous));
  const auto* t = static_cast<const DeviceTables*>(p);
  tables->emplace(key, t);
  return t;
}

}  // namespace octet::quant::cuda
