// Where a tensor's memory lives. The CPU is always present; CUDA devices exist only in builds
// with OCTET_CUDA and on machines with a GPU (see cuda_device_count()).
//   Device d = Device::cpu();  Device g = Device::cuda(0);  d.is_cpu();
#pragma once

#include <ostream>
#include <string>

namespace octet {

enum class DeviceType : unsigned char { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  // Parses "cpu", "cuda", "cuda:1"; anything else is an octet::Error.
  static Device parse(const std::string& s);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

// Number of usable CUDA devices: 0 in a build without OCTET_CUDA or on a machine without a GPU.
int cuda_device_count();
// True when this build was configured with OCTET_CUDA.
bool cuda_compiled();

}  // namespace octet
