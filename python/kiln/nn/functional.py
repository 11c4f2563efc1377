"""kiln.nn.functional: the functional forms, named as torch.nn.functional."""
from .. import _kiln
from .._kiln import rms_norm, layer_norm, gelu, log_softmax, scaled_dot_product_attention, sigmoid, silu, softmax, tanh  # noqa: F401


def relu(input):
    return _kiln.maximum(input, _kiln.zeros((), dtype=input.dtype, device=input.device))


def linear(input, weight, bias=None, *, weight_scale=None):
    """y = input @ weight.T + bias, weight [out_features, in_features], as F.linear.

    A float8_e4m3fn weight takes weight_scale, its float32 dequantisation scale:
    0-d (per tensor) or [out_features] / [out_features, 1] (per output row).
    """
    return _kiln.linear(input, weight, bias, weight_scale=weight_scale)


def linear_silu_and_mul(input, weight, bias=None, *, weight_scale=None):
    """silu(gate) * up of linear(input, weight, bias, weight_scale=...), weight [2H, in_features]
    the gate rows then the up rows -> [..., H]: SwiGLU's projection in one call (one kernel
    for the few rows of a decode step on CUDA), the values of the two calls.
    """
    return _kiln.linear_silu_and_mul(input, weight, bias, weight_scale=weight_scale)


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None, b_scale=None):
    """One matrix product per group, as torch.nn.functional.grouped_mm.

    2-D x 3-D: mat_a [T, K] rows sorted by group, mat_b [G, K, N] (usually the
    transpose of weights stored [G, N, K]), offs int32 [G] cumulative end rows
    -> [T, N]. 3-D x 3-D: batched, offs None. 2-D x 2-D: offs splits K -> [G, M, N].
    A float8_e4m3fn mat_b takes b_scale, its float32 dequantisation scale: [G, N]
    (per group and output column), [G] (per group) or 0-d; the product is
    mat_a @ (mat_b * b_scale).
    """
    return _kiln._grouped_mm(mat_a, mat_b, offs, bias, out_dtype, b_scale)


def scaled_mm(input, mat2, scale_a, scale_b, bias=None, out_dtype=None, use_fast_accum=False):
    """(input @ mat2) * scale_a * scale_b + bias for float8_e4m3fn operands, as torch._scaled_mm."""
    return _kiln._scaled_mm(input, mat2, scale_a, scale_b, bias, None, out_dtype, use_fast_accum)


def embedding(input, weight):
    """Rows of weight [num_embeddings, dim] at the int32/int64 ids in input, as F.embedding."""
    if weight.dim() != 2:
        raise _kiln.Error(f"embedding: weight must be 2-D [num_embeddings, dim], got shape {tuple(weight.shape)}")
    out = _kiln.index_select(weight, 0, input.reshape((input.numel(),)))
    return out.reshape(tuple(input.shape) + (weight.shape[1],))
