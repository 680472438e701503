// The NCCL collectives (core/nccl/comm.h) on one GPU, a world of one rank: the communicator is
// made without MPI, and each collective must order itself after the caller's stream and before
// what the caller queues next. Several ranks need several GPUs: tests/dist/test_dist_mpi.cpp runs
// the same collectives across processes there (CudaCollectives.*).
#include <gtest/gtest.h>

#include <cstring>

#include "core/nccl/comm.h"
#include "cuda/parity.h"

namespace octet {
namespace {

class CudaNccl : public testing::CudaTest {
 protected:
  void SetUp() override {
    testing::CudaTest::SetUp();
    if (IsSkipped()) return;
    if (!dist::nccl::built()) GTEST_SKIP() << "octet was built without NCCL (-DOCTET_NCCL=ON)";
  }
  const dist::nccl::Peers alone{0, 1, 60.0};
};

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return x.dtype() == y.dtype() && x.numel() == y.numel() &&
         std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

TEST_F(CudaNccl, OneRankCollectivesKeepEveryDtypeBitForBit) {
  const Device gpu = Device::cuda(0);
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64}) {
    SCOPED_TRACE(::testing::Message() << dt);
    const bool floating = dt == DType::f32 || dt == DType::f64 || dt == DType::bf16;
    for (int64_t n : {1, 7, 1000, 1 << 20}) {
      Generator g(static_cast<uint64_t>(n));
      const Tensor want = (rand({n}, DType::f64, &g) * 100.0).to(dt);
      // Written by a kernel on the caller's stream just before: the collective must wait for it.
      Tensor x = want.to(gpu).clone();
      for (bool average : {false, true}) {
        if (average && !floating) continue;
        dist::nccl::Request r = dist::nccl::all_reduce(alone, 0, x.raw_data(), n, dt, average);
        dist::nccl::wait(r, alone.timeout_s, "all_reduce");
        EXPECT_TRUE(same_bits(x, want)) << "all_reduce of one rank, n " << n << " average " << average;
      }
      dist::nccl::Request b = dist::nccl::broadcast(alone, 0, x.raw_data(), n, dt, 0);
      dist::nccl::wait(b, alone.timeout_s, "broadcast");
      EXPECT_TRUE(same_bits(x, want));
      Tensor gathered = zeros({n}, TensorOptions(dt).device(gpu));
      dist::nccl::Request a = dist::nccl::all_gather(alone, 0, x.raw_data(), gathered.raw_data(), n, dt);
      dist::nccl::wait(a, alone.timeout_s, "all_gather");
      EXPECT_TRUE(same_bits(gathered, want));
      Tensor part = zeros({n}, TensorOptions(dt).device(gpu));
      dist::nccl::Request s = dist::nccl::reduce_scatter(alone, 0, x.raw_data(), part.raw_data(), n, dt, false);
      dist::nccl::wait(s, alone.timeout_s, "reduce_scatter");
      EXPECT_TRUE(same_bits(part, want));
    }
  }
}

TEST_F(CudaNccl, LaterWorkOnTheCallersStreamSeesTheResult) {
  const Device gpu = Device::cuda(0);
  Tensor x = full({1 << 22}, 3.0, TensorOptions(DType::f32).device(gpu));
  dist::nccl::Request r = dist::nccl::all_reduce(alone, 0, x.raw_data(), x.numel(), DType::f32, false);
  dist::nccl::wait(r, alone.timeout_s, "all_reduce");
  EXPECT_EQ(sum(x * 2.0).to(Device::cpu()).item(), 6.0 * static_cast<double>(1 << 22));
}

}  // namespace
}  // namespace octet
