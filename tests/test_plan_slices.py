"""Slices: HCCL's two slicing conventions, and progressions of slices as strided regions."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyhccl.plan import Buf, Slices
from pyhccl.plan.ir import Region
from pyhccl.plan.slices import VSlices


def _floor_tail(count, n):
    size = count // n
    return [(j * size, size if j < n - 1 else count - size * (n - 1)) for j in range(n)]


def _ceil(count, n):
    c = -(-count // n)
    return [(j * c, max(0, min(c, count - j * c))) for j in range(n)]


@pytest.mark.parametrize("count, n, counts", [
    (5, 4, [2, 2, 1, 0]),          # the reference's SplitData example
    (10, 4, [3, 3, 3, 1]),
    (3, 5, [1, 1, 1, 0, 0]),
])
def test_ceil_examples(count, n, counts):
    s = Slices.ceil(0, count, n)
    assert [s.count(j) for j in range(n)] == counts


@given(st.integers(0, 500), st.integers(1, 40), st.integers(0, 100))
def test_conventions_match_definitions(count, n, base):
    for make, ref in ((Slices.floor_tail, _floor_tail), (Slices.ceil, _ceil)):
        s = make(base, count, n)
        assert s.total == count
        for j, (off, c) in enumerate(ref(count, n)):
            assert s.count(j) == c
            r = s.region(Buf.OUTPUT, j)
            assert (r is None) if c == 0 else (r.offset, r.count) == (base + off, c)


@settings(max_examples=300)
@given(st.integers(0, 300), st.integers(1, 33), st.data())
def test_regions_cover_progression(count, n, data):
    s = data.draw(st.sampled_from([Slices.floor_tail(7, count, n), Slices.ceil(7, count, n)]))
    step = data.draw(st.integers(1, n))
    start = data.draw(st.integers(0, n - 1))
    k = data.draw(st.integers(0, (n - 1 - start) // step + 1))
    got = [p for r in s.regions(Buf.OUTPUT, start, step, k) for p in r.pieces()]
    want = []
    for j in range(start, start + step * k, step):
        r = s.region(Buf.OUTPUT, j)
        if r is not None:
            want.append((r.offset, r.count))
    # contiguous runs may be merged into one piece; compare element by element
    flat = lambda ps: [o + i for o, c in ps for i in range(c)]
    assert flat(got) == flat(want)
    assert len(s.regions(Buf.OUTPUT, start, step, k)) <= 2


def test_slices_still_refuse_a_negative_offset():
    """Slices make their regions unchecked only where the offsets cannot be negative."""
    sl = Slices(0, 4, 10, 4, 0)
    assert sl.region(Buf.OUTPUT, 1, delta=-5) == Region(Buf.OUTPUT, 5, 10)
    with pytest.raises(ValueError, match="offset >= 0"):
        sl.region(Buf.OUTPUT, 1, delta=-20)
    with pytest.raises(ValueError, match="offset >= 0"):
        sl.regions(Buf.OUTPUT, 0, 2, 2, delta=-5)
    with pytest.raises(ValueError, match="offset >= 0"):
        VSlices((3, 9), (2, 2)).region(Buf.SCRATCH, 0, delta=-4)
