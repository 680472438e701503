// The PrecisionBatching scheme in precision plans (tools/cli/quant_plan.h): `scheme:` at the top of a
// plan file and per entry, row_step and a_shift per entry, and the same keys in --pbatch.
#include <gtest/gtest.h>

#include "tests/train/run_util.h"
#include "tools/cli/quant_plan.h"

namespace octet::quant {
namespace {

using train::expect_error;

TEST(PbPlan, SchemeAtTheTopAndPerEntry) {
  const PrecisionPlan p = cli::precision_plan_from_yaml(
      "scheme: paper\n"
      "default: {w: 4, a: 8}\n"
      "lstm: {w: 2, a: 16, scheme: octet, row_step: true}\n"
      "encoder: {w: 8, a: 32, a_shift: 12}\n"
      "decoder: int8\n",
      "plan.yaml");
  ASSERT_TRUE(p.default_spec.has_value());
  EXPECT_EQ(p.default_spec->name(), "w4a8-paper");
  EXPECT_EQ(p.layers.at("lstm")->name(), "w2a16-row");
  EXPECT_EQ(p.layers.at("encoder")->name(), "w8a32-paper-s12");
  EXPECT_EQ(p.layers.at("decoder")->name(), "int8");
  EXPECT_FALSE(p.layers.count("scheme"));
  // Without `scheme:` the entries are octet's.
  EXPECT_EQ(cli::precision_plan_from_yaml("default: {w: 4, a: 8}\n", "p.yaml").default_spec->name(), "w4a8");
  expect_error([] { cli::precision_plan_from_yaml("scheme: fast\ndefault: {w: 4, a: 8}\n", "p.yaml"); },
               "p.yaml:1: 'scheme': scheme must be paper or octet, got 'fast'");
  expect_error([] { cli::precision_plan_from_yaml("lstm: {w: 4, a: 8, a_shift: 40}\n", "p.yaml"); },
               "a_shift must be in 0..30, got 40");
  expect_error([] { cli::precision_plan_from_yaml("lstm: {w: 4, a: 8, row_step: maybe}\n", "p.yaml"); },
               "row_step must be true or false");
  expect_error([] { cli::precision_plan_from_yaml("lstm: {w: 4, a: 8, shift: 4}\n", "p.yaml"); },
               "unknown key 'shift' (known: w, a, clip, scheme, row_step, a_shift)");
}

TEST(PbPlan, PbatchArgumentTakesTheScheme) {
  const PrecisionPlan p = cli::precision_plan("w=4,a=8,scheme=paper");
  ASSERT_TRUE(p.default_spec.has_value());
  EXPECT_EQ(p.default_spec->pb.scheme, PbScheme::paper);
  EXPECT_EQ(p.default_spec->name(), "w4a8-paper");
}

}  // namespace
}  // namespace octet::quant
