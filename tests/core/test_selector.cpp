// core/selector.h: one implementation behind every kernel-path choice (ISA, conv2d, int8 GEMM,
// zero-point GEMM, PrecisionBatching kernel, CUDA INT8 conv path): names, parsing, the environment
// override, refusing unsupported choices, and set() returning the previous choice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "core/cpu/conv_dnnl.h"
#include "core/cpu/isa.h"
#include "core/selector.h"
#include "quant/cpu/int8_gemm.h"
#include "quant/cpu/pbatch.h"
#include "quant/cpu/qgemm.h"
#include "quant/int8_conv.h"

namespace octet {
namespace {

enum class Path : uint8_t { automatic, fast, slow, missing };

bool supported(Path p) { return p != Path::missing; }
Path fallback() { return Path::fast; }

Selector<Path> make(const char* env) {
  return Selector<Path>(
      "test path", env,
      {{Path::automatic, "auto"}, {Path::fast, "fast"}, {Path::slow, "slow"}, {Path::missing, "missing"}}, supported,
      fallback);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Selector, NamesParsingAndSet) {
  Selector<Path> s = make(nullptr);
  EXPECT_EQ(s.name(Path::slow), "slow");
  EXPECT_EQ(s.parse("slow"), Path::slow);
  EXPECT_EQ(s.parse("auto"), Path::automatic);
  EXPECT_EQ(s.parse("automatic"), Path::automatic);  // read as "auto" everywhere
  EXPECT_NE(
      error_of([&] { s.parse("fastest"); }).find("unknown test path 'fastest' (expected auto, fast, slow, missing)"),
      std::string::npos);
  EXPECT_EQ(s.active(), Path::fast);  // the default
  EXPECT_EQ(s.set(Path::slow), Path::fast);
  EXPECT_EQ(s.active(), Path::slow);
  EXPECT_NE(error_of([&] { s.set(Path::missing); })
                .find("'missing' is not supported by this build or machine "
                      "(supported: auto, fast, slow)"),
            std::string::npos);
  EXPECT_THROW(s.set(static_cast<Path>(9)), Error);
  EXPECT_EQ(s.active(), Path::slow);  // a refused set changes nothing
  EXPECT_EQ(s.supported_choices().size(), 3u);
}

TEST(Selector, EnvironmentOverride) {
  ::setenv("OCTET_TEST_PATH", "slow", 1);
  EXPECT_EQ(make("OCTET_TEST_PATH").active(), Path::slow);
  ::setenv("OCTET_TEST_PATH", "missing", 1);
  EXPECT_NE(error_of([] { make("OCTET_TEST_PATH").active(); }).find("environment variable OCTET_TEST_PATH"),
            std::string::npos);
  ::setenv("OCTET_TEST_PATH", "nonsense", 1);
  EXPECT_NE(error_of([] { make("OCTET_TEST_PATH").active(); }).find("unknown test path 'nonsense'"), std::string::npos);
  ::setenv("OCTET_TEST_PATH", "", 1);
  EXPECT_EQ(make("OCTET_TEST_PATH").active(), Path::fast);
  ::unsetenv("OCTET_TEST_PATH");
}

// Every family goes through it: the same "auto" name and set() semantics.
TEST(Selector, EveryKernelFamilyUsesIt) {
  EXPECT_EQ(quant::cpu::qgemm_path_name(quant::cpu::QgemmPath::automatic), "auto");
  EXPECT_EQ(quant::int8_conv_path_name(quant::Int8ConvPath::automatic), "auto");
  EXPECT_EQ(quant::cpu::qgemm_selector().parse("automatic"), quant::cpu::QgemmPath::automatic);
  const cpu::Isa isa = cpu::isa_selector().active();
  EXPECT_EQ(cpu::isa_selector().set(cpu::Isa::portable), isa);
  EXPECT_EQ(cpu::active_isa(), cpu::Isa::portable);
  cpu::set_active_isa(isa);
  const cpu::Conv2dPath conv = cpu::conv2d_selector().set(cpu::Conv2dPath::loops);
  EXPECT_EQ(cpu::conv2d_selector().set(conv), cpu::Conv2dPath::loops);
  EXPECT_EQ(quant::cpu::pb_kernel_selector().parse("portable"), quant::cpu::PbKernel::portable);
  EXPECT_TRUE(quant::cpu::int8_gemm_selector().supported(quant::cpu::Int8GemmPath::reference));
}

}  // namespace
}  // namespace octet
