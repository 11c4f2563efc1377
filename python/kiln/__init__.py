"""kiln: a tensor backend and local-inference engine.

Names follow PyTorch: kiln.float8_e4m3fn, kiln.zeros, Tensor.to, Tensor.tolist,
kiln.nn.functional.silu. Tensors pass to and from torch and numpy without a
copy through DLPack: kiln.from_dlpack(torch_tensor), torch.from_dlpack(kiln_tensor).
"""
import builtins as _builtins

from . import _kiln
from ._kiln import *  # noqa: F401,F403  (dtypes, Tensor, ops)
from ._kiln import Tensor, Error, NotImplementedError, device, dtype  # noqa: F401
from ._kiln import _grouped_mm, _scaled_mm  # noqa: F401  (torch._scaled_mm / torch._grouped_mm)
from . import cuda  # noqa: F401
from . import nn  # noqa: F401
from . import linalg  # noqa: F401

__all__ = [n for n in dir(_kiln) if not n.startswith("_")] + ["tensor", "cuda", "nn", "linalg"]


def _flatten(data, shape, flat, depth):
    if _builtins.isinstance(data, (_builtins.list, _builtins.tuple)):
        if len(shape) <= depth:
            shape.append(len(data))
        elif shape[depth] != len(data):
            raise ValueError(f"kiln.tensor: expected a sequence of length {shape[depth]} at dim {depth}, "
                             f"got {len(data)}")
        for item in data:
            _flatten(item, shape, flat, depth + 1)
        if not data and len(shape) > depth + 1:
            raise ValueError("kiln.tensor: ragged nested sequence")
    else:
        if len(shape) != depth:
            raise ValueError(f"kiln.tensor: ragged nested sequence (a number at depth {depth}, "
                             f"sequences at depth {len(shape)})")
        if isinstance(data, Tensor) or hasattr(data, "item"):  # a 0-d tensor or a numpy scalar
            data = data.item()
        if not isinstance(data, (_builtins.bool, _builtins.int, _builtins.float, _builtins.complex)):
            raise TypeError(f"kiln.tensor: cannot make a tensor from {type(data).__name__}")
        flat.append(data)


def tensor(data, dtype=None, device=None):
    """A new tensor from nested Python sequences (or a number), as torch.tensor.

    The dtype is inferred as torch does: bool, int64, float32 or complex64.
    """
    if isinstance(data, Tensor):
        return data.to(device if device is not None else data.device, dtype if dtype is not None else data.dtype)
    if hasattr(data, "__dlpack__"):
        t = from_dlpack(data).clone()  # noqa: F405
        return t.to(device if device is not None else t.device, dtype if dtype is not None else t.dtype)
    shape, flat = [], []
    _flatten(data, shape, flat, 0)
    if dtype is None:
        if any(isinstance(v, _builtins.complex) for v in flat):
            dtype = complex64  # noqa: F405
        elif any(isinstance(v, _builtins.float) for v in flat):
            dtype = float32  # noqa: F405
        elif flat and all(isinstance(v, _builtins.bool) for v in flat):
            dtype = _kiln.bool
        elif not flat:
            dtype = float32  # noqa: F405
        else:
            dtype = int64  # noqa: F405
    return _kiln._from_flat(flat, shape, dtype, device)
