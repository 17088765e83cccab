"""The sweep's progress line and its estimate of the time left.

Each task has a weight (:func:`weight`: its calls times a power of its ranks, the shape of how a
call's cost grows). Weights alone misjudge the time: one algorithm's call may cost a hundred
times another's at the same ranks. So :class:`Progress` learns, per (op, algorithm), the seconds
its finished tasks took per unit of weight, and prices each unfinished task at its own
algorithm's rate (every task's rate until one of that algorithm has finished); the workers' wall
seconds per task second so far turn that into the wall time left.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Sequence, TextIO

from ..topo import parse_topo
from .cases import default_counts
from .sweep import Outcome, Task

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
    n = sum(sum(len(s) for s in pod) for pod in parse_topo(t.topo).layout)
    w = (len(t.counts) if t.counts else len(default_counts(n))) * n * (n + 32)
    return w * max(1, n // 2) if "Chunk" in t.algo else w


class Progress:
    """Tasks done out of ``tasks`` and the time left, printed on ``stream`` (a self-updating line on a
    terminal, else a line every :data:`PROGRESS_EVERY` seconds)."""

    def __init__(self, tasks: Sequence[Task], weights: Sequence[int], stream: TextIO | None = None,
                 start: float | None = None) -> None:
        self.total, self.done = len(tasks), 0
        self.weight_all = sum(weights) or 1
        self.left_w: Counter = Counter()          # per (op, algorithm): weight not done yet
        for t, w in zip(tasks, weights):
            self.left_w[t.op, t.algo] += w
        self.done_w: Counter = Counter()          # per (op, algorithm): weight done, and its task seconds
        self.done_s: Counter = Counter()
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.perf_counter() if start is None else start
        self._shown = 0.0

    def finish(self, o: Outcome, w: int) -> None:
        """Task ``o.task`` (weight ``w``) is done: its seconds teach its algorithm's rate."""
        k = (o.task.op, o.task.algo)
        self.left_w[k] -= w
        self.done_w[k] += w
        self.done_s[k] += o.seconds
        self.done += 1

    def left(self, now: float) -> float | None:
        """Wall seconds left, or None while under :data:`SHARE_TO_ESTIMATE` of the weight is done."""
        done_w, done_s = sum(self.done_w.values()), sum(self.done_s.values())
        if done_w < SHARE_TO_ESTIMATE * self.weight_all or done_s <= 0:
            return None
        rate = done_s / done_w
        task_s = sum(w * (self.done_s[k] / self.done_w[k] if self.done_w[k] else rate)
                     for k, w in self.left_w.items() if w > 0)
        return task_s * (now - self.start) / done_s

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
