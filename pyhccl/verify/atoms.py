"""The simulator's symbolic buffers: a buffer cut into atoms at the boundaries the plans use.

An atom's value is (number of contributions, sum of per-rank random keys, bit set of ranks
when N <= 64, origin index), so that a count of ten billion costs what a count of ten does
(:mod:`pyhccl.verify.sim` runs the plans over them).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

from ..plan.ir import Region

__all__ = ["AtomBuffer", "rank_keys"]


@lru_cache(maxsize=8)
def rank_keys(n: int, seed: int) -> np.ndarray:
    """Per-rank random odd keys: a sum of keys says which contributions an atom holds."""
    return np.random.default_rng(seed).integers(1, 2**62, size=n, dtype=np.int64) | np.int64(1)


class AtomBuffer:
    """One buffer of one rank: its atoms and a value per atom.

    ``val[0, atom]`` packs four int64 fields: number of contributions, sum of rank keys
    (wrapping), bit set of ranks (N <= 64), input index its first element came from. Each rank
    has its own atom grid: a grid shared by all ranks would tie together regions of different
    ranks that merely share offsets, and uneven slices would then split it element by element.
    """

    CARD, KEY, MASK, ORIGIN = range(4)

    def __init__(self, name: str, size: int, nranks: int, bounds: np.ndarray,
                 on_split: Callable[[], None]) -> None:
        self.name, self.size, self.on_split = name, size, on_split
        self.starts = np.union1d(np.array([0, size], dtype=np.int64), bounds[(bounds > 0) & (bounds < size)])
        a = len(self.starts) - 1
        self.val = np.zeros((nranks, a, 4), np.int64)
        self.writer = np.full((nranks, a), -1, np.int32)
        self.reader = np.full((nranks, a), -1, np.int32)    # last step whose sends read the atom
        self.widths = np.diff(self.starts)
        self.cache: dict[Region, tuple] = {}

    def split(self, xs: np.ndarray) -> None:
        new = np.setdiff1d(xs, self.starts)
        new = new[(new > 0) & (new < self.size)]
        if not len(new):
            return
        starts = np.union1d(self.starts, new)
        src = np.searchsorted(self.starts, starts[:-1], side="right") - 1
        self.val = self.val[:, src]
        self.val[:, :, self.ORIGIN] += starts[:-1] - self.starts[src]
        self.writer, self.reader = self.writer[:, src], self.reader[:, src]
        self.starts, self.widths = starts, np.diff(starts)
        self.cache.clear()
        self.on_split()

    def lookup(self, r: Region) -> tuple:
        """``(atom indices, atom widths)`` of ``r``, cached until the next split."""
        hit = self.cache.get(r)
        if hit is None:
            idx = self.atoms(r)
            hit = self.cache[r] = (idx, self.widths[idx])
        return hit

    def atoms(self, r: Region) -> np.ndarray | slice:
        """Atom indices covering ``r`` in stream order (a slice when evenly spaced)."""
        if r.repeat == 1:
            a0, a1 = np.searchsorted(self.starts, (r.offset, r.offset + r.count))
            if self.starts[a0] != r.offset or self.starts[a1] != r.offset + r.count:
                self.split(np.array([r.offset, r.offset + r.count]))
                return self.atoms(r)
            return slice(int(a0), int(a1))
        offs = r.offset + r.stride * np.arange(r.repeat, dtype=np.int64)
        a0 = np.searchsorted(self.starts, offs)
        a1 = np.searchsorted(self.starts, offs + r.count)
        if (self.starts[a0] != offs).any() or (self.starts[a1] != offs + r.count).any():
            self.split(np.concatenate([offs, offs + r.count]))
            return self.atoms(r)
        if (a1 - a0 == 1).all():
            step = int(a0[1] - a0[0])
            if (np.diff(a0) == step).all():
                return slice(int(a0[0]), int(a0[-1]) + 1, step)
            return a0
        return np.concatenate([np.arange(x, y) for x, y in zip(a0, a1)])

    def to_region_offsets(self, r: Region, stream: np.ndarray) -> np.ndarray:
        piece = np.minimum(stream // max(r.count, 1), r.repeat - 1)
        return r.offset + piece * (r.stride or 0) + (stream - piece * r.count)

    def read(self, rank: int, idx) -> np.ndarray:
        return self.val[0, idx].copy()

    def write(self, rank: int, idx, v: np.ndarray, step: int) -> None:
        self.val[0, idx] = v
        self.writer[0, idx] = step
