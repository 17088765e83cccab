"""Rank 0 of a rotation-symmetric plan set, simulated exactly (the quotient's run, :mod:`pyhccl.verify.quotient`).

Its buffers are atoms holding the exact set of contributing ranks (an N-bit int) and the input index of their
first element. What rank 0 receives from rank ``q`` is rank 0's own data where ``q``'s frame puts it, its ranks
(and input index) moved on by ``q``: the sender's data, by the symmetry the quotient checked first.
"""

from __future__ import annotations

import bisect

import numpy as np

from ..core.call import Call
from .rotation import Axes
from .rows import COPY, REDUCE, SEND, PlanArrays

__all__ = ["Rank0", "postcondition"]


class _Fault(Exception):
    """Something rank 0's run finds wrong: the quotient declines, and the grid reports it."""


class _Buffer:
    """One buffer of rank 0 as atoms: ``starts`` (sorted) and, per atom, None (never written) or ``(ranks, origin)``:
    the contributing ranks as a bit set, and the input index of the atom's first element."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.starts: list[int] = [0]
        self.vals: list = [None]

    def cut(self, at: int) -> None:
        if 0 < at < self.size:
            k = bisect.bisect_right(self.starts, at) - 1
            s = self.starts[k]
            if s != at:
                v = self.vals[k]
                self.starts.insert(k + 1, at)
                self.vals.insert(k + 1, None if v is None else (v[0], v[1] + at - s))

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """The atoms of ``[lo, hi)``, cut at both ends: indices ``[k0, k1)``."""
        self.cut(lo)
        self.cut(hi)
        return bisect.bisect_left(self.starts, lo), bisect.bisect_left(self.starts, hi)

    def read(self, lo: int, hi: int) -> list[tuple[int, object]]:
        """``(offset from lo, value)`` of each atom of ``[lo, hi)``; a never-written atom is a fault."""
        k0, k1 = self.span(lo, hi)
        out = []
        for k in range(k0, k1):
            if self.vals[k] is None:
                raise _Fault("read before write")
            out.append((self.starts[k] - lo, self.vals[k]))
        return out


def postcondition(call: Call) -> list[tuple[int, int, int, int]]:
    """Rank 0's output as :class:`Rank0` checks it: ``(offset, count, contributing ranks as bits, input index
    minus offset)`` of each non-empty row of the op's postcondition."""
    return [(c.offset, c.count, sum(1 << j for j in c.ranks), c.shift) for c in call.spec.post(call, 0) if c.count]


