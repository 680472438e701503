// The CUDA runtime of core/cuda.h: the caching allocator's reuse and statistics, out-of-memory
// errors, streams and events, pinned memory with non-blocking copies, mixed-device errors, and
// Module::to(cuda) with a model's forward/backward matching the CPU. The NoGpu suite covers the
// other side: a build (with or without the CUDA backend) on a machine without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda.h"
#include "core/octet.h"
#include "tests/cuda/parity.h"
#include "tests/error_of.h"

namespace octet {
namespace {

using testing::all_close;
using testing::bits_equal;
using testing::gpu;
using testing::normal_input;

using testing::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

constexpr size_t kMiB = size_t{1} << 20;

// ---------------------------------------------------------------- the device

class CudaDeviceInfo : public testing::CudaTest {};

TEST_F(CudaDeviceInfo, NamesAndVersions) {
  const std::string name = cuda::device_name(0), driver = cuda::driver_version(), cudnn = cuda::cudnn_version();
  EXPECT_GE(cuda_device_count(), 1);
  EXPECT_FALSE(name.empty());
  EXPECT_FALSE(driver.empty());
  EXPECT_FALSE(cudnn.empty());
  EXPECT_EQ(cuda::current_device(), 0);
  // tools/scripts/gpu_check.sh puts these in its report (from the XML output).
  RecordProperty("device_name", name);
  RecordProperty("driver_cuda_version", driver);
  RecordProperty("cudnn_version", cudnn);
  RecordProperty("device_count", cuda_device_count());
}

// ---------------------------------------------------------------- caching allocator

class CudaAllocator : public testing::CudaTest {};

TEST_F(CudaAllocator, FreedBlockIsReused) {
  cuda::synchronize();
  const int64_t n = 3 * (1 << 20) + 17;  // an odd size: rounded to a 2 MiB multiple
  { Tensor a = empty({n}, TensorOptions(DType::f32).device(gpu())); }
  cuda::MemoryStats before = cuda::memory_stats();
  EXPECT_GE(before.cached, n * sizeof(float));
  Tensor b = empty({n}, TensorOptions(DType::f32).device(gpu()));
  cuda::MemoryStats after = cuda::memory_stats();
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.device_allocs, before.device_allocs);
  EXPECT_EQ(after.allocated, before.allocated + (before.cached - after.cached));
  EXPECT_EQ(after.reserved, before.reserved);
  b.fill_(2.0);
  EXPECT_EQ(b.to(Device::cpu()).to_vector<float>()[n - 1], 2.0f);
}

TEST_F(CudaAllocator, PeakAndReleaseCache) {
  cuda::synchronize();
  cuda::reset_peak();
  cuda::MemoryStats base = cuda::memory_stats();
  EXPECT_EQ(base.peak_allocated, base.allocated);
  {
    Tensor big = empty({int64_t{64} << 20}, TensorOptions(DType::u8).device(gpu()));  // 64 MiB
    cuda::MemoryStats live = cuda::memory_stats();
    EXPECT_GE(live.allocated, base.allocated + 64 * kMiB);
    EXPECT_GE(live.peak_allocated, live.allocated);
  }
  cuda::MemoryStats freed = cuda::memory_stats();
  EXPECT_EQ(freed.allocated, base.allocated);
  EXPECT_GE(freed.peak_allocated, base.allocated + 64 * kMiB) << "the peak remembers the freed tensor";
  EXPECT_GE(freed.cached, 64 * kMiB);
  cuda::release_cache();
  cuda::MemoryStats released = cuda::memory_stats();
  EXPECT_EQ(released.cached, 0u);
  EXPECT_EQ(released.reserved, released.allocated) << "only live blocks stay reserved";
  cuda::reset_peak();
  EXPECT_EQ(cuda::memory_stats().peak_allocated, released.allocated);
  // The next allocation of that size goes to the driver again.
  int64_t allocs = released.device_allocs;
  Tensor again = empty({int64_t{64} << 20}, TensorOptions(DType::u8).device(gpu()));
  EXPECT_EQ(cuda::memory_stats().device_allocs, allocs + 1);
}

TEST_F(CudaAllocator, ImpossibleAllocationThrowsOutOfMemory) {
  const int64_t pib = int64_t{1} << 50;  // 1 PiB
  std::string msg = error_of([&] { empty({pib}, TensorOptions(DType::u8).device(gpu())); });
  EXPECT_TRUE(contains(msg, "out of memory")) << msg;
  EXPECT_TRUE(contains(msg, "1073741824"))
      << "the message should say how much was asked (1 PiB = 1073741824 MiB): " << msg;
  EXPECT_TRUE(contains(msg, "cuda:0")) << msg;
  // The device is still usable afterwards.
  Tensor x = full({1000}, 3.0, TensorOptions(DType::f32).device(gpu()));
  EXPECT_EQ(sum(x).item<float>(), 3000.0f);
}

// ---------------------------------------------------------------- streams and events

class CudaStream : public testing::CudaTest {};

TEST_F(CudaStream, CopyOnSideStreamThenEventWait) {
  Tensor host = cuda::pin_memory(normal_input({1 << 20}, DType::f32, 1, false));
  cuda::Stream side = cuda::Stream::create();
  EXPECT_NE(side.handle(), nullptr);
  EXPECT_FALSE(side == cuda::current_stream());
  Tensor dev;
  cuda::Event copied;
  {
    cuda::StreamGuard on(side);
    EXPECT_TRUE(cuda::current_stream() == side);
    dev = host.to(gpu(), /*non_blocking=*/true);
    copied.record(side);
  }
  EXPECT_FALSE(side == cuda::current_stream()) << "the guard restores the previous stream";
  // The default stream waits on the device for the copy, then computes with its result.
  copied.wait(cuda::current_stream());
  Tensor doubled = dev * 2.0;
  EXPECT_TRUE(bits_equal(doubled, host * 2.0, "x*2 after a copy on a side stream"));
  side.synchronize();
  EXPECT_TRUE(side.query());
  EXPECT_TRUE(copied.query());
}

TEST_F(CudaStream, EventsTime) {
  cuda::Event start, end;
  start.record();
  Tensor a = normal_input({512, 512}, DType::f32, 2, false).to(gpu());
  for (int i = 0; i < 5; ++i) a = mm(a, a) * (1.0 / 512);
  end.record();
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_GE(start.elapsed_ms(end), 0.0f);
}

TEST_F(CudaStream, WorkOnTwoStreamsStaysCorrect) {
  // Each stream computes its own result from its own inputs; allocations made on one stream are
  // reused only by that stream, so nothing is overwritten while the other still reads it.
  cuda::Stream s1 = cuda::Stream::create(), s2 = cuda::Stream::create();
  Tensor x = normal_input({256, 256}, DType::f64, 3, false);
  Tensor r1, r2;
  for (int round = 0; round < 3; ++round) {
    {
      cuda::StreamGuard on(s1);
      r1 = sum(exp(x.to(gpu()) * 0.1), {1});
    }
    {
      cuda::StreamGuard on(s2);
      r2 = sum(tanh(x.to(gpu())), {0});
    }
  }
  s1.synchronize();
  s2.synchronize();
  EXPECT_TRUE(all_close(r1, sum(exp(x * 0.1), {1}), testing::kSums, "stream 1"));
  EXPECT_TRUE(all_close(r2, sum(tanh(x), {0}), testing::kSums, "stream 2"));
}

// ---------------------------------------------------------------- pinned memory

class CudaPinned : public testing::CudaTest {};

TEST_F(CudaPinned, RoundTripNonBlocking) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::i64, DType::u8}) {
    std::string name(dtype_name(t));
    Tensor src = testing::uniform_input({3, 100001}, DType::f64, 4, 0.0, 120.0, false).to(t);
    Tensor pinned = cuda::pin_memory(src);
    EXPECT_TRUE(cuda::is_pinned(pinned)) << name;
    EXPECT_FALSE(cuda::is_pinned(src)) << name;
    EXPECT_TRUE(bits_equal(pinned, src, name + " pin_memory copy"));
    // Host to device without waiting; the device to host copy below is ordered after it on the
    // same stream, and the host waits for the stream before reading.
    Tensor dev = pinned.to(gpu(), /*non_blocking=*/true);
    Tensor back = cuda::pinned_empty(src.shape(), t);
    EXPECT_TRUE(cuda::is_pinned(back));
    cuda::copy_between_devices(back, dev, /*non_blocking=*/true);
    cuda::current_stream().synchronize();
    EXPECT_TRUE(bits_equal(back, src, name + " pinned -> cuda -> pinned, non-blocking"));
    // non_blocking towards pageable host memory behaves as blocking: the data is there on return.
    EXPECT_TRUE(bits_equal(dev.to(Device::cpu(), /*non_blocking=*/true), src, name + " cuda -> pageable host"));
  }
}

