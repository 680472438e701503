#include "core/cpu/conv_dnnl.h"

#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace octet::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool>;

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// Primitive descriptors and primitives for one geometry, created once (creation JIT-compiles).
struct ConvPrimitives {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
  dnnl::convolution_backward_weights bwd_weights;
};

memory::dims src_dims(const Conv2dGeometry& g) { return {g.n, g.c, g.h, g.w}; }
memory::dims dst_dims(const Conv2dGeometry& g) { return {g.n, g.k, g.p, g.q}; }
memory::dims wei_dims(const Conv2dGeometry& g) {
  if (g.groups == 1) return {g.k, g.c, g.r, g.s};
  return {g.groups, g.k / g.groups, g.c / g.groups, g.r, g.s};
}
Tag wei_tag(const Conv2dGeometry& g) { return g.groups == 1 ? Tag::oihw : Tag::goihw; }

// Activations: an NCHW tensor is reordered into the layout oneDNN picks (`any`: blocked, nChw8c on
// AVX2) and back; a channels-last one is taken as it is (nhwc kernels), since a network that stays
// channels-last then never reorders.
// bf16 (autocast): the forward reads bf16 x and w and writes out (bf16 with `bf16_out`, else f32);
// the backward reads bf16 x, w and dout and writes dx (bf16 with `bf16_out`, else f32) and f32 dw,
// accumulating in f32 throughout.
std::unique_ptr<ConvPrimitives> create(const Conv2dGeometry& g, bool with_bias, bool nhwc, bool bf16, bool bf16_out) {
  using dnnl::algorithm;
  using dnnl::prop_kind;
  const auto f32 = memory::data_type::f32, in = bf16 ? memory::data_type::bf16 : f32;
  const auto out = bf16_out ? memory::data_type::bf16 : f32;
  const Tag act = nhwc ? Tag::nhwc : Tag::any;
  memory::desc src(src_dims(g), in, act), dst(dst_dims(g), out, act), wei(wei_dims(g), in, Tag::any);
  memory::desc diff_src(src_dims(g), out, act), diff_dst(dst_dims(g), in, act), diff_wei(wei_dims(g), f32, Tag::any);
  memory::desc bias({g.k}, f32, Tag::x);
  memory::dims strides{g.stride_h, g.stride_w}, dil{g.dil_h - 1, g.dil_w - 1}, pad{g.pad_h, g.pad_w};
  // Right/bottom padding that makes oneDNN's exact size equation give PyTorch's floored output.
  memory::dims pad_r{(g.p - 1) * g.stride_h + (g.r - 1) * g.dil_h + 1 - g.h - g.pad_h,
                     (g.q - 1) * g.stride_w + (g.s - 1) * g.dil_w + 1 - g.w - g.pad_w};
  auto& eng = engine();
  auto fwd_d = with_bias ? dnnl::convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                                           src, wei, bias, dst, strides, dil, pad, pad_r)
                         : dnnl::convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct,
                                                           src, wei, dst, strides, dil, pad, pad_r);
  dnnl::convolution_forward::primitive_desc fwd_pd(fwd_d, eng);
  dnnl::convolution_backward_data::desc bd_d(algorithm::convolution_direct, diff_src, wei, diff_dst, strides, dil, pad,
                                             pad_r);
  dnnl::convolution_backward_data::primitive_desc bd_pd(bd_d, eng, fwd_pd);
  dnnl::convolution_backward_weights::desc bw_d(algorithm::convolution_direct, src, diff_wei, diff_dst, strides, dil,
                                                pad, pad_r);
  dnnl::convolution_backward_weights::primitive_desc bw_pd(bw_d, eng, fwd_pd);
  return std::unique_ptr<ConvPrimitives>(new ConvPrimitives{fwd_pd, dnnl::convolution_forward(fwd_pd), bd_pd,
                                                            dnnl::convolution_backward_data(bd_pd), bw_pd,
                                                            dnnl::convolution_backward_weights(bw_pd)});
}

// The cache lock also serializes execution: the primitives are shared, and kernels run one op at a time.
std::mutex cache_mutex;

ConvPrimitives& lookup(const Conv2dGeometry& g, bool with_bias, bool nhwc, bool bf16, bool bf16_out) {
  static std::map<Key, std::unique_ptr<ConvPrimitives>> cache;
  Key key{g.n,     g.c,     g.h,     g.w,     g.k,      g.r,       g.s,  g.stride_h, g.stride_w,
          g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.groups, with_bias, nhwc, bf16, bf16_out};
  auto it = cache.find(key);
  if (it == cache.end()) {
    try {
      it = cache.emplace(key, create(g, with_bias, nhwc, bf16, bf16_out)).first;
    } catch (const dnnl::error& e) {
      OCTET_FAIL("conv2d: oneDNN could not create a convolution for input [", g.n, ", ", g.c, ", ", g.h, ", ", g.w,
                 "], weight [", g.k, ", ", g.c / g.groups, ", ", g.r, ", ", g.s, "]: ", e.what());
    }
  }
  return *it->second;
}

