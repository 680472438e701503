// Channels-last tensors (PyTorch's torch.channels_last): a [N, C, H, W] tensor whose memory runs
// N, H, W, C, so the C values of one pixel sit side by side. Shape and indexing stay NCHW; only the
// strides differ, so every op accepts one. On the CPU the convolution (f32: oneDNN's nhwc kernels),
// batch norm (+ ReLU/ReLU6, + residual), the elementwise ops and max and average pooling keep the
// format from input to output, forward and backward: a network fed a channels-last input stays
// channels-last and skips the NCHW <-> blocked reorders oneDNN needs around every convolution of
// an NCHW tensor (a quarter of a MobileNetV2 step; tools/bench/RESULTS.md). Other ops and the CUDA
// backend compute on an NCHW copy and return NCHW.
//   Tensor x = to_channels_last(images);        // once, at the model's input
//   Tensor y = model.forward(x);                // convolutions, batch norms, adds stay channels-last
//   is_channels_last(y);                        // true up to the first op without a channels-last path
#pragma once

#include <cstdint>

#include "core/selector.h"
#include "core/tensor.h"

namespace octet {

// Whether octet's convolutional models run channels-last (the fusion pass, layers/fusion.h, has
// their first convolution convert): `auto` (default) where it pays: an f32 CPU input through the oneDNN
// convolutions, a model measured faster so (MobileNetV2, the CIFAR ResNets), no INT8 layer (the
// INT8 kernels take NCHW); `on` for every 4-D CPU input; `off` never
// (OCTET_CHANNELS_LAST=auto|on|off). For tests and benchmarks that compare the two:
//   ChannelsLastMode previous = channels_last_selector().set(ChannelsLastMode::off);  ...  set(previous);
enum class ChannelsLastMode : uint8_t { automatic, on, off };
Selector<ChannelsLastMode>& channels_last_selector();
// Whether an input x of a network without INT8 layers runs channels-last under the active mode.
bool channels_last_pays(const Tensor& x);

// True when t is 3-D [N, C, S] or 4-D [N, C, H, W] with channels-last strides (size-1 dims aside,
// so a tensor with one channel or one pixel per plane is also contiguous).
bool is_channels_last(const Tensor& t);
// Whether an op keeps t's channels-last format: t is a 4-D CPU tensor in channels-last memory that
// is not also contiguous (one channel or one pixel per plane is both, and runs as NCHW). The CPU
// convolution, batch norm, pooling and elementwise ops decide by it.
bool keeps_channels_last(const Tensor& t);
// t in channels-last memory: t itself when it already is, else a copy (differentiable).
Tensor to_channels_last(const Tensor& t);
// An uninitialized channels-last tensor of a 3-D or 4-D shape.
Tensor empty_channels_last(const Shape& shape, TensorOptions opts = {});
// An uninitialized tensor of `shape` laid out as `ref` is: channels-last when ref is channels-last
// and not contiguous and shape has ref's rank, contiguous otherwise.
Tensor empty_in_format_of(const Tensor& ref, const Shape& shape, TensorOptions opts);
// A channels-last (or contiguous) tensor as another shape of the same N and C in the same format,
// as a view: [N, C, H, W] <-> [N, C, H*W] (the batch norm kernels' form).
Tensor reshape_planes(const Tensor& t, const Shape& shape);

}  // namespace octet
