#include "core/device.h"

#include "core/error.h"

namespace octet {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() <= 8 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos)
    return cuda(std::stoi(s.substr(5)));
  OCTET_FAIL("device: cannot parse '", s, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace octet
