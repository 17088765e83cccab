"""The simulator's grid helpers against brute force: the up-front cuts, running-sum progressions, located pieces."""

import numpy as np
import pytest

from pyhccl.verify import atoms
from pyhccl.verify.atoms import Grid, Moves, cut_keys, progressions


def _regions(rng, n):
    key = rng.integers(0, 200, n) + 1000 * rng.integers(0, 4, n)      # four "buffers", regions may overlap
    cnt = rng.integers(1, 9, n)
    rep = rng.integers(1, 5, n)
    stride = np.where(rep > 1, cnt + rng.integers(0, 6, n), 0)
    return key, cnt, rep, stride


def _ends(key, cnt, rep, stride):
    return [k + j * s + e for k, c, r, s in zip(key, cnt, rep, stride) for j in range(r) for e in (0, c)]


@pytest.mark.parametrize("chunk", [1, 4, 1 << 23])
@pytest.mark.parametrize("seed", range(6))
def test_cut_keys_are_every_piece_end_and_extra(monkeypatch, chunk, seed):
    monkeypatch.setattr(atoms, "_CUT_CHUNK", chunk)      # batches of a few pieces: the seams between batches
    rng = np.random.default_rng(seed)
    regions = _regions(rng, int(rng.integers(1, 40)))
    extra = rng.integers(0, 4000, int(rng.integers(0, 10)))
    want = np.unique(np.r_[_ends(*regions), extra]).astype(np.int64)
    np.testing.assert_array_equal(cut_keys(*regions, extra), want)


def test_cut_keys_of_no_region():
    none = np.zeros(0, np.int64)
    np.testing.assert_array_equal(cut_keys(none, none, none, none, np.array([5, 1, 5])), [1, 5])


def test_progressions():
    first, step, n = np.array([3, -2, 10]), np.array([2, 0, -3]), np.array([3, 1, 4])
    want = np.concatenate([f + s * np.arange(k) for f, s, k in zip(first, step, n)])
    np.testing.assert_array_equal(progressions(first, step, n), want)


@pytest.mark.parametrize("single", [False, True], ids=["strided", "one piece a move"])
@pytest.mark.parametrize("batch", [1, 3, 1 << 22])
@pytest.mark.parametrize("seed", range(6))
def test_pieces_found_where_the_guess_fails(monkeypatch, batch, seed, single):
    """Atoms cut unevenly (extra cuts inside some pieces): every piece's first and one-past-last atom."""
    monkeypatch.setattr(atoms, "_PIECE_BATCH", batch)
    rng = np.random.default_rng(seed)
    key, cnt, rep, stride = regions = _regions(rng, 12)
    if single:
        regions = key, cnt, np.ones_like(rep), np.zeros_like(stride)
    keys = cut_keys(*regions, rng.integers(0, 4000, 30 - 25 * single))
    g = Grid(keys, use_mask=False)
    lo, hi, kb, one = g.pieces(Moves(*regions))
    ends = np.array(_ends(*regions)).reshape(-1, 2)
    np.testing.assert_array_equal(kb, ends[:, 0])
    np.testing.assert_array_equal(keys[lo], ends[:, 0])
    np.testing.assert_array_equal(keys[hi], ends[:, 1])
    assert one == bool((hi - lo == 1).all())


@pytest.mark.parametrize("rep", [1, 2])
def test_a_piece_whose_end_is_not_cut_is_an_error(rep):
    g = Grid(np.array([0, 2, 4, 6, 8]), use_mask=False)
    with pytest.raises(AssertionError, match="not atom boundaries"):
        g.pieces(Moves(np.array([2]), np.array([3]), np.array([rep]), np.array([4 * (rep > 1)])))


def test_heap_restores_numpys_huge_pages_even_when_nested():
    from pyhccl.verify.heap import _hugepage_switch, heap
    switch = _hugepage_switch()
    if switch is None:
        pytest.skip("this numpy has no huge-page switch")
    before = switch(True)
    try:
        with heap():
            with heap():
                assert switch(False) is False       # off inside
            assert switch(False) is False           # still off: the outer heap is open
        assert switch(True) is True                 # back on after the outermost
    finally:
        switch(before)


class _FakeLibc:
    """glibc's malloc calls, recorded (for :func:`heap` without touching the process's heap)."""

    def __init__(self):
        self.trims = 0

    def mallopt(self, param, value):
        return 1

    def malloc_trim(self, pad):
        self.trims += 1
        return 1


@pytest.mark.parametrize("free, trims", [(0, 1), (1 << 20, 0), (1 << 30, 1)])
def test_heap_trims_on_exit_only_what_is_worth_giving_back(monkeypatch, free, trims):
    """Up to _KEEP_FREE (256 MiB) free is kept for the next simulation; more is given back; 0 (glibc
    cannot say, or nothing free) trims as before."""
    import pyhccl.verify.heap as h
    libc = _FakeLibc()
    monkeypatch.setattr(h, "_libc", lambda: libc)
    monkeypatch.setattr(h, "free_bytes", lambda: free)
    with h.heap():
        pass
    assert libc.trims == trims


def test_a_guess_past_the_last_key_is_searched_for():
    """Piece 0 spans two atoms, piece 1 one: the guess for piece 1 ends past the grid (clipped, it would match)."""
    g = Grid(np.array([0, 1, 2, 4, 6]), use_mask=False)
    lo, hi, _, one = g.pieces(Moves(np.array([0]), np.array([2]), np.array([2]), np.array([4])))
    np.testing.assert_array_equal(lo, [0, 3])
    np.testing.assert_array_equal(hi, [2, 4])
    assert not one


@pytest.mark.parametrize("seed", range(5))
def test_batches_cover_every_index_once_cut_only_where_allowed(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 10, 200)
    at = np.flatnonzero(np.r_[True, rng.random(199) < 0.3])
    runs = atoms.batches(sizes, 25, at)
    assert runs[0][0] == 0 and runs[-1][1] == len(sizes)
    assert all(b == c for (_, b), (c, _) in zip(runs, runs[1:]))          # consecutive, no gap, no overlap
    assert {a for a, _ in runs} <= set(at.tolist())
    assert all(sizes[a:b].sum() <= 25 + 9 for a, b in atoms.batches(sizes, 25))     # cut anywhere: about 25 each
    assert atoms.batches(sizes, int(sizes.sum()) + 1, at) == [(0, len(sizes))]
    ones = rng.integers(1, 5, 20)
    assert atoms.batches(ones, 1) == [(i, i + 1) for i in range(20)]      # a limit below every item: one each
    assert atoms.batches(sizes[:0], 25) == []
