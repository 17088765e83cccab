"""The sweep's progress line and its estimate of the time left.

Each task has a weight (:func:`weight`: its calls times N(N+32), N/2 times more for the MeshChunk
family), and the time left is the time so far times the weight left over the weight done. Replayed
over a full ``verify all --ranks 1-128 -j 2`` (35 688 tasks, 50 min), the estimate at 5-95 % of the
run was off by 15 % on average, 41 % at worst (N^2 alone: 20 %, 60 %). Pricing each task at its own
(op, algorithm)'s measured rate instead did worse there (25 %, 49 %): a rate learned on the large
machines, which run first, misprices the small ones.
"""

from __future__ import annotations

import sys
import time
from typing import Sequence, TextIO

from ..topo import parse_topo
from .cases import default_counts
from .sweep import Task

__all__ = ["weight", "Progress"]

#: Seconds between progress lines when the stream is not a terminal.
PROGRESS_EVERY = 30.0
#: The share of the weight done before the time left is estimated (one task says little).
SHARE_TO_ESTIMATE = 0.01


def weight(t: Task) -> int:
    """A task's expected cost: per call, N (N + 32) (N ranks: N plans of steps over N peers, and below about
    32 ranks the costs of a call and of a step, which do not shrink with N: fitted on the sweep's task times
    at 8-64 ranks), N/2 times that for the MeshChunk family (N-1 rounds of N-1 chunks on every rank); the
    calls of :func:`default_counts` (fewer above 64 ranks) unless the task names its counts."""
    n = parse_topo(t.topo).nranks
    w = (len(t.counts) if t.counts else len(default_counts(n))) * n * (n + 32)
    return w * max(1, n // 2) if "Chunk" in t.algo else w


class Progress:
    """Tasks done and the time left, printed on ``stream`` (a self-updating line on a
    terminal, else a line every :data:`PROGRESS_EVERY` seconds)."""

    def __init__(self, weights: Sequence[int], stream: TextIO | None = None, start: float | None = None) -> None:
        """``weights``: every task's (:func:`weight`); ``start``: the time the sweep began (time.perf_counter)."""
        self.total, self.done = len(weights), 0
        self.weight_all, self.weight_done = sum(weights) or 1, 0
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.perf_counter() if start is None else start
        self._shown = float("-inf")          # the first task's line is shown at once

    def finish(self, w: int) -> None:
        """A task of weight ``w`` is done."""
        self.weight_done += w
        self.done += 1

    def left(self, now: float) -> float | None:
        """Seconds left, or None while under :data:`SHARE_TO_ESTIMATE` of the weight is done."""
        share = self.weight_done / self.weight_all
        if share < SHARE_TO_ESTIMATE:
            return None
        return (now - self.start) * (1 - share) / share

    def line(self, now: float) -> str:
        left = self.left(now)
        est = "estimating" if left is None else f"about {left:.0f} s left"
        return f"# {self.done}/{self.total} tasks, {now - self.start:.0f} s, {est}"

    def show(self) -> None:
        """Print the line: always on a terminal (over the last one), else every :data:`PROGRESS_EVERY` s."""
        now = time.perf_counter()
        if self.stream.isatty():
            print(f"\r{self.line(now)}", end="" if self.done < self.total else "\n", file=self.stream, flush=True)
        elif now - self._shown > PROGRESS_EVERY and self.done < self.total:
            self._shown = now
            print(self.line(now), file=self.stream, flush=True)
