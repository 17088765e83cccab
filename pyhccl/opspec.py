"""One row per collective: buffer sizes, bus-bandwidth factor, numpy reference, postcondition.

The benchmark, the simulator and the tests all read these rows (nccl-tests src/common.h
``struct testColl``; busbw factors from nccl-tests doc/PERFORMANCE.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

__all__ = ["Contrib", "OpSpec", "OPS", "get_opspec"]


@dataclass(frozen=True, slots=True)
class Contrib:
    """What ``[offset, offset+count)`` of a rank's output must hold after the collective.

    Element ``x`` holds element ``x + shift`` of the input of every rank in ``ranks``, each
    exactly once (reduced together when there are several).
    """

    offset: int
    count: int
    ranks: frozenset[int]
    shift: int


@dataclass(frozen=True)
class OpSpec:
    """Semantics of one collective for ``n`` ranks and per-rank ``count`` (nccl-tests' count)."""

    name: str
    rooted: bool
    input_count: Callable[[int, int], int]
    output_count: Callable[[int, int], int]
    busbw_factor: Callable[[int], float]
    reference: Callable[[Sequence[np.ndarray], Callable], list[np.ndarray]]
    post: Callable[[int, int, int], list[Contrib]]

    def __repr__(self) -> str:
        return f"OpSpec({self.name})"


def _fold(inputs: Sequence[np.ndarray], ufunc: Callable) -> np.ndarray:
    acc = inputs[0].copy()
    for x in inputs[1:]:
        ufunc(acc, x, out=acc)
    return acc


def _all(n: int) -> frozenset[int]:
    return frozenset(range(n))


OPS: dict[str, OpSpec] = {
    "allreduce": OpSpec(
        "allreduce", False,
        input_count=lambda n, c: c, output_count=lambda n, c: c,
        busbw_factor=lambda n: 2 * (n - 1) / n,
        reference=lambda xs, uf: [_fold(xs, uf)] * len(xs),
        post=lambda n, c, r: [Contrib(0, c, _all(n), 0)] if c else [],
    ),
    "reduce_scatter": OpSpec(
        "reduce_scatter", False,
        input_count=lambda n, c: n * c, output_count=lambda n, c: c,
        busbw_factor=lambda n: (n - 1) / n,
        reference=lambda xs, uf: np.split(_fold(xs, uf), len(xs)),
        post=lambda n, c, r: [Contrib(0, c, _all(n), r * c)] if c else [],
    ),
    "all_gather": OpSpec(
        "all_gather", False,
        input_count=lambda n, c: c, output_count=lambda n, c: n * c,
        busbw_factor=lambda n: (n - 1) / n,
        reference=lambda xs, uf: [np.concatenate(xs)] * len(xs),
        post=lambda n, c, r: [Contrib(j * c, c, frozenset([j]), -j * c) for j in range(n)] if c else [],
    ),
}


def get_opspec(name: str) -> OpSpec:
    """The row for ``name``. Raises ValueError listing the valid names."""
    key = name.lower().replace("-", "_")
    key = {"reducescatter": "reduce_scatter", "allgather": "all_gather"}.get(key, key)
    if key not in OPS:
        raise ValueError(f"unknown collective {name!r}; valid: {', '.join(OPS)}")
    return OPS[key]
