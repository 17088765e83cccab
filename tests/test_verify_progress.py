"""The sweep's progress line: tasks done, and the time left from the share of the work done."""

from __future__ import annotations

import io

import pytest

from pyhccl.verify.progress import Progress, weight
from pyhccl.verify.sweep import Task


def test_weight_grows_with_ranks_and_calls():
    assert weight(Task("allreduce", "Ring", "1x1x8", counts=(5,))) == 8 * 40
    assert weight(Task("allreduce", "Ring", "1x1x8", counts=(5, 6))) == 2 * 8 * 40
    assert weight(Task("allreduce", "Ring", "1x2x4", counts=(5,))) == 8 * 40               # every rank of the machine
    assert weight(Task("reduce_scatter", "MeshChunk", "1x1x8", counts=(5,))) == 8 * 40 * 4   # N/2 times
    assert weight(Task("allreduce", "Ring", "1x1x100")) == 3 * 100 * 132                   # default counts: 3 above 64


def test_time_left_from_the_share_of_the_weight_done():
    p = Progress([60, 30, 10], stream=io.StringIO(), start=0.0)
    assert p.left(1.0) is None and p.line(1.0) == "# 0/3 tasks, 1 s, estimating"
    p.finish(60)
    assert p.left(12.0) == pytest.approx(8.0)            # 60 % done in 12 s: 40 % left, 8 s
    assert p.line(12.0) == "# 1/3 tasks, 12 s, about 8 s left"
    p.finish(30)
    p.finish(10)
    assert p.left(20.0) == 0


def test_lines_on_a_stream_every_interval():
    out = io.StringIO()
    p = Progress([4, 4], stream=out)
    p.finish(4)
    p.show()
    p.show()                                   # within the interval: nothing more
    assert out.getvalue().count("\n") == 1 and out.getvalue().startswith("# 1/2 tasks, ")