// ---------------------------------------------------------------- mixed devices

class CudaMixedDevice : public testing::CudaTest {};

TEST_F(CudaMixedDevice, OpsRefuseAndNameBothDevices) {
  Tensor c = ones({2, 3}), g = ones({2, 3}, TensorOptions().device(gpu()));
  Tensor ids_cpu = zeros({2}, DType::i64);
  const std::pair<const char*, std::function<void()>> cases[] = {
      {"add", [&] { add(c, g); }},
      {"operator*", [&] { (void)(g * c); }},
      {"where", [&] { where(gt(g, 0.0), c, g); }},
      {"mm", [&] { mm(c, g.t()); }},
      {"linear", [&] { linear(g, c); }},
      {"conv2d",
       [&] {
         conv2d(g.reshape({1, 1, 2, 3}), c.reshape({1, 1, 2, 3}));
       }},
      {"cat",
       [&] {
         cat({c, g}, 0);
       }},
      {"gather",
       [&] {
         gather(g, 1, zeros({2, 1}, DType::i64));
       }},
      {"embedding", [&] { embedding(g, ids_cpu); }},
      {"cross_entropy", [&] { cross_entropy(g, ids_cpu); }},
      {"batch_norm", [&] { batch_norm(g, {.weight = ones({3}), .training = true}); }},
  };
  for (const auto& [name, fn] : cases) {
    std::string msg = error_of(fn);
    EXPECT_TRUE(contains(msg, "cpu") && contains(msg, "cuda:0")) << name << ": " << msg;
  }
}

