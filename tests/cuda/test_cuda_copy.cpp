// CUDA copies and fills: host <-> device round trips are bit-exact for every dtype (random bit
// patterns, so NaN payloads, infinities, -0 and subnormals included), non-contiguous sources and
// destinations, dtype conversion on the device against the CPU's, fill_, and the counter-based
// random fills (uniform_ bit-identical to the CPU for the same seed and offset, normal_ close).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/octet.h"
#include "tests/cuda/parity.h"

namespace octet {
namespace {

using testing::all_close;
using testing::bits_equal;
using testing::gpu;
using testing::kPointwise;

const DType kAllDtypes[] = {DType::f32, DType::f64, DType::bf16, DType::i8, DType::u8, DType::i32, DType::i64};

// A CPU tensor of `dtype` whose bytes are random (seeded).
Tensor random_bits(const Shape& shape, DType dtype, uint64_t seed) {
  const int64_t n = shape_numel(shape);
  std::vector<unsigned char> bytes(static_cast<size_t>(n) * dtype_size(dtype));
  for (size_t i = 0; i < bytes.size(); i += 4) {
    auto w = philox_at(seed, 0, i / 4);
    for (size_t j = 0; j < 4 && i + j < bytes.size(); ++j) bytes[i + j] = static_cast<unsigned char>(w[0] >> (8 * j));
  }
  return from_blob(bytes.data(), shape, dtype);
}

class CudaCopy : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (testing::cpu_selftest()) return;
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << testing::no_cuda_reason();
  }
};
INSTANTIATE_TEST_SUITE_P(AllDtypes, CudaCopy, ::testing::ValuesIn(kAllDtypes),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

TEST_P(CudaCopy, RoundTripIsBitExact) {
  const DType t = GetParam();
  // Empty, scalar, one element, odd, and large enough for many blocks.
  for (const Shape& shape : {Shape{0}, Shape{}, Shape{1}, Shape{3, 5, 7}, Shape{1000003}}) {
    Tensor x = random_bits(shape, t, 1);
    Tensor g = x.to(gpu());
    ASSERT_EQ(g.device(), gpu());
    EXPECT_EQ(g.shape(), x.shape());
    EXPECT_EQ(g.dtype(), t);
    EXPECT_TRUE(bits_equal(g.to(Device::cpu()), x, "round trip of " + ::testing::PrintToString(shape)));
    // A copy on the device (clone) gives the bits a copy on the CPU gives (which quiets a bf16
    // signalling NaN: the copy kernels convert through float).
    EXPECT_TRUE(bits_equal(g.clone(), x.clone(), "clone on the device"));
  }
}

TEST_P(CudaCopy, NonContiguous) {
  const DType t = GetParam();
  Tensor x = random_bits({6, 10, 4}, t, 2);
  // Non-contiguous host sources are made contiguous on the host, then moved.
  EXPECT_TRUE(bits_equal(x.transpose(0, 2).to(gpu()), x.transpose(0, 2), "transposed host source"));
  EXPECT_TRUE(bits_equal(x.slice(1, 1, 10, 3).to(gpu()), x.slice(1, 1, 10, 3), "strided host source"));
  // Strided views on the device go through the device copy kernel.
  Tensor g = x.to(gpu());
  EXPECT_TRUE(bits_equal(g.permute({2, 0, 1}).contiguous(), x.permute({2, 0, 1}), "permuted device view"));
  EXPECT_TRUE(bits_equal(g.slice(1, 1, 10, 3).contiguous(), x.slice(1, 1, 10, 3), "strided device view"));
  EXPECT_TRUE(bits_equal(g.select(2, 3).to(Device::cpu()), x.select(2, 3), "device view back to the host"));
  EXPECT_TRUE(bits_equal(g.narrow(0, 2, 3).unsqueeze(1).expand({3, 5, 10, 4}).contiguous(),
                         x.narrow(0, 2, 3).unsqueeze(1).expand({3, 5, 10, 4}), "broadcast on the device"));
  // copy_ into a strided device destination, from the host and from the device.
  Tensor dst = zeros({4, 10, 6}, TensorOptions(t).device(gpu()));
  dst.transpose(0, 2).copy_(x);
  EXPECT_TRUE(bits_equal(dst.transpose(0, 2), x, "copy_ host -> strided device destination"));
  Tensor dst2 = zeros({4, 10, 6}, TensorOptions(t).device(gpu()));
  dst2.transpose(0, 2).copy_(g);
  EXPECT_TRUE(bits_equal(dst2.transpose(0, 2), x, "copy_ device -> strided device destination"));
  // copy_ with broadcasting of a device source.
  Tensor row = g.select(0, 0).select(1, 0);  // [10]
  Tensor b = empty({3, 10}, TensorOptions(t).device(gpu()));
  b.copy_(row);
  EXPECT_TRUE(bits_equal(b, x.select(0, 0).select(1, 0).expand({3, 10}), "copy_ broadcasting on the device"));
}

TEST_P(CudaCopy, DtypeConversionMatchesCpu) {
  const DType from = GetParam();
  // Values every dtype holds or converts from without undefined behaviour: [0, 100) with fractions
  // for the float dtypes, so float -> int truncation and f32/f64 -> bf16 rounding are exercised.
  Generator gen(3);
  Tensor values = empty({7, 129}, DType::f64);
  values.uniform_(0.0, 100.0, &gen);
  Tensor x = values.to(from);
  Tensor g = x.to(gpu());
  for (DType to : kAllDtypes) {
    std::string what = std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to));
    Tensor got = g.to(to);
    EXPECT_EQ(got.device(), gpu()) << what;
    EXPECT_TRUE(bits_equal(got, x.to(to), what + " on the device"));
    EXPECT_TRUE(bits_equal(g.t().to(to), x.t().to(to), what + " of a transposed view"));
  }
  if (is_floating(from)) {
    // Negative values convert too (towards zero for the signed integers).
    Tensor neg = (values - 50.0).to(from), gneg = neg.to(gpu());
    for (DType to : {DType::f32, DType::f64, DType::bf16, DType::i8, DType::i32, DType::i64})
      EXPECT_TRUE(
          bits_equal(gneg.to(to), neg.to(to),
                     std::string("negative ") + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to))));
  }
}

