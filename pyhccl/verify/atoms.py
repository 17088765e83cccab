"""The simulator's atoms: one grid of keys over every buffer of every rank (the plans' rows: :mod:`.rows`).

Buffer ``b`` of rank ``r`` (in 0, out 1, scr 2) is ``bid = 3 r + b``; element ``x`` of it has the
key ``r * span + at[b] + x`` (a rank's input, output and scratch one after the other, ``span`` keys a
rank), so that one sorted array of keys (the grid) cuts every buffer of every rank into atoms at
once, and a region of any rank is found with one ``searchsorted``.
The grid is cut at both ends of every piece of every region (:func:`cut_keys`): once, before the
run, or step by step as the simulator's steps come (:meth:`Grid.refine`); :meth:`Grid.pair`
aligns a move's (a matched send and receive, a local reduce or copy) two sides atom by atom of
the destination, each reading the source atom that holds it, and cuts the destination only where
it would take data from two source atoms, so that the simulator (:mod:`pyhccl.verify.sim`) moves
values with numpy indexing, every rank at once.
Between steps :meth:`Grid.coalesce` merges atoms that hold one run of data, and a move cuts them
again where it needs.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["Moves", "rank_keys", "ranges", "progressions", "batches", "unique", "cut_keys", "Grid"]


@lru_cache(maxsize=8)
def rank_keys(n: int, seed: int) -> np.ndarray:
    """Per-rank random odd keys: a sum of keys says which contributions an atom holds."""
    return np.random.default_rng(seed).integers(1, 2**62, size=n, dtype=np.int64) | np.int64(1)


def ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``concatenate([arange(a, b) for a, b in zip(lo, hi)])`` and, per element, the index of its range."""
    n = np.maximum(hi - lo, 0)
    if len(n) and (n == 1).all():
        return lo, np.arange(len(lo))
    owner = np.repeat(np.arange(len(lo)), n)
    if not len(owner):
        return owner.astype(np.int64), owner
    some = np.flatnonzero(n)
    first, c = lo[some], n[some]
    idx = np.ones(len(owner), np.int64)         # a running sum: each range's first element jumps from the last one
    idx[np.cumsum(c) - c] = first - np.concatenate(([0], (first + c - 1)[:-1]))
    return np.cumsum(idx, out=idx), owner