class Rank0:
    """Rank 0's run, from its rows: what it receives (read from the rotated state of rank 0, which is the
    sender's), then its local operations in order; then its output against the postcondition."""

    def __init__(self, ops: PlanArrays, call: Call, frame, axes: Axes, sizes, u_orig: int, s_orig: int, s, r, loc,
                 n_in: int, post: list, senders=None) -> None:
        """``senders``: None where ``s`` are the sending ranks' own rows; else each receive's sending rank, and
        ``s`` rank 0's rows that are those sends in rank 0's frame (a plan set built as rank 0's rotated)."""
        self.ops, self.call, self.n, self.axes = ops, call, call.nranks, axes
        self.n_in, self.post = n_in, post           # (in the frame's units: elements, or whole slices)
        self.unit, self.krot, self.size = frame[0].tolist(), frame[1].tolist(), sizes.tolist()
        self.u_orig, self.s_orig = u_orig, s_orig
        mine = ops.rank[r] == 0
        self.recv, self.send = r[mine], s[mine]                 # rank 0's receives and their senders' rows
        self.own = senders is not None                         # (the senders' rows in rank 0's frame)
        self.senders = ops.rank[self.send] if senders is None else np.asarray(senders)[mine]
        self.sent = np.flatnonzero((ops.rank == 0) & (ops.local == 0) & (ops.kind == SEND) & (ops.src.size > 0))
        self.loc = loc[ops.rank[loc] == 0]

    def rotated(self, vals: list, cnt: int, q: int) -> list:
        """Runs ``(offset, value)`` of rank 0 (``cnt`` elements) as rank ``q`` holds them: the ranks moved on by
        ``q``, the input index's block too (a run cut where its input indices pass a block's end)."""
        if not q:
            return vals
        out, u = [], self.u_orig
        for k, (off, (bits, origin)) in enumerate(vals):
            bits = self.axes.rotate_bits(bits, q)
            end = vals[k + 1][0] if k + 1 < len(vals) else cnt
            while True:
                if not u:
                    out.append((off, (bits, origin)))
                    break
                blk, e = divmod(origin, u)
                out.append((off, (bits, self.axes.add(blk, q) * u + e)))
                if off + u - e >= end:
                    break
                off, origin = off + u - e, origin + u - e
        return out

    def pieces(self, side, row: int, rank: int):
        """``(buf, offset, count)`` of each piece of ``side`` of ``row`` in ``rank``'s rotated frame, cut where the
        rotation parts its blocks."""
        b, cnt = int(side.buf[row]), int(side.cnt[row])
        off, stride, rep = int(side.off[row]), int(side.stride[row]), int(side.rep[row])
        u = self.unit[b]
        period = u * self.n                  # (as rotation.rotate: rotated in the buffer's first k periods)
        for i in range(rep):
            pos, end, run = off + i * stride, off + i * stride + cnt, None
            base = pos // period * period if period else 0
            if not rank or not period or pos // period >= self.krot[b]:
                yield b, pos, cnt
                continue
            while pos < end:                    # block by block, each where the rotation takes it
                blk, e = divmod(pos - base, u)
                n = min(end - pos, u - e)
                x = base + self.axes.sub(blk, rank) * u + e
                if run and run[1] + run[2] == x:
                    run[2] += n
                else:
                    if run:
                        yield tuple(run)
                    run = [b, x, n]
                pos += n
            yield tuple(run)

    def run(self) -> int | str:
        """Rank 0's atoms at the end, or what it finds wrong (a str; :attr:`step` says where: a step, or None for
        the output after the last)."""
        ops = self.ops
        periods = [u * self.n for u in self.unit]      # (a rotated period, whole: its canonical places)
        self.bufs = [_Buffer(max(s, min(-(-s // p), int(k)) * p) if p else s)
                     for s, p, k in zip(self.size, periods, self.krot)]
        c, n_in = self.call, self.n_in
        start = (1, c.in_place_offset(0)) if c.in_place else (0, 0)
        if n_in:
            buf = self.bufs[start[0]]
            k0, k1 = buf.span(start[1], start[1] + n_in)
            buf.vals[k0] = (1, 0)
            buf.vals[k0 + 1:k1] = [(1, buf.starts[k] - start[1]) for k in range(k0 + 1, k1)]
        steps_r = ops.step[self.recv]
        steps_s = ops.step[self.sent]
        steps_l = ops.step[self.loc]
        self.step: int | None = 0           # (where a fault is found: a step, or None: the output after the last)
        try:
            for t in range(ops.nsteps):
                self.step = t
                now = steps_r == t
                if now.any():
                    self.transfers(self.recv[now], self.send[now], self.senders[now], self.sent[steps_s == t])
                for row in self.loc[steps_l == t].tolist():
                    self.local(row)
            self.step = None
            self.check_post()
        except _Fault as e:
            return str(e)
        return sum(len(b.starts) for b in self.bufs)

    def transfers(self, recv: np.ndarray, send: np.ndarray, senders: np.ndarray, sent: np.ndarray) -> None:
        """One step's receives of rank 0: every source read before any write (the step's sends run at once)."""
        ops, writes, dsts = self.ops, [], []
        for rrow, srow, q in zip(recv.tolist(), send.tolist(), senders.tolist()):
            for (bd, x, cnt), (bs, y, cnt_s) in _aligned(self.pieces(ops.dst, rrow, 0),
                                                         self.pieces(ops.src, srow, 0 if self.own else q)):
                vals = self.rotated(self.bufs[bs].read(y, y + cnt), cnt, q)
                writes.append((bd, x, cnt, vals))
                dsts.append((bd, x, x + cnt))
        dsts.sort()
        for (b0, _, e0), (b1, s1, _) in zip(dsts, dsts[1:]):
            if b0 == b1 and s1 < e0:
                raise _Fault("two receives of one step write the same element")
        srcs: list[list[int]] = []          # what rank 0 sends in the step, as disjoint runs
        pieces = (p for row in sent.tolist() for p in self.pieces(ops.src, row, 0))
        for b, lo, hi in sorted((b, x, x + c) for b, x, c in pieces):
            if srcs and srcs[-1][0] == b and lo <= srcs[-1][2]:
                srcs[-1][2] = max(srcs[-1][2], hi)
            else:
                srcs.append([b, lo, hi])
        for b, lo, hi in dsts:
            k = bisect.bisect_left(srcs, [b, hi])
            if k and srcs[k - 1][0] == b and srcs[k - 1][2] > lo:
                raise _Fault("receives into what it sends in the same step")
        for bd, x, cnt, vals in writes:
            self.write(bd, x, cnt, vals, reduce=False)

    def local(self, row: int) -> None:
        ops = self.ops
        red = int(ops.kind[row]) == REDUCE
        assert red or int(ops.kind[row]) == COPY
        for (bd, x, cnt), (bs, y, _) in _aligned(self.pieces(ops.dst, row, 0), self.pieces(ops.src, row, 0)):
            self.write(bd, x, cnt, self.bufs[bs].read(y, y + cnt), reduce=red)

    def write(self, b: int, x: int, cnt: int, vals: list, reduce: bool) -> None:
        """``[x, x + cnt)`` of buffer ``b`` takes ``vals`` (``(offset, value)`` runs), or has them reduced in."""
        buf = self.bufs[b]
        for off, _ in vals[1:]:
            buf.cut(x + off)
        k0, k1 = buf.span(x, x + cnt)
        offs = [o for o, _ in vals]
        for k in range(k0, k1):
            at = buf.starts[k] - x
            j = bisect.bisect_right(offs, at) - 1
            bits, origin = vals[j][1]
            origin += at - offs[j]
            end = buf.starts[k + 1] if k + 1 < len(buf.starts) else buf.size
            if origin + end - buf.starts[k] > self.s_orig:      # (a rotated atom that runs past the input's end)
                raise _Fault("input indices past the input")
            if reduce:
                have = buf.vals[k]
                if have is None or have[1] != origin or have[0] & bits:
                    raise _Fault("reduce of unwritten, misaligned or already counted data")
                buf.vals[k] = (have[0] | bits, origin)
            else:
                buf.vals[k] = (bits, origin)

    def check_post(self) -> None:
        out = self.bufs[1]
        for offset, count, bits, shift in self.post:
            try:
                vals = out.read(offset, offset + count)
            except _Fault:
                raise _Fault(f"out[{offset}:{offset + count}] should hold {_ranks(bits)}'s data, and some of it holds "
                             f"none") from None
            for off, v in vals:
                if v[0] != bits or v[1] != offset + off + shift:
                    raise _Fault(f"out[{offset + off}] should hold {_ranks(bits)}'s element of input index "
                                 f"{offset + off + shift}; it holds {_ranks(v[0])}'s of input index {v[1]}")


def _ranks(bits: int) -> str:
    """The ranks of a bit set, for messages (the first few)."""
    ranks = [i for i in range(min(bits.bit_length(), 1 << 20)) if bits >> i & 1]
    text = ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")
    return f"rank {text}" if len(ranks) == 1 else f"ranks {{{text}}}"


def _aligned(a, b):
    """Two streams of pieces ``(buf, offset, count)`` of equal total, cut to pairs of equal counts."""
    a, b = list(a), list(b)
    i = j = 0
    da = db = 0
    while i < len(a) and j < len(b):
        (ba, xa, ca), (bb, xb, cb) = a[i], b[j]
        m = min(ca - da, cb - db)
        yield (ba, xa + da, m), (bb, xb + db, m)
        da += m
        db += m
        if da == ca:
            i, da = i + 1, 0
        if db == cb:
            j, db = j + 1, 0