// ---------------------------------------------------------------- modules

class CudaModule : public testing::CudaTest {};

TEST_F(CudaModule, ToMovesParametersAndBuffersInPlace) {
  manual_seed(3);
  SmallCnn net(10, 1, 8, 0.25);
  NamedTensors params = net.named_parameters(), buffers = net.named_buffers();
  std::vector<Tensor> values;
  for (const auto& [name, p] : params) values.push_back(p.detach().clone());
  net.to(gpu());
  NamedTensors moved = net.named_parameters();
  ASSERT_EQ(moved.size(), params.size());
  for (size_t i = 0; i < moved.size(); ++i) {
    const Tensor& p = moved[i].second;
    EXPECT_TRUE(p.same(params[i].second)) << moved[i].first << ": the handle stays the same";
    EXPECT_TRUE(p.device().is_cuda()) << moved[i].first;
    EXPECT_TRUE(p.is_leaf() && p.requires_grad()) << moved[i].first;
    EXPECT_TRUE(bits_equal(p, values[i], moved[i].first));
  }
  for (const auto& [name, b] : net.named_buffers()) EXPECT_TRUE(b.device().is_cuda()) << name;
  net.to(Device::cpu());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params[i].second.device().is_cpu());
    EXPECT_TRUE(bits_equal(params[i].second, values[i], params[i].first + " back on the CPU"));
  }
}

// Model-level agreement: per-op errors compound through ~10 layers, and BatchNorm's backward
// scales by 1/std, so the f32 bounds are looser than kConv's; f64 checks the same graph tightly.
constexpr testing::Tolerances kModel{{2e-3, 1e-3}, {1e-9, 1e-10}};

// Two training steps (forward, cross-entropy, backward) of identically initialized models on
// the CPU and on CUDA: losses, every parameter's gradient and every buffer (running statistics)
// agree; then one evaluation-mode forward.
void expect_model_parity(const std::string& what, const std::function<std::shared_ptr<Module>()>& make,
                         const Shape& input, int64_t classes, DType dtype) {
  manual_seed(5);
  std::shared_ptr<Module> a = make();
  manual_seed(5);
  std::shared_ptr<Module> b = make();
  a->to(dtype);
  b->to(dtype);
  b->to(gpu());
  Tensor x = normal_input(input, dtype, 6, false);
  Tensor target = testing::index_input({input[0]}, classes, 7);
  for (int step = 0; step < 2; ++step) {
    std::string s = what + " " + std::string(dtype_name(dtype)) + " step " + std::to_string(step);
    a->zero_grad();
    b->zero_grad();
    manual_seed(100 + step);  // dropout masks: the same draws on both devices
    Tensor la = cross_entropy((*a)(x), target);
    manual_seed(100 + step);
    Tensor lb = cross_entropy((*b)(x.to(gpu())), target.to(gpu()));
    EXPECT_TRUE(all_close(lb, la, kModel, s + " loss"));
    la.backward();
    lb.backward();
    testing::expect_same_grads_and_buffers(*b, *a, kModel, s, dtype);
  }
  a->eval();
  b->eval();
  NoGradGuard ng;
  EXPECT_TRUE(all_close((*b)(x.to(gpu())), (*a)(x), kModel, what + " eval forward"));
}

