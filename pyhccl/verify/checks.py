"""The simulator's structural checks and its moves, computed for every rank and step at once.

Structural faults (an action that is not a transfer or not a local operation, a bad peer, sends
and receives of a pair of ranks that differ in number or size, a region out of bounds, local
sizes that differ) are found here from the flat arrays; the simulator (:mod:`pyhccl.verify.sim`)
raises each at its step, naming the rank. The moves (a matched send and receive, a local reduce
or copy) that run before the first fault are grouped by step, and locals by their index in the
step, so that the simulator runs each group over every rank at once.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from ..plan.ir import Buf, Region
from .atoms import Moves, unique
from .rows import BUF_NAMES, COPY, RECV, REDUCE, SEND, PlanArrays

__all__ = ["Checks", "region_text"]

_BUFS = (Buf.INPUT, Buf.OUTPUT, Buf.SCRATCH)
_KEY_LIMIT = 2**62
_GROUPS = None          # (tests: the most groups keyed at once; None: as many as the keys hold)


def region_text(buf: int, off: int, cnt: int, rep: int, stride: int) -> str:
    """A region of the flat arrays as the IR prints it."""
    return str(Region(_BUFS[buf], off, cnt, rep, stride if rep > 1 else None))


def _first_step(ops: PlanArrays, mask: np.ndarray) -> int:
    rows = np.flatnonzero(mask)
    return int(ops.step[rows[0]]) if len(rows) else ops.nsteps


def _overlaps(start: np.ndarray, end: np.ndarray, is_dst: np.ndarray, p: np.ndarray, g: np.ndarray,
              cut: np.ndarray) -> None:
    """Hulls ``[start, end)`` (keys ascending with their group ``g``; ``p``: their row's place in its group's
    locals): lower ``cut[g]`` to the first place where a hull starts inside an earlier write hull of its group,
    or a write hull inside an earlier read hull."""
    order = np.argsort(start, kind="stable")
    start, end, is_dst, p, g = start[order], end[order], is_dst[order], p[order], g[order]
    at = np.arange(len(start))
    for writes, hit in ((is_dst, np.ones(len(start), bool)), (~is_dst, is_dst)):
        e = np.where(writes, end, -1)
        reach = np.maximum.accumulate(e)
        who = np.maximum.accumulate(np.where(e == reach, at, 0))
        prev, partner = np.concatenate(([-1], reach[:-1])), np.concatenate(([0], who[:-1]))
        flag = hit & (start < prev)
        np.minimum.at(cut, g[flag], np.minimum(p[flag], p[partner[flag]]))


def _tangled(lo: np.ndarray, hi: np.ndarray, is_dst: np.ndarray, g: np.ndarray, ngroups: int) -> np.ndarray:
    """Per group: whether its hulls ``[lo, hi)`` (sources, then destinations, each in group order) may meet where
    :func:`_overlaps` looks. Not where its destinations come one after another, each past the last, and all its
    sources lie before or after all its destinations (a template's usual step): no hull starts inside a
    destination's, and no destination inside a source's."""
    out = np.zeros(ngroups, bool)
    d = np.flatnonzero(is_dst)
    gd = g[d]
    out[gd[1:][(gd[1:] == gd[:-1]) & (lo[d][1:] < hi[d][:-1])]] = True
    ranges = []
    for rows in (np.flatnonzero(~is_dst), d):
        first, last = np.full(ngroups, np.iinfo(np.int64).max), np.full(ngroups, np.iinfo(np.int64).min)
        if len(rows):
            gr = g[rows]
            at = np.flatnonzero(np.concatenate(([True], gr[1:] != gr[:-1])))
            first[gr[at]] = np.minimum.reduceat(lo[rows], at)
            last[gr[at]] = np.maximum.reduceat(hi[rows], at)
        ranges.append((first, last))
    (s0, s1), (d0, d1) = ranges
    return out | ((s0 < d1) & (d0 < s1))


class StaticFaults(NamedTuple):
    """Per row, what it shows by itself (:func:`static_faults`); ``oob`` and ``inside`` per side (source,
    destination)."""

    not_xfer: np.ndarray            # among the transfers, not a send or a receive with its region
    bad_peer: np.ndarray            # a transfer's peer outside range(n) or its own rank
    not_local: np.ndarray           # among the local operations, not a reduce or a copy with both regions
    bad_size: np.ndarray            # a local operation whose two sides differ in size
    oob: list                       # a region past its buffer's end
    inside: list                    # a region that lies within its buffer
    ok_x: np.ndarray                # the transfers with none of these faults


def static_faults(ops: PlanArrays, n: int, sizes: np.ndarray) -> StaticFaults:
    """Every row's faults that no other row enters into (``n`` ranks; ``sizes``: in, out, scratch)."""
    xfer, loc = ops.local == 0, ops.local == 1
    k, src, dst = ops.kind, ops.src, ops.dst
    not_xfer = xfer & ~(((k == SEND) & (src.buf >= 0)) | ((k == RECV) & (dst.buf >= 0)))
    ok_x = xfer & ~not_xfer
    bad_peer = ok_x & ((ops.peer < 0) | (ops.peer >= n) | (ops.peer == ops.rank))
    ok_x &= ~bad_peer
    xside = np.where(k == SEND, 0, 1)           # which side a transfer's region is on
    not_local = loc & ~(((k == REDUCE) | (k == COPY)) & (src.buf >= 0) & (dst.buf >= 0))
    bad_size = loc & ~not_local & (src.size != dst.size)
    ok_l = loc & ~not_local & ~bad_size
    oob, inside = [], []
    for i, side in enumerate((src, dst)):
        has = np.where(xfer, ok_x & (xside == i), ok_l) & (side.size > 0)
        oob.append(has & (side.end > sizes[np.maximum(side.buf, 0)]))
        inside.append(has & ~oob[i])
    return StaticFaults(not_xfer, bad_peer, not_local, bad_size, oob, inside, ok_x)


def static_text(ops: PlanArrays, f: StaticFaults, n: int, sizes: np.ndarray, row: int) -> str | None:
    """The message of ``row``'s first fault of ``f``, None if it has none."""
    a = ops.action(row)
    if f.not_xfer[row]:
        return f"'{a}' is not a transfer"
    if f.bad_peer[row]:
        return f"'{a}' names peer {a.peer}; expecting a rank in range({n}) other than {int(ops.rank[row])}"
    if f.not_local[row]:
        return f"'{a}' is not a local operation"
    if f.bad_size[row]:
        return f"'{a}' has {a.src.size} source and {a.dst.size} destination elements"
    for i, side in enumerate((ops.src, ops.dst)):
        if f.oob[i][row]:
            b = int(side.buf[row])
            text = region_text(b, int(side.off[row]), int(side.cnt[row]), int(side.rep[row]), int(side.stride[row]))
            return f"region {text} is out of bounds ({BUF_NAMES[b]} holds {int(sizes[b])} elements)"
    return None


class Checks:
    """Static faults per row, the transfer matching, and the moves of every step."""

    def __init__(self, sim, ops: PlanArrays, *, batches: bool = True) -> None:
        """``batches``: also group each step's local rows into the batches the grid runs (:meth:`batch_locals`)."""
        self.sim, self.ops = weakref.proxy(sim), ops     # no cycle: a finished simulation is freed at once
        xfer, loc, src = ops.local == 0, ops.local == 1, ops.src
        self.static = f = static_faults(ops, sim.n, sim.sizes)
        self.match_steps = self._match(f.ok_x)
        self.xbad_step = min(_first_step(ops, f.not_xfer | f.bad_peer), min(self.match_steps, default=ops.nsteps),
                             _first_step(ops, xfer & (f.oob[0] | f.oob[1])))
        static_l = f.not_local | f.bad_size | (loc & (f.oob[0] | f.oob[1]))
        self.lbad_step = _first_step(ops, static_l)
        limit = min(self.xbad_step, self.lbad_step + 1)
        # transfer moves, in (step, sender, receiver, order) order
        keep = (ops.step[self.pairs[0]] < limit) & (src.size[self.pairs[0]] > 0)
        self.sends, self.recvs = self.pairs[0][keep], self.pairs[1][keep]
        self.xstart = np.searchsorted(ops.step[self.sends], np.arange(ops.nsteps + 1))
        self._local_rows = loc & (ops.step < limit)           # (limit <= xbad_step)
        self._static_l = static_l
        if batches:
            self.batch_locals()

    def batch_locals(self) -> None:
        """The local rows in the batches the grid runs (``lrows`` ... ``lstart``), and ``lead`` (:meth:`_joins`)."""
        ops, static_l = self.ops, self._static_l
        # local rows up to the first step with a static fault, by (step, index, rank); a rank's run of
        # reduces into one destination from sources outside it (a reduction in rank order) keys as its first
        rows = np.flatnonzero(self._local_rows)
        j = int(ops.index[rows].max(initial=0)) + 1
        key = ops.step[rows] * j + ops.index[rows]
        join = self._joins(rows, static_l[rows])
        starts = np.flatnonzero(~join)
        run = np.cumsum(~join) - 1
        runkey = key[starts][run] if len(rows) else key
        order = np.argsort(runkey, kind="stable")
        rows = rows[order]
        self.lrows, self.lstatic, self.lkey, self.lrunkey = rows, static_l[rows], key[order], runkey[order]
        self.ljoin = join[order]
        self.lstart = np.searchsorted(ops.step[rows], np.arange(ops.nsteps + 1))

    def _joins(self, rows: np.ndarray, static: np.ndarray) -> np.ndarray:
        """Per local row (in (step, rank, index) order): it continues the previous row's run.

        A run is a rank's leading rows of a step that touch disjoint data (:meth:`_disjoint_lead`), then
        runs of reduces into one destination region, each source outside that region."""
        ops, src, dst = self.ops, self.ops.src, self.ops.dst
        if not len(rows):
            self.lead = (np.zeros(0, np.int64), np.zeros(0, np.int64))
            return np.zeros(0, bool)
        ok = ((ops.kind[rows] == REDUCE) & ~static
              & ((src.buf[rows] != dst.buf[rows]) | (src.end[rows] <= dst.off[rows]) | (dst.end[rows] <= src.off[rows])))
        same = ok[1:] & ok[:-1]
        for col in (ops.step, ops.rank, dst.buf, dst.off, dst.cnt, dst.rep, dst.stride):
            c = col[rows]
            same &= c[1:] == c[:-1]
        pos, lead = self.lead = self._disjoint_lead(rows, static)      # (kept: the quotient asks whether all lead)
        return np.concatenate(([False], same & (pos[1:] > lead[1:]))) | ((pos > 0) & (pos < lead))

    def _disjoint_lead(self, rows: np.ndarray, static: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per local row (in (step, rank, index) order): its index among its rank's locals of the step, and
        how many of them lead the step touching disjoint data, so that they run as one batch.

        In the lead no row writes what another reads or writes (reduces into one identical destination
        excepted), judged on each region's hull (first to last element): two regions whose hulls meet
        count as overlapping, which only ends the lead early. Static faults end it before them. (Each
        hull is sorted by (rank's step, first key); a hull that starts before the furthest end of the
        earlier destination hulls, or a destination before that of the earlier source hulls, overlaps
        the hull that reaches there, and ends the lead at the first of the two.)"""
        ops, sim = self.ops, self.sim
        st, rk = ops.step[rows], ops.rank[rows]
        new = np.concatenate(([True], (st[1:] != st[:-1]) | (rk[1:] != rk[:-1])))
        gid = np.cumsum(new) - 1
        pos = np.arange(len(rows)) - np.flatnonzero(new)[gid]
        lead = np.bincount(gid).astype(np.int64)[gid]           # every row, unless something overlaps
        ngroups = int(gid[-1]) + 1
        cut = np.full(ngroups, np.iinfo(np.int64).max)
        np.minimum.at(cut, gid[static], pos[static])
        los, his, dsts, keep = [], [], [], []
        for i, side in enumerate((ops.src, ops.dst)):
            b = side.buf[rows]
            lo = sim.base(rk, np.maximum(b, 0)) + side.off[rows]
            los.append(lo)
            his.append(lo + (side.end - side.off)[rows])
            dsts.append(np.full(len(rows), i == 1))
            keep.append((b >= 0) & (side.size[rows] > 0) & ~static)
        # a chain of reduces into one destination region: only its first destination hull counts
        d = ops.dst
        same_dst = np.concatenate(([False], (gid[1:] == gid[:-1]) & (los[1][1:] == los[1][:-1])
                                   & (d.cnt[rows][1:] == d.cnt[rows][:-1]) & (d.rep[rows][1:] == d.rep[rows][:-1])
                                   & (d.stride[rows][1:] == d.stride[rows][:-1])))
        red = ops.kind[rows] == REDUCE
        keep[1] &= ~(same_dst & red & np.concatenate(([False], red[:-1])))
        sel = np.concatenate(keep)
        lo, hi = np.concatenate(los)[sel], np.concatenate(his)[sel]
        is_dst, p, g = np.concatenate(dsts)[sel], np.tile(pos, 2)[sel], np.tile(gid, 2)[sel]
        rk = np.tile(rk, 2)[sel]
        tangled = _tangled(lo, hi, is_dst, g, ngroups)
        if not tangled.all():                       # only the groups whose hulls may meet are sorted
            take = np.flatnonzero(tangled[g])
            if not len(take):
                return pos, np.minimum(lead, cut[gid])
            lo, hi, is_dst, p, g, rk = lo[take], hi[take], is_dst[take], p[take], g[take], rk[take]
        # keyed by group, then by key within the rank (a rank's keys span sim.span); as many groups at once as fit
        rel = sim.base(rk, 0)
        lo, hi = lo - rel, hi - rel
        span = sim.span
        if span >= _KEY_LIMIT:                      # a rank's keys alone too many: by the hulls' ranks among the ends
            coords = unique(np.concatenate([lo, hi]))
            lo, hi, span = np.searchsorted(coords, lo), np.searchsorted(coords, hi), len(coords) + 1
        per = min(max(1, _KEY_LIMIT // span), _GROUPS or ngroups)
        if per >= ngroups:
            _overlaps(g * span + lo, g * span + hi, is_dst, p, g, cut)
        else:                                       # (g ascends in each half: the chunks' rows sorted at little cost)
            chunk = g // per
            order = np.argsort(chunk, kind="stable")
            bounds = np.searchsorted(chunk[order], np.arange(int(chunk[order[-1]]) + 2))
            for c, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
                if b > a:
                    i = order[a:b]
                    key = (g[i] - c * per) * span
                    _overlaps(key + lo[i], key + hi[i], is_dst[i], p[i], g[i], cut)
        return pos, np.minimum(lead, cut[gid])

    def _match(self, ok_x: np.ndarray) -> list[int]:
        """Pair the k-th send of each (step, sender, receiver) with its k-th receive; the steps where they differ."""
        ops, n = self.ops, self.sim.n
        s = np.flatnonzero(ok_x & (ops.kind == SEND))
        r = np.flatnonzero(ok_x & (ops.kind == RECV))
        gs = (ops.step[s] * n + ops.rank[s]) * n + ops.peer[s]
        gr = (ops.step[r] * n + ops.peer[r]) * n + ops.rank[r]
        os_, or_ = np.argsort(gs, kind="stable"), np.argsort(gr, kind="stable")
        s, gs, r, gr = s[os_], gs[os_], r[or_], gr[or_]
        if len(gs) == len(gr) and (gs == gr).all() and (ops.src.size[s] == ops.dst.size[r]).all():
            self.pairs = (s, r)
            return []
        us, cs = np.unique(gs, return_counts=True)
        ur, cr = np.unique(gr, return_counts=True)
        allg = np.union1d(us, ur)
        count_s = np.zeros(len(allg), np.int64)
        count_r = np.zeros(len(allg), np.int64)
        count_s[np.searchsorted(allg, us)] = cs
        count_r[np.searchsorted(allg, ur)] = cr
        bad = set(allg[count_s != count_r].tolist())
        same = np.isin(gs, allg[count_s == count_r])
        same_r = np.isin(gr, allg[count_s == count_r])
        diff = ops.src.size[s[same]] != ops.dst.size[r[same_r]]
        bad.update(gs[same][diff].tolist())
        self.bad_pairs = sorted(bad)
        first = self.bad_pairs[0] // (n * n)
        before_s, before_r = ops.step[s] < first, ops.step[r] < first
        self.pairs = (s[before_s], r[before_r])
        return [first]

    # -- what the simulator asks ----------------------------------------------------------
    def moves(self, rows: np.ndarray, side: int, owner: np.ndarray) -> Moves:
        s = (self.ops.src, self.ops.dst)[side]
        return s.take(rows, self.sim.base(owner, s.buf[rows]))

    def regions(self, first: int = 0, last: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every region that may run in steps ``first`` to ``last`` (default: every step), both sides:
        ``(first key, count, repeat, stride)`` (for the grid's cuts).

        A move from several pieces into one contiguous region adds that region cut as the source's
        pieces end, so that :meth:`~pyhccl.verify.atoms.Grid.pair` need not cut the grid (a copy of
        it) while running."""
        ops, cols = self.ops, []
        last = ops.nsteps - 1 if last is None else last
        lo, hi = ops.step_start[first], ops.step_start[last + 1]
        for i in (0, 1):
            rows = lo + np.flatnonzero(self.static.inside[i][lo:hi])
            m = self.moves(rows, i, ops.rank[rows])
            cols.append((m.key, m.cnt, m.rep, m.stride))
        ls = slice(self.lstart[first], self.lstart[last + 1])
        moving = self.lrows[ls][~self.lstatic[ls]]
        xs = slice(self.xstart[first], self.xstart[last + 1])
        for a, b in ((self.sends[xs], self.recvs[xs]), (moving, moving)):
            gather = (ops.src.rep[a] > 1) & (ops.dst.rep[b] == 1)
            a, b = a[gather], b[gather]
            m = self.moves(b, 1, ops.rank[b])
            cols.append((m.key, ops.src.cnt[a], ops.src.rep[a], ops.src.cnt[a]))
        return tuple(np.concatenate(c) for c in zip(*cols))

    def before_transfers(self, t: int) -> None:
        """Raise step ``t``'s first transfer fault: not a transfer, a bad peer, unmatched, out of bounds."""
        if t != self.xbad_step:
            return
        ops, sim = self.ops, self.sim
        lo, hi = ops.step_start[t], ops.step_start[t + 1]
        rows = np.flatnonzero((self.static.not_xfer | self.static.bad_peer)[lo:hi])
        if len(rows):
            row = lo + rows[0]
            raise sim.fail(int(ops.rank[row]), self._text(row))
        if t in self.match_steps:
            n = sim.n
            g = next(x for x in self.bad_pairs if x // (n * n) == t)
            src, dst = divmod(g % (n * n), n)
            rows = range(lo, hi)
            s = [ops.action(i).src for i in rows if ops.local[i] == 0 and ops.kind[i] == SEND
                 and ops.rank[i] == src and ops.peer[i] == dst]
            r = [ops.action(i).dst for i in rows if ops.local[i] == 0 and ops.kind[i] == RECV
                 and ops.rank[i] == dst and ops.peer[i] == src]
            raise sim.fail(dst if len(s) > len(r) else src,
                           f"rank {src} sends [{', '.join(map(str, s))}] to rank {dst}, which receives "
                           f"[{', '.join(map(str, r))}] from it in this step; sends and receives must "
                           f"match in number, order and size")
        self._oob(np.arange(lo, hi)[ops.local[lo:hi] == 0])

    def _text(self, row: int) -> str | None:
        """``row``'s static fault (:func:`static_text`), None if it has none."""
        return static_text(self.ops, self.static, self.sim.n, self.sim.sizes, row)

    def _oob(self, rows: np.ndarray) -> None:
        out = rows[(self.static.oob[0] | self.static.oob[1])[rows]]
        if len(out):
            raise self.sim.fail(int(self.ops.rank[out[0]]), self._text(int(out[0])))

    def static_local(self, row: int) -> tuple[int, str]:
        """The rank and message of a local row's static fault."""
        return int(self.ops.rank[row]), self._text(row) or ""

    def transfer_moves(self, t: int) -> tuple[np.ndarray, np.ndarray, Moves, Moves]:
        """Step ``t``'s moves: send rows, receive rows, and both sides as :class:`Moves`."""
        lo, hi = self.xstart[t], self.xstart[t + 1]
        s, r = self.sends[lo:hi], self.recvs[lo:hi]
        ops = self.ops
        return s, r, self.moves(s, 0, ops.rank[s]), self.moves(r, 1, ops.rank[r])

    def local_batches(self, t: int, replay_from: int | None = None):
        """Step ``t``'s local operations, the i-th of every rank together (a rank's run of reduces into one
        destination with its first): ``(rows, source moves, destination moves, first static fault, run key,
        merged)``; ``merged`` when a rank has several rows in the batch.

        ``replay_from``: the rows of batches from that run key on, one original index at a time (what the
        simulator runs after a merged batch whose checks flag a fault, to report it exactly).
        """
        lo, hi = self.lstart[t], self.lstart[t + 1]
        if lo == hi:
            return
        if replay_from is None:
            keys, rows_all, merged = self.lrunkey[lo:hi], self.lrows[lo:hi], self.ljoin[lo:hi]
            static_all = self.lstatic[lo:hi]
        else:
            take = np.flatnonzero(self.lrunkey[lo:hi] >= replay_from)
            order = take[np.argsort(self.lkey[lo:hi][take], kind="stable")]
            keys, rows_all, static_all = self.lkey[lo:hi][order], self.lrows[lo:hi][order], self.lstatic[lo:hi][order]
            merged = np.zeros(len(order), bool)
        cuts = np.flatnonzero(np.diff(keys)) + 1
        for a, b in zip([0] + cuts.tolist(), cuts.tolist() + [len(keys)]):
            rows = rows_all[a:b]
            static = static_all[a:b]
            first = self.static_local(int(rows[np.argmax(static)])) if static.any() else None
            moving = rows[~static & (self.ops.src.size[rows] > 0)]
            if not len(moving) and first is None:
                continue
            owner = self.ops.rank[moving]
            yield (moving, self.moves(moving, 0, owner), self.moves(moving, 1, owner), first, int(keys[a]),
                   bool(merged[a:b].any()))
