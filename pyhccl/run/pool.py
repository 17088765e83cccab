"""Scratch memory reused across calls: one growing byte buffer, typed views of it."""

from __future__ import annotations

import numpy as np

__all__ = ["ScratchPool"]


class ScratchPool:
    """Hands out typed scratch arrays; allocates only when a call needs more than ever before."""

    def __init__(self) -> None:
        self._raw = np.empty(0, np.uint8)
        self.allocations = 0

    def get(self, dtype: np.dtype, count: int) -> np.ndarray:
        """``count`` elements of ``dtype``; contents are undefined."""
        nbytes = count * dtype.itemsize
        if nbytes > self._raw.size:
            self._raw = np.empty(max(nbytes, 2 * self._raw.size), np.uint8)
            self.allocations += 1
        return self._raw[:nbytes].view(dtype)

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return self._raw.size