TEST_P(CudaCopy, Fill) {
  const DType t = GetParam();
  for (double v : {0.0, 1.0, -0.0, 3.0, 1.0 / 3.0, 100.7, -2.5}) {
    if (t == DType::u8 && v < 0) continue;  // out of range for u8
    Tensor c = empty({5, 77}, t);
    c.fill_(v);
    Tensor g = empty({5, 77}, TensorOptions(t).device(gpu()));
    g.fill_(v);
    EXPECT_TRUE(bits_equal(g, c, "fill_(" + std::to_string(v) + ")"));
    // A strided view fills only its elements.
    Tensor gz = zeros({5, 77}, TensorOptions(t).device(gpu())), cz = zeros({5, 77}, t);
    gz.slice(1, 0, 77, 3).fill_(v);
    cz.slice(1, 0, 77, 3).fill_(v);
    EXPECT_TRUE(bits_equal(gz, cz, "fill_ of a strided view"));
  }
  // The factories honour the device of their options.
  const TensorOptions on_gpu = TensorOptions(t).device(gpu());
  const std::pair<const char*, std::pair<Tensor, Tensor>> made[] = {
      {"zeros", {zeros({9}, on_gpu), zeros({9}, t)}},
      {"ones", {ones({9}, on_gpu), ones({9}, t)}},
      {"full", {full({2, 3}, 7.0, on_gpu), full({2, 3}, 7.0, t)}},
      {"scalar_tensor", {scalar_tensor(5.0, on_gpu), scalar_tensor(5.0, t)}},
      {"arange", {arange(0, 50, 3, on_gpu), arange(0, 50, 3, t)}},
  };
  for (const auto& [name, pair] : made) {
    EXPECT_EQ(pair.first.device(), gpu()) << name << " with a device option";
    EXPECT_TRUE(bits_equal(pair.first, pair.second, name));
  }
}

