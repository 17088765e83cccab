"""The rank-rotation quotient: a plan set that every rank runs alike, up to a rotation, simulated on one rank.

Many of HCCL's one-level templates (NHR, Ring, Mesh) are the same program on every rank up to a rotation:
rank ``r`` talks to ``peer + r`` where rank 0 talks to ``peer``, and touches block ``j + r`` (of ``u``
elements) of a rank-indexed buffer where rank 0 touches block ``j``. Then rank ``r``'s data after any step is
rank 0's, rotated: element ``x`` of rank ``r`` holds what element ``x - r u`` of rank 0 holds, with every
contributing rank ``c`` read as ``c + r`` (mod N). So rank 0 alone, simulated exactly (its contributors as
an N-bit set, each element's input index), decides the call for every rank: at 8192 ranks an AllGather's
grid holds N^2 = 67 M atoms, rank 0's N. On a machine of several levels the rotation moves each digit of the
rank (device, server, pod) on its own (HCCL's multi-level AllGathers and ReduceScatters; the latter's receive
slots, placed by level, are composed away: :mod:`.slots`); an AllReduce cut into floor + tail slices rotates
slice by slice (:class:`_Blocks`).

:func:`run` accepts a plan set only after it has shown, on the flat rows (:class:`~.rows.PlanArrays`) and in
time linear in them, that the set is rotation-symmetric:

1. the simulator's structural checks (:class:`~.checks.Checks`) find nothing on any rank;
2. every rank's *relation* (each element it receives, with the relative rank and element it comes from;
   each element its local operations read and write) is rank 0's, rotated. Relations are compared as
   sums of a hash of their elements, ``g^x h^y k^key`` modulo two primes near 2^31: a strided region's
   sum is a product of two geometric series, so a region costs O(1) whatever its pieces, and a region
   that a rotation splits where it wraps costs a few. Different relations give equal sums with
   probability about 2^-60 (the simulator's 64-bit keys take the same kind of risk above 64 ranks);
3. each rank's local operations of a step give the same result in any order (a rotation may change it): rank
   0's, element by element (:func:`~.slots.order_free`; the relations carry that to every rank), or, where rank
   0's are too many pieces for that, every rank's regions' hulls are disjoint;

then simulates rank 0 exactly and checks its output against the postcondition (:mod:`.rotation`: the frames;
:mod:`.relation`: the relations' hashes; :mod:`.rank0`: rank 0's run). Anything else (a fault, a
plan that is not symmetric, a count it cannot cut into blocks) returns why (a str), and the caller runs the
grid (:mod:`pyhccl.verify.sim`), which reports every fault with its rank and step as before: the
quotient only ever says "passed".
"""

from __future__ import annotations

import numpy as np

from ..core.call import Call
from .checks import Checks
from .rank0 import Rank0, postcondition
from .relation import hash_bases, relations_alike, sides_alike
from .rotation import ALL, Axes, periods_kept
from .rows import PlanArrays, Side, counts
from .slots import order_free, slot_pairs

__all__ = ["QUOTIENT_MIN_RANKS", "applies", "run"]

#: Below this many ranks the grid is fast enough, and the quotient is not tried.
QUOTIENT_MIN_RANKS = 256
#: Rank 0's local operations judged element by element up to this many pieces (more: every rank's hulls first).
_ORDER_PIECES = 1 << 22


def applies(call: Call) -> bool:
    """Whether ``call``'s postcondition is rotation-symmetric with equal blocks (the quotient may apply)."""
    n, c = call.nranks, call.count
    if c <= 0:
        return False
    if call.op in ("all_gather", "reduce_scatter"):
        return not (call.op == "reduce_scatter" and call.in_place)
    return call.op == "allreduce" and c >= n