// Blocked-layout buffers come from octet's allocator, which caches large blocks: fresh pages for
// every call cost as much as the convolution itself. `keep` holds them until the call ends.
using Scratch = std::vector<Tensor>;
memory scratch_memory(const memory::desc& desc, Scratch& keep) {
  keep.push_back(empty({static_cast<int64_t>(desc.get_size())}, DType::u8));
  return memory(desc, engine(), keep.back().raw_data());
}

// A memory in the layout `want`: `user` itself when it already has it, else a reordered copy.
memory to_layout(memory user, const memory::desc& want, dnnl::stream& s, Scratch& keep) {
  if (user.get_desc() == want) return user;
  memory m = scratch_memory(want, keep);
  dnnl::reorder(user, m).execute(s, user, m);
  return m;
}

// Runs `exec` writing into a memory of layout `have`, then copies it to `user` if they differ.
template <typename Exec>
void into_layout(memory user, const memory::desc& have, dnnl::stream& s, Scratch& keep, Exec exec) {
  memory m = user.get_desc() == have ? user : scratch_memory(have, keep);
  exec(m);
  if (m != user) dnnl::reorder(m, user).execute(s, m, user);
}

memory wrap(const memory::dims& dims, Tag tag, const Tensor& t) {
  const auto type = t.dtype() == DType::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  OCTET_CHECK(t.dtype() == DType::bf16 || t.dtype() == DType::f32, "conv2d: oneDNN path takes f32 or bf16, got ",
              t.dtype());
  return memory(memory::desc(dims, type, tag), engine(), t.raw_data());
}

// An activation as it lies in memory: NCHW or channels-last (the kernel checks admit only these).
memory wrap_activation(const memory::dims& dims, const Tensor& t) {
  return wrap(dims, t.is_contiguous() ? Tag::nchw : Tag::nhwc, t);
}

}  // namespace

void dnnl_conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                         const Tensor& out) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  ConvPrimitives& p =
      lookup(g, bias.defined(), !x.is_contiguous(), x.dtype() == DType::bf16, out.dtype() == DType::bf16);
  dnnl::stream s(engine());
  Scratch keep;
  memory xs = to_layout(wrap_activation(src_dims(g), x), p.fwd_pd.src_desc(), s, keep);
  memory ws = to_layout(wrap(wei_dims(g), wei_tag(g), w), p.fwd_pd.weights_desc(), s, keep);
  into_layout(wrap_activation(dst_dims(g), out), p.fwd_pd.dst_desc(), s, keep, [&](memory& ys) {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xs}, {DNNL_ARG_WEIGHTS, ws}, {DNNL_ARG_DST, ys}};
    if (bias.defined()) args.emplace(DNNL_ARG_BIAS, wrap({g.k}, Tag::x, bias));
    p.fwd.execute(s, args);
  });
  s.wait();
}

void dnnl_conv2d_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout,
                          const Tensor& dx, const Tensor& dw) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  // Bias does not change the backward primitives; reuse whichever entry exists for this geometry.
  const bool bf16 = x.dtype() == DType::bf16;
  ConvPrimitives& p = lookup(g, false, !x.is_contiguous(), bf16, dx.defined() ? dx.dtype() == DType::bf16 : bf16);
  dnnl::stream s(engine());
  Scratch keep;
  memory dys = to_layout(wrap_activation(dst_dims(g), dout), p.bwd_data_pd.diff_dst_desc(), s, keep);
  if (dx.defined()) {
    memory ws = to_layout(wrap(wei_dims(g), wei_tag(g), w), p.bwd_data_pd.weights_desc(), s, keep);
    into_layout(wrap_activation(src_dims(g), dx), p.bwd_data_pd.diff_src_desc(), s, keep, [&](memory& dxs) {
      p.bwd_data.execute(s, {{DNNL_ARG_DIFF_DST, dys}, {DNNL_ARG_WEIGHTS, ws}, {DNNL_ARG_DIFF_SRC, dxs}});
    });
  }
  if (dw.defined()) {
    memory dyw = p.bwd_weights_pd.diff_dst_desc() == dys.get_desc()
                     ? dys
                     : to_layout(wrap_activation(dst_dims(g), dout), p.bwd_weights_pd.diff_dst_desc(), s, keep);
    memory xs = to_layout(wrap_activation(src_dims(g), x), p.bwd_weights_pd.src_desc(), s, keep);
    into_layout(wrap(wei_dims(g), wei_tag(g), dw), p.bwd_weights_pd.diff_weights_desc(), s, keep, [&](memory& dws) {
      p.bwd_weights.execute(s, {{DNNL_ARG_DIFF_DST, dyw}, {DNNL_ARG_SRC, xs}, {DNNL_ARG_DIFF_WEIGHTS, dws}});
    });
  }
  s.wait();
}

}  // namespace octet::cpu
