// Tensor handle: creation, views, copies, casts, random generation, bad input.
#include <gtest/gtest.h>

#include "core/octet.h"

namespace octet {
namespace {

TEST(Tensor, CreationAndMetadata) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_TRUE(z.device().is_cpu());
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(z.raw_data()) % Storage::kAlignment, 0u);
  EXPECT_EQ(full({2}, 3.5, DType::f64).to_vector<double>(), (std::vector<double>{3.5, 3.5}));
  EXPECT_EQ(ones({3}, DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(arange(0, 5, 2).to_vector<float>(), (std::vector<float>{0, 2, 4}));
  EXPECT_EQ(arange(3, DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(scalar_tensor(2.5).item(), 2.5);
  EXPECT_EQ(scalar_tensor(1.0).dim(), 0);
  std::vector<int64_t> raw{1, 2, 3, 4};
  Tensor b = from_blob(raw.data(), {2, 2}, DType::i64);
  raw[0] = 99;  // from_blob copies
  EXPECT_EQ(b.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST(Tensor, ViewsShareStorage) {
  Tensor x = arange(12, DType::f64).reshape({3, 4});
  Tensor t = x.t();
  EXPECT_EQ(t.shape(), (Shape{4, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.contiguous().to_vector<double>(), (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  Tensor n = x.narrow(1, 1, 2);
  EXPECT_EQ(n.to_vector<double>(), (std::vector<double>{1, 2, 5, 6, 9, 10}));
  Tensor s = x.slice(1, 0, 4, 2);
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(x.select(0, -1).to_vector<double>(), (std::vector<double>{8, 9, 10, 11}));
  n.fill_(-1);  // writes through to x
  EXPECT_EQ(x.select(0, 0).to_vector<double>(), (std::vector<double>{0, -1, -1, 3}));
  Tensor e = arange(3, DType::f64).reshape({3, 1}).expand({3, 2});
  EXPECT_EQ(e.stride(1), 0);
  EXPECT_EQ(e.to_vector<double>(), (std::vector<double>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(x.permute({1, 0}).shape(), (Shape{4, 3}));
  EXPECT_EQ(x.unsqueeze(1).shape(), (Shape{3, 1, 4}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).shape(), (Shape{3, 4}));
  EXPECT_EQ(x.reshape({-1}).shape(), (Shape{12}));
  EXPECT_EQ(x.flatten().shape(), (Shape{12}));
  EXPECT_EQ(zeros({2, 3, 4}).flatten(1).shape(), (Shape{2, 12}));
  // reshape of a non-contiguous tensor copies
  EXPECT_EQ(t.reshape({12}).to_vector<double>()[1], 4.0);
}

TEST(Tensor, CopyBroadcastAndCast) {
  Tensor dst = zeros({2, 3}, DType::f64);
  dst.copy_(from_vector<float>({1, 2, 3}, {3}));
  EXPECT_EQ(dst.to_vector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  Tensor f = from_vector<float>({-1.5f, 0.25f, 300.f, 1e10f}, {4});
  EXPECT_EQ(f.to(DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{-1, 0, 300, 2147483647}));
  EXPECT_EQ(f.to(DType::u8).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 255, 255}));
  EXPECT_EQ(f.to(DType::i8).to_vector<int8_t>(), (std::vector<int8_t>{-1, 0, 127, 127}));
  // bf16 keeps 8 significant bits and rounds to nearest even
  Tensor b = from_vector<float>({1.0f, 1.00390625f, 1.01171875f, 3.14159f}, {4}).to(DType::bf16);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1.0f, 1.0f, 1.015625f, 3.140625f}));
  EXPECT_EQ(b.to(DType::f64).to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 3}));
  EXPECT_EQ(from_vector<int64_t>({5, -7}, {2}).to(DType::f32).to_vector<float>(), (std::vector<float>{5, -7}));
}

TEST(Tensor, SeededRandomIsReproducibleAndThreadIndependent) {
  Generator a(42), b(42), c(43);
  Tensor x = randn({1000}, DType::f32, &a);
  Tensor y = randn({1000}, DType::f32, &b);
  Tensor z = randn({1000}, DType::f32, &c);
  EXPECT_EQ(x.to_vector<float>(), y.to_vector<float>());
  EXPECT_NE(x.to_vector<float>(), z.to_vector<float>());
  // The draw continues the stream: a second draw differs from the first.
  EXPECT_NE(randn({1000}, DType::f32, &a).to_vector<float>(), x.to_vector<float>());
  // Same numbers with one thread as with two.
  int threads = get_num_threads();
  set_num_threads(1);
  Generator d(42);
  Tensor w = randn({100000}, DType::f32, &d);
  set_num_threads(2);
  Generator e(42);
  Tensor v = randn({100000}, DType::f32, &e);
  set_num_threads(threads);
  EXPECT_EQ(w.to_vector<float>(), v.to_vector<float>());
  // Moments of the distributions.
  Generator s(1);
  std::vector<double> n = randn({200000}, DType::f64, &s).to_vector<double>();
  double mean = 0, sq = 0;
  for (double q : n) mean += q, sq += q * q;
  mean /= n.size();
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sq / n.size() - mean * mean, 1.0, 0.01);
  std::vector<float> u = rand({200000}, DType::f32, &s).to_vector<float>();
  double um = 0;
  for (float q : u) {
    ASSERT_GE(q, 0.0f);
    ASSERT_LT(q, 1.0f);
    um += q;
  }
  EXPECT_NEAR(um / u.size(), 0.5, 0.005);
}

TEST(Tensor, BadInputRaisesError) {
  Tensor x = zeros({2, 3});
  EXPECT_THROW(x.view({4}), Error);
  EXPECT_THROW(x.view({-1, -1}), Error);
  EXPECT_THROW(x.t().view({6}), Error);
  EXPECT_THROW(x.permute({0, 0}), Error);
  EXPECT_THROW(x.permute({0}), Error);
  EXPECT_THROW(x.narrow(1, 2, 2), Error);
  EXPECT_THROW(x.select(0, 2), Error);
  EXPECT_THROW(x.size(2), Error);
  EXPECT_THROW(x.expand({3, 3}), Error);
  EXPECT_THROW(x.item(), Error);
  EXPECT_THROW(x.data<double>(), Error);
  EXPECT_THROW(zeros({-1}), Error);
  EXPECT_THROW(from_vector<float>({1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(x.copy_(zeros({3, 2})), Error);
  EXPECT_THROW(Tensor().shape(), Error);
  EXPECT_THROW(x.to(Device::cuda(0)), Error);
  EXPECT_THROW(Device::parse("gpu"), Error);
  EXPECT_THROW(zeros({2}, DType::i64).requires_grad_(true), Error);
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  try {
    x.view({4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("view"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[4]"), std::string::npos);
  }
}

}  // namespace
}  // namespace octet