def _frames(call: Call) -> tuple[list[int], int, int, int]:
    """Per buffer (in, out) the elements a rank's rotation moves it by (its block; 0: not rotated); the block of the
    input index's rotation, the input's size, and the op's block (what scratch may be cut into)."""
    n, c = call.nranks, call.count
    if call.op == "all_gather":
        return [0, c], 0, c, c
    if call.op == "reduce_scatter":
        return [c, 0], c, n * c, c
    return [c // n, c // n], c // n, c, c // n


def run(plans, call: Call, layout, seed: int = 0, levels: tuple[int, ...] = ()):
    """The report of ``plans`` for ``call`` simulated on rank 0 (see the module), or why the quotient does not
    apply or what it finds wrong (a str: the grid then runs and reports it). ``layout``: the plans' rows and
    buffers (``pyhccl.verify.sim._Layout``); ``levels``: the machine's group sizes, innermost first (devices in a
    server, servers, ...): its rotations are tried too."""
    from .sim import SimReport        # (sim imports this module)
    n, ops, sizes = call.nranks, layout.ops, layout.sizes
    if not applies(call) or not len(ops.step):
        return f"{call.op} of count {call.count} over {n} ranks is not a rotation of equal blocks"
    units, u_orig, s_orig, block = _frames(call)
    whole = None            # an AllReduce count N does not divide: floor + tail slices, each a unit (see _Blocks)
    if call.op == "allreduce" and call.count % n:
        try:
            whole = _Blocks(ops, sizes, call.count, n)
        except _NotBlocks as e:
            return f"{e}"
        ops, sizes = whole, whole.sizes
        units, u_orig, s_orig, block = [1, 1], 1, n, 1
    hashes = hash_bases(seed, n)
    levels = tuple(z for z in levels if z > 1)
    shapes = [(n,)] + ([] if whole or len(levels) < 2 or int(np.prod(levels)) != n else
                       [levels] + ([(levels[0], n // levels[0])] if len(levels) > 2 else []))
    sample = np.unique(np.array([0, 1, n // 2, n - 1] + [a for a in levels[:1] if a < n]))
    scratch = [(block, ALL), (block, 1), (block, 2)] if whole else [(0, 0), (block, ALL), (block, 1), (block, 2)]
    frames = [np.array([units + [u_scr], [ALL, ALL, k]], np.int64) for u_scr, k in scratch]
    frames = [f for f, kept in zip(frames, periods_kept(ops, frames, n)) if kept]
    pairs: dict = {}                    # per frame: its receive slots composed away (None: none)
    for shape, (i, frame) in ((a, f) for a in shapes for f in enumerate(frames)):
        # scratch: not rotated, or periods of n blocks, all or the first k (then slots); a cheap look at a few
        # ranks first: most plans that differ differ there
        if i not in pairs:
            pairs[i] = None if whole else slot_pairs(ops, frame, n)
        slots, axes = pairs[i], Axes(shape)
        if sides_alike(ops, n, frame, axes, hashes, sample, () if slots is None else slots):
            break
    else:
        return "the sampled ranks' regions are not rank 0's rotated"
    checks = Checks(layout, layout.ops, batches=False)      # (the structural checks: on the plans' elements)
    if checks.match_steps or checks.xbad_step < ops.nsteps or checks.lbad_step < ops.nsteps:
        return "a structural fault"
    s, r = checks.sends, checks.recvs
    loc = np.flatnonzero((ops.local == 1) & (ops.src.size > 0))
    undo, alike = _alike_pieces(ops, s, r, loc)    # (in place, undone before returning: the grid may read the rows)
    try:
        if slots is not None:               # (the receive rows, the locals that read them, and the receives' senders)
            order = np.argsort(r) if (np.diff(r) < 0).any() else None
            ordered = r if order is None else r[order]
            at = np.minimum(np.searchsorted(ordered, slots[0]), len(r) - 1)
            if not len(r) or (ordered[at] != slots[0]).any():
                return "a receive into a slot without its send"
            slots = slots + (s[at] if order is None else s[order[at]],)
        moves = [(s, r), (loc, loc)] + ([] if slots is None else [(slots[2], slots[1])])
        for a, b in moves[2 if alike else 0:]:          # (the first two: alike where _alike_pieces says so)
            if not (np.array_equal(ops.src.cnt[a], ops.dst.cnt[b]) and np.array_equal(ops.src.rep[a], ops.dst.rep[b])):
                return "the two sides of a move are cut into different pieces"
        for a, b in moves if whole else ():
            if not np.array_equal(whole.tail[0][a], whole.tail[1][b]):
                return "a move pairs the tail slice with another"
        if not relations_alike(ops, n, frame, axes, hashes, s, r, loc, slots):
            return "the ranks' relations are not rank 0's rotated"
        mine = loc[ops.rank[loc] == 0]
        if int(ops.src.rep[mine].sum() + ops.dst.rep[mine].sum()) > _ORDER_PIECES:     # hulls on every rank first
            checks.batch_locals()
            free = not (checks.lead[0] >= checks.lead[1]).any()
        else:
            free = False
        if not free and not order_free(ops, mine):
            return "a rank's local operations of a step touch common data (their order matters)"
        post = postcondition(call)
        n_in = call.input_count(0)
        if whole:
            post = [(0, n, bits, 0) for o, c, bits, shift in post if (o, c, shift) == (0, call.count, 0)]
            if len(post) != 1:
                return "a postcondition that is not whole slices"
            n_in = n
        atoms = Rank0(ops, call, frame, axes, sizes, u_orig, s_orig, s, r, loc, n_in, post).run()
        if isinstance(atoms, str):
            return f"rank 0: {atoms}"
        rounds, sent = counts(layout.ops, n)        # (elements, not slices)
        return SimReport(n, rounds, sent, n * atoms, quotient=True)
    finally:
        undo()


def _alike_pieces(ops, s, r, loc):
    """Each move's two sides rewritten in place into the same pieces where one side is contiguous and the other the
    same number of elements in pieces (``[20:24]`` received from ``[1:2|4x4]`` read as ``[20:21|4x1]``): the same
    elements, so each region's size and end stay. Returns the function that puts the rows back (they are the
    grid's: copies of the columns, each as long as the rows, cost more than the rest of the rewrite), and whether
    every move's sides are now in the same pieces."""
    saved, alike = [], True
    for a, b in ((s, r), (loc, loc)):
        differ = np.flatnonzero((ops.src.cnt[a] != ops.dst.cnt[b]) | (ops.src.rep[a] != ops.dst.rep[b]))
        if not len(differ):
            continue                    # (the usual case: every move's sides in the same pieces already)
        a, b = a[differ], b[differ]
        ca, ra, cb, rb = ops.src.cnt[a], ops.src.rep[a], ops.dst.cnt[b], ops.dst.rep[b]
        to_dst = (rb == 1) & (cb == ca * ra)                # a contiguous destination read as its source's pieces
        to_src = ~to_dst & (ra == 1) & (ca == cb * rb)      # a contiguous source read as its destination's
        alike &= bool((to_dst | to_src).all())
        for side, rows, fix, c, k in ((ops.dst, b, to_dst, ca, ra), (ops.src, a, to_src, cb, rb)):
            rows = rows[fix]
            saved.append((side, rows, side.cnt[rows], side.rep[rows], side.stride[rows]))
            side.cnt[rows], side.rep[rows], side.stride[rows] = c[fix], k[fix], c[fix]

    def undo() -> None:
        for side, rows, cnt, rep, stride in reversed(saved):
            side.cnt[rows], side.rep[rows], side.stride[rows] = cnt, rep, stride
    return undo, alike


class _NotBlocks(Exception):
    """A region that is not whole floor + tail slices (:class:`_Blocks`)."""


class _Blocks:
    """The rows of an AllReduce whose count ``C`` N does not divide, in whole slices: HCCL's "floor + tail" cut
    (``f = C // N`` elements a slice, the last ``t = C - f (N - 1)``: NHR, Ring) makes slices of two sizes, and
    rank ``r``'s tail is rank 0's slice ``N - 1 - r``; no element-wise rotation maps one rank's plan onto
    another's. Slice-wise one does: where every region of every buffer is whole slices (a period of ``C``
    elements is ``N`` units), rank 0 in units decides as before, and each move pairs slices of equal sizes (the
    tail with the tail: its sides' tail flags, ``tail[side][row]``, must agree). Raises :class:`_NotBlocks`
    otherwise."""

    def __init__(self, ops: PlanArrays, sizes: np.ndarray, count: int, n: int) -> None:
        f, t = count // n, count - count // n * (n - 1)
        if f == 0:
            raise _NotBlocks(f"a count of {count} over {n} ranks leaves slices empty")
        for name in ("step", "rank", "local", "index", "kind", "peer", "nsteps", "step_start"):
            setattr(self, name, getattr(ops, name))
        self.src, tail_s = _in_slices(ops.src, f, t, n, count)
        self.dst, tail_d = _in_slices(ops.dst, f, t, n, count)
        self.tail = (tail_s, tail_d)
        self.sizes = -(-sizes // count) * n         # (whole periods of n slices)


def _in_slices(side, f: int, t: int, n: int, count: int):
    """``side``'s regions in slices (period ``count`` elements, ``n`` slices: ``n - 1`` of ``f``, then ``t``), and
    whether each ends with the tail; raises :class:`_NotBlocks` where one is not whole slices."""
    has = (side.buf >= 0) & (side.size > 0)
    off, cnt, rep, stride = side.off, side.cnt, side.rep, side.stride
    p = off // count
    w0 = off - p * count
    regular = f * (n - 1)
    in_tail = w0 >= regular
    j0 = np.where(in_tail, n - 1, w0 // f)
    end = w0 + cnt                                         # the first piece's end, in its period
    tail = has & (end == count)
    w = np.where(tail, n - j0, cnt // f)                   # slices in the first piece
    ok = ~has | ((w0 == j0 * f) & np.where(in_tail, (cnt == t) & (rep == 1),
                                            np.where(tail, rep == 1, (cnt % f == 0) & (end <= regular))))
    many = has & (rep > 1)
    ok &= ~many | ((stride % f == 0) & (j0 + (rep - 1) * (stride // f) + w <= n - 1))
    if not ok.all():
        row = int(np.argmax(~ok))
        raise _NotBlocks(f"a region of {int(cnt[row])} x {int(rep[row])} elements at {int(off[row])} is not whole "
                         f"slices of {f} (the last {t})")
    zero = np.zeros(len(off), np.int64)
    return Side(side.buf, np.where(has, p * n + j0, 0), np.where(has, w, zero), rep,
                np.where(many, stride // f, zero)), tail
