"""kiln.cuda: availability, devices, streams, events and memory, as torch.cuda."""
import contextlib

from ._kiln import _cuda
from ._kiln._cuda import (Event, Stream, availability, built_with_cuda, current_stream, default_stream,  # noqa: F401
                          device_count, empty_cache, external_stream, get_device_properties, is_available,
                          max_memory_allocated, memory_allocated, memory_reserved, reset_peak_memory_stats,
                          synchronize)


def new_stream(device=None, priority=0):
    """A new non-blocking CUDA stream (torch.cuda.Stream())."""
    return _cuda.new_stream(device, priority)


@contextlib.contextmanager
def stream(s):
    """Makes `s` the current stream of its device inside the block (torch.cuda.stream)."""
    if s is None:
        yield
        return
    guard = _cuda._StreamGuard(s)
    try:
        yield s
    finally:
        del guard


def use_torch_stream(torch_stream=None):
    """A context in which kiln enqueues on torch's current CUDA stream (or the one given),
    so that kiln and torch work is ordered without extra synchronisation."""
    import torch  # imported on use: kiln does not depend on torch

    ts = torch_stream if torch_stream is not None else torch.cuda.current_stream()
    return stream(external_stream(ts.cuda_stream, f"cuda:{ts.device.index or 0}"))
