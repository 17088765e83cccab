"""The sweep's progress line: each unfinished task priced at its own algorithm's measured rate."""

from __future__ import annotations

import io

import pytest

from pyhccl.verify.progress import Progress, weight
from pyhccl.verify.sweep import Outcome, Task


def _done(task: Task, seconds: float) -> Outcome:
    o = Outcome(task, 0)
    o.seconds = seconds
    return o


def test_weight_grows_with_ranks_and_calls():
    assert weight(Task("allreduce", "Ring", "1x1x8", counts=(5,))) == 8 * 40
    assert weight(Task("allreduce", "Ring", "1x1x8", counts=(5, 6))) == 2 * 8 * 40
    assert weight(Task("allreduce", "Ring", "1x2x4", counts=(5,))) == 8 * 40               # every rank of the machine
    assert weight(Task("reduce_scatter", "MeshChunk", "1x1x8", counts=(5,))) == 8 * 40 * 4   # N/2 times


def test_each_algorithm_priced_at_its_own_rate():
    slow = [Task("reduce_scatter", "MeshChunk", f"1x1x{n}", counts=(1,)) for n in (4, 2)]
    fast = [Task("reduce_scatter", "Ring", f"1x1x{n}", counts=(1,)) for n in (4, 2)]
    tasks = slow + fast
    w = [16, 4, 16, 4]
    p = Progress(tasks, w, stream=io.StringIO(), start=0.0)
    assert p.left(1.0) is None and p.line(1.0) == "# 0/4 tasks, 1 s, estimating"
    p.finish(_done(slow[0], 16.0), 16)        # 1 s a unit of weight
    p.finish(_done(fast[1], 0.4), 4)          # 0.1 s a unit
    # left: 4 units of MeshChunk at 1 s and 16 of Ring at 0.1 s = 5.6 task seconds; the workers took
    # 8.2 wall s for 16.4 task seconds so far (two at once): 2.8 s left (half the weight left: 8.2 s by weight)
    assert p.left(8.2) == pytest.approx(2.8)
    assert p.line(8.2) == "# 2/4 tasks, 8 s, about 3 s left"
    p.finish(_done(slow[1], 4.0), 4)
    p.finish(_done(fast[0], 1.6), 16)
    assert p.left(11.0) == 0


def test_an_algorithm_not_seen_yet_gets_every_task_s_rate():
    a, b = Task("allreduce", "Ring", "1x1x2", counts=(1,)), Task("allreduce", "NHR", "1x1x2", counts=(1,))
    p = Progress([a, b], [4, 4], stream=io.StringIO(), start=0.0)
    p.finish(_done(a, 2.0), 4)
    assert p.left(2.0) == pytest.approx(2.0)


def test_lines_on_a_stream_every_interval():
    out = io.StringIO()
    t = Task("allreduce", "Ring", "1x1x2", counts=(1,))
    p = Progress([t, t], [4, 4], stream=out)
    p.finish(_done(t, 0.5), 4)
    p.show()
    p.show()                                   # within the interval: nothing more
    assert out.getvalue().count("\n") == 1 and out.getvalue().startswith("# 1/2 tasks, ")
