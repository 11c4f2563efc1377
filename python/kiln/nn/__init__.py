"""kiln.nn: torch.nn-style namespaces."""
from . import functional  # noqa: F401