// ---------------------------------------------------------------- random fills

class CudaRandom : public testing::CudaDtypeTest {};
OCTET_CUDA_FLOAT_SUITE(CudaRandom);

TEST_P(CudaRandom, UniformIsBitIdenticalToCpu) {
  const DType t = dtype();
  // Element i uses Philox counter offset + i on both devices; the value is formed in f64 and
  // rounded, so the results must agree bit for bit (also across odd sizes and nonzero offsets).
  for (int64_t n : {1, 3, 1000, 1000003})
    for (uint64_t skip : {0, 5, 123457}) {
      Generator gc(42), gg(42);
      gc.advance(skip);
      gg.advance(skip);
      Tensor c = empty({n}, t), g = empty({n}, TensorOptions(t).device(gpu()));
      c.uniform_(-2.0, 3.0, &gc);
      g.uniform_(-2.0, 3.0, &gg);
      std::string what = "uniform_ n=" + std::to_string(n) + " offset " + std::to_string(skip);
      EXPECT_TRUE(bits_equal(g, c, what));
      EXPECT_EQ(gg.offset(), gc.offset()) << what;
    }
  // rand() on the device, and uniform_ on a non-contiguous device view.
  Generator a(7), b(7);
  EXPECT_TRUE(bits_equal(rand({33, 17}, TensorOptions(t).device(gpu()), &a), rand({33, 17}, t, &b), "rand"));
  Tensor gv = zeros({17, 33}, TensorOptions(t).device(gpu())), cv = zeros({17, 33}, t);
  gv.t().uniform_(0.0, 1.0, &a);
  cv.t().uniform_(0.0, 1.0, &b);
  EXPECT_TRUE(bits_equal(gv, cv, "uniform_ of a transposed view"));
  // bf16 goes through an f32 draw on both devices.
  Tensor gb = empty({1001}, TensorOptions(DType::bf16).device(gpu())), cb = empty({1001}, DType::bf16);
  gb.uniform_(0.0, 1.0, &a);
  cb.uniform_(0.0, 1.0, &b);
  EXPECT_TRUE(bits_equal(gb, cb, "uniform_ bf16"));
}

TEST_P(CudaRandom, NormalIsCloseToCpu) {
  const DType t = dtype();
  // Box-Muller uses log, sqrt and cos: each device's math library rounds on its own, so the
  // values agree to pointwise tolerance rather than bit for bit.
  Generator gc(9), gg(9);
  Tensor c = empty({100003}, t), g = empty({100003}, TensorOptions(t).device(gpu()));
  c.normal_(1.5, 2.0, &gc);
  g.normal_(1.5, 2.0, &gg);
  EXPECT_TRUE(all_close(g, c, kPointwise, "normal_"));
  EXPECT_EQ(gg.offset(), gc.offset());
  Generator a(10), b(10);
  EXPECT_TRUE(
      all_close(randn({64, 65}, TensorOptions(t).device(gpu()), &a), randn({64, 65}, t, &b), kPointwise, "randn"));
  // And the statistics on the device alone: mean 1.5, std 2 within ~5 standard errors.
  std::vector<double> v = g.to(Device::cpu()).to_vector<double>();
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  s = std::sqrt(s / static_cast<double>(v.size() - 1));
  EXPECT_NEAR(m, 1.5, 5 * 2.0 / std::sqrt(static_cast<double>(v.size())));
  EXPECT_NEAR(s, 2.0, 0.05);
}

}  // namespace
}  // namespace octet
