"""kiln.nn.functional: the functional forms, named as torch.nn.functional."""
from .. import _kiln
from .._kiln import gelu, sigmoid, silu, tanh  # noqa: F401


def relu(input):
    return _kiln.maximum(input, _kiln.zeros((), dtype=input.dtype, device=input.device))


def linear(input, weight, bias=None):
    """y = input @ weight.T + bias, weight [out_features, in_features], as F.linear."""
    if weight.ndim != 2:
        raise _kiln.Error(f"linear: weight must be 2-D [out_features, in_features], got shape {tuple(weight.shape)}")
    if input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise _kiln.Error(f"linear: input shape {tuple(input.shape)} does not match weight shape "
                          f"{tuple(weight.shape)} (last dim of input must be in_features = {weight.shape[1]})")
    out = _kiln.matmul(input, weight.t())
    if bias is not None:
        out = out + bias
    return out
