"""kiln.nn.functional: the functional forms, named as torch.nn.functional."""
from .. import _kiln
from .._kiln import gelu, log_softmax, scaled_dot_product_attention, sigmoid, silu, softmax, tanh  # noqa: F401


def relu(input):
    return _kiln.maximum(input, _kiln.zeros((), dtype=input.dtype, device=input.device))


def linear(input, weight, bias=None, *, weight_scale=None):
    """y = input @ weight.T + bias, weight [out_features, in_features], as F.linear.

    A float8_e4m3fn weight takes weight_scale, its float32 dequantisation scale:
    0-d (per tensor) or [out_features] / [out_features, 1] (per output row).
    """
    return _kiln.linear(input, weight, bias, weight_scale=weight_scale)
