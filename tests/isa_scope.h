// Puts back the active CPU ISA (core/cpu/isa.h) when a test that switches it leaves the scope,
// however it leaves (an ASSERT returns early), shared by the test files.
//   octet::testing::IsaScope isa_scope;
//   for (cpu::Isa isa : ...) { cpu::set_active_isa(isa); ... }
#pragma once

#include "core/cpu/isa.h"

namespace octet::testing {

class IsaScope {
 public:
  IsaScope() = default;
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;
  ~IsaScope() { cpu::set_active_isa(saved_); }

 private:
  cpu::Isa saved_ = cpu::active_isa();
};

}  // namespace octet::testing