def progressions(first: np.ndarray, step: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``concatenate([first[i] + step[i] * arange(n[i]) for i ...])`` (every ``n[i] >= 1``), as one running sum."""
    out = np.repeat(step, n)
    if len(out):
        out[np.cumsum(n) - n] = first - np.concatenate(([0], (first + step * (n - 1))[:-1]))
        np.cumsum(out, out=out)
    return out


def batches(sizes: np.ndarray, limit: int, at: np.ndarray | None = None) -> list[tuple[int, int]]:
    """Consecutive index ranges ``[a, b)`` of ``sizes`` holding about ``limit`` in sum each (an item larger
    than ``limit`` alone), cut only before the indices ``at`` (sorted; default: any)."""
    if not len(sizes):
        return []
    start = np.cumsum(sizes) - sizes
    at = np.arange(len(sizes)) if at is None else at
    cuts = np.unique(at[np.searchsorted(start[at], np.arange(0, int(start[-1] + sizes[-1]) + 1, limit),
                                        side="right") - 1])
    return list(zip(cuts.tolist(), cuts[1:].tolist() + [len(sizes)]))


class Moves:
    """One side of a set of moves: region ``i`` is ``rep[i]`` pieces of ``cnt[i]`` keys from ``key[i]``."""

    def __init__(self, key: np.ndarray, cnt: np.ndarray, rep: np.ndarray, stride: np.ndarray) -> None:
        self.key, self.cnt, self.rep, self.stride = key, cnt, rep, stride

    def keys_at(self, move: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The key of stream offset ``u`` of each ``move``."""
        c = self.cnt[move]
        q = u // c
        return self.key[move] + q * self.stride[move] + (u - q * c)


_BLOCK = 8192


def search(keys: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """``np.searchsorted(keys, needles)``, block by block within each block's window of ``keys``.

    The needles of a step come nearly sorted (rank by rank); one binary search over tens of
    millions of keys misses the cache at every level, a search within a block's window does not.
    """
    if len(needles) < 8 * _BLOCK:
        return np.searchsorted(keys, needles)
    starts = np.arange(0, len(needles), _BLOCK)
    lo = np.searchsorted(keys, np.minimum.reduceat(needles, starts))
    hi = np.searchsorted(keys, np.maximum.reduceat(needles, starts), side="right")
    out = np.empty(len(needles), np.int64)
    for a, w0, w1 in zip(starts.tolist(), lo.tolist(), hi.tolist()):
        out[a:a + _BLOCK] = w0 + np.searchsorted(keys[w0:w1], needles[a:a + _BLOCK])
    return out


def unique(a: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy's hash-based unique is slower on tens of millions of int64 keys)."""
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if len(a) else a


_PIECE_BATCH = 1 << 23     # pieces located at a time: the guesses' temporaries stay ~400 MiB
_CUT_CHUNK = 1 << 23        # pieces per batch of cut_keys: 2 x 8 M keys, 128 MiB, whatever the plans' size


def cut_keys(key: np.ndarray, cnt: np.ndarray, rep: np.ndarray, stride: np.ndarray,
             extra: np.ndarray) -> np.ndarray:
    """The grid's keys: both ends of every piece of every region (``rep >= 1`` pieces of ``cnt`` keys from
    ``key``, ``stride`` apart), and ``extra``; sorted, unique.

    The regions go by first key in batches of about ``_CUT_CHUNK`` pieces that no region straddles; in a
    batch the ends come out as one run per region (a running sum of alternating piece lengths and gaps),
    which a stable sort (timsort) merges faster than it sorts scattered keys.
    """
    order = np.lexsort((stride, rep, cnt, key))
    key, cnt, rep, stride = key[order], cnt[order], rep[order], stride[order]
    keep = np.concatenate(([True], (key[1:] != key[:-1]) | (cnt[1:] != cnt[:-1]) | (rep[1:] != rep[:-1])
                           | (stride[1:] != stride[:-1]))) if len(key) else np.zeros(0, bool)
    key, cnt, rep, stride = key[keep], cnt[keep], rep[keep], stride[keep]
    if not len(key):
        return unique(extra)
    last = key + (rep - 1) * stride + cnt
    free = np.flatnonzero(np.concatenate(([True], np.maximum.accumulate(last)[:-1] <= key[1:])))     # no region straddles
    runs = batches(rep, _CUT_CHUNK, free)
    extra = np.sort(extra, kind="stable")      # a few sorted runs (bounds, inputs, outputs): merged, not sorted anew
    at = np.concatenate(([0], np.searchsorted(extra, key[[a for a, _ in runs[1:]]]), [len(extra)]))
    out: list[np.ndarray] = []
    for i, (a, b) in enumerate(runs):
        r = rep[a:b]
        total = int(r.sum())
        ends = np.empty(2 * total + at[i + 1] - at[i], np.int64)
        ends[0:2 * total:2] = np.repeat(stride[a:b] - cnt[a:b], r)
        ends[1:2 * total:2] = np.repeat(cnt[a:b], r)
        ends[2 * (np.cumsum(r) - r)] = key[a:b] - np.concatenate(([0], last[a:b][:-1]))
        np.cumsum(ends[:2 * total], out=ends[:2 * total])
        ends[2 * total:] = extra[at[i]:at[i + 1]]
        ends.sort(kind="stable")
        new = np.empty(len(ends), bool)
        new[0] = not out or out[-1][-1] != ends[0]
        np.not_equal(ends[1:], ends[:-1], out=new[1:])
        out.append(ends[new])
    return np.concatenate(out)


# coalesce: grids from 2^16 atoms; a sample first above 2^20; merged where a fifth of the atoms go
_COALESCE_ABOVE, _SAMPLE_ABOVE, _SAMPLE, _WORTH = 1 << 16, 1 << 20, 1 << 14, 0.2


class _Uncut(Exception):
    """Piece ends inside atoms of a coalesced grid (:meth:`Grid.pieces`)."""

    def __init__(self, ends: np.ndarray) -> None:
        self.ends = ends


def _among(x: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether each of ``x`` is in the sorted ``keys``."""
    at = np.searchsorted(keys, x)
    return keys.take(np.minimum(at, len(keys) - 1)) == x if len(keys) else np.zeros(len(x), bool)


class Grid:
    """The sorted keys that cut every buffer of every rank into atoms, and each atom's value.

    Atom ``a`` is the keys ``[keys[a], keys[a+1])``. Its value: ``card`` (number of contributions),
    ``key`` (wrapping sum of the contributing ranks' keys), ``mask`` (the ranks as a bit set, only
    when ``use_mask``), ``origin`` (the input index of its first element), ``writer`` (the last
    step that wrote it, -1 for none; only reported).
    """

    def __init__(self, keys: np.ndarray, use_mask: bool, reserve=None) -> None:
        self.keys = keys
        self.reserve = reserve      # called with the atoms a cut adds and the grid's, before the cut
        n = len(keys)
        self.card, self.key, self.origin = (np.zeros(n, np.int64) for _ in range(3))
        self.mask = np.zeros(n if use_mask else 0, np.int64)
        self.writer = np.full(n, -1, np.int32)
        self.use_mask = use_mask
        self.loose = False          # True once coalesced: a region's ends may lie inside atoms

    def coalesce(self, keep: np.ndarray) -> int:
        """Merge each atom into the one before it where it continues that one's data: the same contributions,
        its origin where that one's ends (whichever step wrote it: the merged atom keeps the first's writer);
        never at the sorted keys ``keep`` (the buffers' bounds), never where no step has written (a rank's
        input is read, and what is still to be written is written, as cut up front). Returns the number of
        atoms merged away. Regions whose ends this removes are cut again when they move (:meth:`pair`)."""
        k = self.keys
        if len(k) < _COALESCE_ABOVE:        # few atoms: moving them costs less than cutting them again
            return 0
        if len(k) > _SAMPLE_ABOVE:      # a sample first: a pass over a large grid that merges little is not worth it
            at = np.random.default_rng(len(k)).integers(0, len(k) - 1, _SAMPLE)
            if self._continues(at).mean() < _WORTH:
                return 0
        merged = np.flatnonzero(self._continues(np.arange(len(k) - 1))) + 1
        merged = merged[~_among(k[merged], keep)]
        if len(merged) < _WORTH * len(k):
            return 0
        stay = np.ones(len(k), bool)
        stay[merged] = False
        for name in ("keys", "card", "key", "origin", "writer") + (("mask",) if self.use_mask else ()):
            setattr(self, name, getattr(self, name)[stay])
        self.loose = True
        return len(merged)

    def _continues(self, at: np.ndarray) -> np.ndarray:
        """Whether atom ``at + 1`` continues atom ``at``'s value (:meth:`coalesce`)."""
        b = at + 1
        same = (self.card[b] == self.card[at]) & (self.key[b] == self.key[at])
        if self.use_mask:
            same &= self.mask[b] == self.mask[at]
        return same & (self.writer[b] >= 0) & (self.origin[b] == self.origin[at] + self.keys[b] - self.keys[at])

    def values(self) -> list[np.ndarray]:
        """The fields a copy moves."""
        return [self.card, self.key, self.origin] + ([self.mask] if self.use_mask else [])

    def refine(self, new: np.ndarray) -> None:
        """Cut the atoms at the keys ``new`` (the pieces keep their values, their origins move on)."""
        keys = self.keys
        if len(new) > 1 and not (new[1:] > new[:-1]).all():
            new = unique(new)
        if len(new) > len(keys):        # many new keys (a step's cuts on a grid cut by step): the grid's among them
            at = np.searchsorted(new, keys)
            have = new.take(np.minimum(at, len(new) - 1)) == keys
            if have.any():
                new = np.delete(new, at[have])
                at = np.searchsorted(new, keys)
            inside = np.diff(np.concatenate((at, [len(new)])))          # new keys in each atom
        else:
            at = search(keys, new)
            fresh = keys.take(np.minimum(at, len(keys) - 1)) != new
            new = new[fresh]
            inside = np.bincount(at[fresh] - 1, minlength=len(keys))
        if not len(new):
            return
        if self.reserve is not None:
            self.reserve(len(new), len(keys))
        cut = np.repeat(np.arange(len(keys)), inside + 1)         # every atom of the new grid: the one it cuts
        pos = np.arange(len(new)) + np.repeat(np.arange(1, len(keys) + 1), inside)     # where the new keys go
        for name in ("card", "key", "writer") + (("mask",) if self.use_mask else ()):
            setattr(self, name, getattr(self, name)[cut])
        self.keys = keys = keys[cut]
        origin = self.origin[cut]
        origin[pos] += new - keys[pos]
        keys[pos] = new
        self.origin = origin

    def pieces(self, side: Moves, lean: bool = False) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, bool]:
        """Every piece of ``side`` in stream order: its first atom, one past its last atom, its first key, and
        whether every piece is one atom (``lean``: the last two None where the pieces come in several batches and
        each is one atom, when they are ``lo + 1`` and ``keys[lo]``: a large move's arrays are not written, nor
        their memory touched, when only the first atoms are read; :meth:`_full` makes them).

        Every piece's ends must be atom boundaries already (:func:`cut_keys` cuts at them all; after a
        :meth:`coalesce`, the ends it lacks are raised as :class:`_Uncut` for :meth:`pair` to cut). A move's first
        key is searched for; where every move is one piece, its end is guessed one atom on, else its pieces
        are guessed to lie as its first one does, the same number of atoms apart. A guess is checked against
        the keys; pieces where it fails are searched for.
        """
        keys = self.keys
        lo0 = search(keys, side.key)
        if (side.rep == 1).all():                   # one piece a move: guessed one atom, else searched
            end = side.key + side.cnt
            hi0 = lo0 + 1
            miss = keys.take(hi0, mode="clip") != end
            one = not miss.any()
            if not one:
                hi0[miss] = search(keys, end[miss])
            self._cut_at(np.concatenate((side.key, end)),
                         np.concatenate((keys.take(lo0, mode="clip"), keys.take(hi0, mode="clip"))))
            return lo0, hi0, side.key, one
        w = search(keys, side.key + side.cnt) - lo0
        step = np.where(side.rep > 1, search(keys, side.key + side.stride) - lo0, 0)
        first = np.cumsum(side.rep) - side.rep
        runs = batches(side.rep, _PIECE_BATCH)
        lo = np.empty(int(side.rep.sum()) if len(runs) > 1 else 0, np.int64)
        hi = kb = None
        one = True
        for a, b in runs:                       # moves [a, b): a batch of pieces
            m, r = slice(a, b), side.rep[a:b]
            clo, chi = progressions(lo0[m], step[m], r), progressions(lo0[m] + w[m], step[m], r)
            ckb = progressions(side.key[m], side.stride[m], r)
            cke = progressions(side.key[m] + side.cnt[m], side.stride[m], r)
            miss = (keys.take(clo, mode="clip") != ckb) | (keys.take(chi, mode="clip") != cke) | (chi >= len(keys))
            if miss.any():
                clo[miss], chi[miss] = search(keys, ckb[miss]), search(keys, cke[miss])
                self._cut_at(np.concatenate((ckb[miss], cke[miss])),
                             np.concatenate((keys.take(clo[miss], mode="clip"), keys.take(chi[miss], mode="clip"))))
                one = one and bool((chi - clo == 1).all())
            else:
                one = one and bool((w[m] == 1).all())
            if len(runs) == 1:
                return clo, chi, ckb, one
            p = int(first[a])
            lo[p:p + len(clo)] = clo
            if hi is None and not (lean and one):       # the batches before were one atom a piece
                hi, kb = np.empty(len(lo), np.int64), np.empty(len(lo), np.int64)
                hi[:p], kb[:p] = lo[:p] + 1, keys[lo[:p]]
            if hi is not None:
                hi[p:p + len(clo)], kb[p:p + len(clo)] = chi, ckb
        return lo, hi, kb, one

    def _full(self, found: tuple) -> tuple:
        """:meth:`pieces`'s answer with the ends and first keys a lean one left out (every piece one atom)."""
        lo, hi, kb, one = found
        return found if hi is not None else (lo, lo + 1, self.keys[lo], one)

    def _cut_at(self, ends: np.ndarray, found: np.ndarray) -> None:
        """Raise :class:`_Uncut` with the piece ``ends`` the grid lacks (``found``: the keys found for them)."""
        lacking = found != ends
        if lacking.any():
            if not self.loose:
                raise AssertionError("a piece's ends are not atom boundaries (not cut up front?)")
            raise _Uncut(ends[lacking])

    def locate(self, side: Moves, found: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Atom indices of every move of ``side`` in stream order, their move, and each atom's stream offset
        (``found``: its :meth:`pieces`, where the grid has not changed since)."""
        lo, hi, kb, _ = found or self.pieces(side)
        idx, piece = ranges(lo, hi)
        move = np.repeat(np.arange(len(side.rep)), side.rep)[piece]
        k = piece - (np.cumsum(side.rep) - side.rep)[move]
        return idx, move, k * side.cnt[move] + self.keys[idx] - kb[piece]

    def pair(self, a: Moves, b: Moves) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Both sides of a set of moves (equal sizes), atom by atom of the destination ``b``:
        ``(atoms of a, atoms of b, move, origin shift)``.

        An atom of ``b`` reads the atom of ``a`` that holds it, ``shift`` elements into it (None: all 0); where
        an atom of ``b`` would take data from two atoms of ``a``, ``b`` is cut there first.
        """
        alike = bool((a.cnt == b.cnt).all() and (a.rep == b.rep).all())
        while True:
            try:
                found_a, found_b = self.pieces(a, alike), self.pieces(b, alike)
                break
            except _Uncut as uncut:        # ends that a coalesce merged away: cut there again
                self.refine(uncut.ends)
        la, _, _, one_a = found_a
        lb, _, _, one_b = found_b
        if one_a and one_b and alike:       # piece by piece, atom by atom
            return la, lb, np.repeat(np.arange(len(a.rep)), a.rep), None
        found_a, found_b = self._full(found_a), self._full(found_b)
        loc_a = loc_b = None        # located on the grid as it is (None: to locate)
        if one_a and (a.rep == 1).all() and (b.rep == 1).all():     # one source atom a move: read at its offset
            ib, mb = ranges(lb, found_b[1])
            shift = self.keys[ib] - found_b[2][mb]
            return la[mb], ib, mb, shift if shift.any() else None
        if one_a:           # each source piece one atom: a destination atom reads the piece that holds it
            ib, mb, ub = loc_b = self.locate(b, found_b)
            c = a.cnt[mb]
            k = ub // c
            shift = ub - k * c
            if (shift + self.keys[ib + 1] - self.keys[ib] <= c).all():
                return la[(np.cumsum(a.rep) - a.rep)[mb] + k], ib, mb, shift if shift.any() else None
        elif one_b:         # each destination piece one atom: it reads one source atom, if they align
            ia, ma, ua = loc_a = self.locate(a, found_a)
            mb = np.repeat(np.arange(len(b.rep)), b.rep)
            if len(ia) == len(lb) and (ma == mb).all() and (ua == (np.arange(len(mb)) - (np.cumsum(b.rep) - b.rep)[mb])
                                                             * b.cnt[mb]).all():
                return ia, lb, mb, None
        while True:
            ia, ma, ua = loc_a or self.locate(a, found_a)
            ib, mb, ub = loc_b or self.locate(b, found_b)
            if len(ia) == len(ib) and (ma == mb).all() and (ua == ub).all():
                return ia, ib, ma, None
            start = np.cumsum(a.cnt * a.rep) - a.cnt * a.rep
            pa, pb = start[ma] + ua, start[mb] + ub          # stream positions, increasing
            at = np.searchsorted(pb, pa)
            cut = pb[np.minimum(at, len(pb) - 1)] != pa
            if not cut.any():
                j = np.searchsorted(pa, pb, side="right") - 1
                return ia[j], ib, mb, pb - pa[j]
            before = len(self.keys)
            self.refine(b.keys_at(ma[cut], ua[cut]))
            loc_a = loc_b = found_a = found_b = None
            if len(self.keys) == before:
                raise AssertionError("the two sides of a move do not align and no cut helps (sizes differ?)")
