"""How a data region is cut into one slice per group position.

Follows src/ops/op_common/template/template_utils.h (TemplateDataParams: sliceSize, tailSize).
HCCL uses two conventions and pyhccl copies both: "floor + tail" (NHR, Sequence executors:
floor(count/N) per slice, the last slice takes the remainder) and "ceil" (Mesh TwoShot,
MeshChunk: ceil(count/N) per slice, trailing slices short or empty).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Buf, Region, region_unchecked

__all__ = ["Slices", "VSlices"]


@dataclass(frozen=True, slots=True)
class Slices:
    """``n`` slices of a region starting at ``base``.

    Slice ``j`` starts at ``base + j*size``; slices ``j < regular`` hold ``size`` elements,
    slice ``regular`` (when ``regular < n``) holds ``tail`` elements, later slices are empty.
    This one shape covers both HCCL conventions and lets a progression of slice indices be
    turned into O(1) strided regions, whatever ``n`` is.
    """

    base: int
    n: int
    size: int
    regular: int
    tail: int

    @classmethod
    def floor_tail(cls, base: int, count: int, n: int) -> Slices:
        """floor(count/n) per slice, the last slice takes the remainder (HCCL NHR)."""
        size = count // n
        return cls(base, n, size, n - 1, count - size * (n - 1))

    @classmethod
    def ceil(cls, base: int, count: int, n: int) -> Slices:
        """ceil(count/n) per slice, trailing slices short or empty (HCCL Mesh TwoShot SplitData)."""
        size = -(-count // n)
        if size == 0:
            return cls(base, n, 0, n, 0)
        regular = count // size
        return cls(base, n, size, regular, count - regular * size)

    @property
    def total(self) -> int:
        """Elements over all slices."""
        return self.size * self.regular + (self.tail if self.regular < self.n else 0)

    @property
    def largest(self) -> int:
        """Elements in the largest slice."""
        return max(self.size if self.regular else 0, self.tail if self.regular < self.n else 0)

    def count(self, j: int) -> int:
        """Elements in slice ``j``."""
        if j < self.regular:
            return self.size
        return self.tail if j == self.regular else 0

    def region(self, buf: Buf, j: int, delta: int = 0) -> Region | None:
        """Slice ``j`` in ``buf`` shifted by ``delta``, or None when it is empty."""
        c = self.count(j)
        off = self.base + j * self.size + delta
        return (region_unchecked if off >= 0 else Region)(buf, off, c) if c else None

    def regions(self, buf: Buf, start: int, step: int, k: int, delta: int = 0) -> list[Region]:
        """Non-empty slices ``start + i*step`` for ``i < k`` (ascending), as at most two regions."""
        if k <= 0:
            return []
        out: list[Region] = []
        nreg = 0 if start >= self.regular else min(k, -(-(self.regular - start) // step))
        # every offset below is >= base + delta, every stride >= size: the unchecked constructor is safe
        make = region_unchecked if self.base + delta >= 0 and start >= 0 and step >= 1 else Region
        if nreg and self.size:
            off = self.base + start * self.size + delta
            if nreg == 1:
                out.append(make(buf, off, self.size))
            elif step == 1:
                out.append(make(buf, off, self.size * nreg))
            else:
                out.append(make(buf, off, self.size, nreg, step * self.size))
        j = self.regular
        if j < self.n and self.tail and j >= start and (j - start) % step == 0 and (j - start) // step < k:
            out.append(make(buf, self.base + j * self.size + delta, self.tail))
        return out


@dataclass(frozen=True, slots=True)
class VSlices:
    """Slices of any sizes at any offsets (the V ops: HCCL's counts and displacements).

    Same interface as :class:`Slices`, so every template that takes slices takes these:
    slice ``j`` holds ``counts[j]`` elements at ``offsets[j]``, or, with ``repeat > 1``,
    ``repeat`` pieces of ``counts[j]`` elements ``rstride`` apart (HCCL's repeatNum /
    repeat stride, the strided slices of the Sequence executors' level-0 step).
    """

    offsets: tuple[int, ...]
    counts: tuple[int, ...]
    repeat: int = 1
    rstride: int | None = None

    @property
    def n(self) -> int:
        return len(self.counts)

    @property
    def base(self) -> int:
        """The lowest offset: a scratch mirror of the slices starts here."""
        return min(self.offsets, default=0)

    @property
    def total(self) -> int:
        return sum(self.counts) * self.repeat

    @property
    def largest(self) -> int:
        return max(self.counts, default=0) * self.repeat

    def count(self, j: int) -> int:
        return self.counts[j] * self.repeat

    def region(self, buf: Buf, j: int, delta: int = 0) -> Region | None:
        c = self.counts[j]
        if not c:
            return None
        off = self.offsets[j] + delta
        make = region_unchecked if off >= 0 else Region
        if self.repeat == 1:
            return make(buf, off, c)
        return Region(buf, off, c, self.repeat, self.rstride)

    def regions(self, buf: Buf, start: int, step: int, k: int, delta: int = 0) -> list[Region]:
        """Non-empty slices ``start + i*step`` for ``i < k``, one region each."""
        out = (self.region(buf, start + i * step, delta) for i in range(max(k, 0)))
        return [r for r in out if r is not None]