class CudaModelParity : public testing::CudaParityTest {};

TEST_F(CudaModelParity, ForwardBackwardMatchesCpu) {
  for (DType t : {DType::f32, DType::f64}) {
    try {
      expect_model_parity(
          "small_cnn", [] { return std::make_shared<SmallCnn>(10, 3, 16, 0.25); }, {4, 3, 16, 16}, 10, t);
      expect_model_parity(
          "resnet8 shortcut A", [] { return std::make_shared<CifarResNet>(8, 10, Shortcut::A); }, {4, 3, 16, 16}, 10,
          t);
      expect_model_parity(
          "resnet8 shortcut B", [] { return std::make_shared<CifarResNet>(8, 10, Shortcut::B); }, {4, 3, 16, 16}, 10,
          t);
      expect_model_parity(
          "mobilenetv2_cifar x0.25",
          [] { return build_model(ModelOptions().name("mobilenetv2_cifar").num_classes(10).width_mult(0.25)); },
          {4, 3, 16, 16}, 10, t);
    } catch (const std::exception& e) {
      ADD_FAILURE() << dtype_name(t) << " model parity threw: " << e.what();
    }
  }
}

// ---------------------------------------------------------------- without a GPU

// Runs where no CUDA device is usable (in builds with or without the CUDA backend): everything
// that needs a GPU fails with an octet::Error saying why, and queries answer "nothing".
class NoGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::is_available())
      GTEST_SKIP() << "a CUDA device is present: these tests cover machines without one (the Cuda* suites run here)";
  }
  // What the errors say: the backend is compiled in, or not.
  static std::string reason() { return cuda_compiled() ? "no CUDA device is available" : "CUDA backend is not built"; }
};

TEST_F(NoGpu, QueriesAnswerNothing) {
  EXPECT_FALSE(cuda::is_available());
  EXPECT_EQ(cuda_device_count(), 0);
  cuda::MemoryStats m = cuda::memory_stats();
  EXPECT_EQ(m.allocated, 0u);
  EXPECT_EQ(m.peak_allocated, 0u);
  EXPECT_EQ(m.cached, 0u);
  EXPECT_EQ(m.reserved, 0u);
  EXPECT_EQ(m.device_allocs, 0);
  EXPECT_EQ(m.cache_hits, 0);
  EXPECT_EQ(cuda::device_name(0), "");
  EXPECT_NO_THROW(cuda::synchronize());
  EXPECT_NO_THROW(cuda::release_cache());
  EXPECT_NO_THROW(cuda::reset_peak());
  EXPECT_FALSE(cuda::is_pinned(ones({2})));
}

TEST_F(NoGpu, MovingToTheGpuThrowsSayingWhy) {
  Tensor x = ones({2, 3});
  std::string msg = error_of([&] { x.to(Device::cuda()); });
  EXPECT_TRUE(contains(msg, reason())) << msg;
  msg = error_of([&] { zeros({2}, TensorOptions().device(Device::cuda())); });
  EXPECT_TRUE(contains(msg, reason())) << msg;
  msg = error_of([&] { cuda::check_available("my_op"); });
  EXPECT_TRUE(contains(msg, "my_op") && contains(msg, reason())) << msg;
  msg = error_of([&] { cuda::Stream::create(); });
  EXPECT_TRUE(contains(msg, reason())) << msg;
  msg = error_of([&] { cuda::pin_memory(x); });
  EXPECT_TRUE(contains(msg, reason())) << msg;
  // A module that cannot move stays where it was.
  Linear lin(3, 2);
  msg = error_of([&] { lin.to(Device::cuda()); });
  EXPECT_TRUE(contains(msg, reason())) << msg;
  for (const Tensor& p : lin.parameters()) EXPECT_TRUE(p.device().is_cpu());
  EXPECT_EQ(lin(x).shape(), (Shape{2, 2}));
}

}  // namespace
}  // namespace octet
