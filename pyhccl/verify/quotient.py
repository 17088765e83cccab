"""The rank-rotation quotient: a plan set that every rank runs alike, up to a rotation, simulated on one rank.

Many of HCCL's one-level templates (NHR, Ring, Mesh) are the same program on every rank up to a rotation:
rank ``r`` talks to ``peer + r`` where rank 0 talks to ``peer``, and touches block ``j + r`` (of ``u``
elements) of a rank-indexed buffer where rank 0 touches block ``j``. Then rank ``r``'s data after any step is
rank 0's, rotated: element ``x`` of rank ``r`` holds what element ``x - r u`` of rank 0 holds, with every
contributing rank ``c`` read as ``c + r`` (mod N). So rank 0 alone, simulated exactly (its contributors as
an N-bit set, each element's input index), decides the call for every rank: at 8192 ranks an AllGather's
grid holds N^2 = 67 M atoms, rank 0's N.

:func:`run` accepts a plan set only after it has shown, on the flat rows (:class:`~.rows.PlanArrays`) and in
time linear in them, that the set is rotation-symmetric:

1. the simulator's structural checks (:class:`~.checks.Checks`) find nothing on any rank;
2. every rank's *relation* (each element it receives, with the relative rank and element it comes from;
   each element its local operations read and write) is rank 0's, rotated. Relations are compared as
   sums of a hash of their elements, ``g^x h^y k^key`` modulo two primes near 2^31: a strided region's
   sum is a product of two geometric series, so a region costs O(1) whatever its pieces, and a region
   that a rotation splits at the buffer's end costs at most four. Different relations give equal sums with
   probability about 2^-60 (the simulator's 64-bit keys take the same kind of risk above 64 ranks);
3. each rank's local operations of a step touch disjoint data (so their order, which a rotation may
   change, does not matter);

then simulates rank 0 exactly and checks its output against the postcondition. Anything else (a fault, a
plan that is not symmetric, a count that does not split into N equal blocks) returns None, and the caller
runs the grid (:mod:`pyhccl.verify.sim`), which reports every fault with its rank and step as before: the
quotient only ever says "passed".
"""

from __future__ import annotations

import bisect
from functools import lru_cache
import numpy as np

from ..core.call import Call
from .checks import Checks
from .rows import COPY, REDUCE, SEND, PlanArrays

__all__ = ["QUOTIENT_MIN_RANKS", "applies", "run"]

#: Below this many ranks the grid is fast enough, and the quotient is not tried.
QUOTIENT_MIN_RANKS = 256
_PRIMES = (2147483647, 2147483629)      # primes below 2^31: a product of two residues fits an int64
_SAMPLE = 4                             # ranks compared before the rows of every rank are hashed


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


_ALL = 1 << 40          # periods a buffer's frame rotates: all of them


class _Axes:
    """The rotations a plan set may be symmetric under: rank ``r`` is the digits of ``r`` in the mixed radix
    ``sizes`` (innermost first: a machine's devices in a server, its servers, ...), and rank ``r``'s frame moves
    each digit back by ``r``'s. One axis of ``n`` is the plain rotation."""

    def __init__(self, sizes: tuple[int, ...]) -> None:
        self.sizes = sizes
        self.below = [int(np.prod(sizes[:a], dtype=np.int64)) for a in range(len(sizes))]     # ranks a digit counts
        self.n = int(np.prod(sizes, dtype=np.int64))
        self._masks: dict = {}

    def digits(self, rank: np.ndarray) -> list[np.ndarray]:
        return [np.asarray(rank, np.int64) // b % z for b, z in zip(self.below, self.sizes)]

    def rel(self, peer: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """``peer`` as seen from ``rank``: digit by digit, the difference."""
        return sum(((p - r) % z) * b for p, r, z, b in zip(self.digits(peer), self.digits(rank), self.sizes,
                                                             self.below))

    def add(self, x: int, q: int) -> int:
        """Index ``x`` moved on by rank ``q``, digit by digit."""
        return sum((x // b % z + q // b % z) % z * b for b, z in zip(self.below, self.sizes))

    def sub(self, x: int, q: int) -> int:
        return sum((x // b % z - q // b % z) % z * b for b, z in zip(self.below, self.sizes))

    def rotate_bits(self, v: int, q: int) -> int:
        """A set of ranks (bit ``c`` for rank ``c``) with each rank moved on by ``q``."""
        for b, z in zip(self.below, self.sizes):
            sh = q // b % z * b
            if sh:
                block = z * b                   # rotate each block of ``block`` bits left by ``sh``
                lo, hi = self._mask(block, sh)
                v = ((v & lo) << sh) | ((v & hi) >> (block - sh))
        return v

    def _mask(self, block: int, sh: int) -> tuple[int, int]:
        m = self._masks.get((block, sh))
        if m is None:
            every = ((1 << self.n) - 1) // ((1 << block) - 1)        # bit 0 of every block
            lo = ((1 << (block - sh)) - 1) * every
            m = self._masks[block, sh] = (lo, ((1 << self.n) - 1) ^ lo)
        return m


_ALL = 1 << 40          # periods a buffer's frame rotates: all of them


def _rotate(seg: dict, side: str, frame: np.ndarray, axes: _Axes) -> list[dict] | None:
    """``seg``'s ``side`` ('x' or 'y': the elements ``side + i s<side> + j`` of buffer ``b<side>``, for ``i0 <= i <
    i1``, ``j0 <= j < j1``) in the frame of rank ``r<side>``, as parts of segments; None where a segment spans
    rotated periods in a way no rotation maps piece by piece.

    A buffer's frame is ``(unit, k)``: its first ``k`` periods of ``n`` blocks of ``unit`` elements rotate (each
    block's index moved back by the rank's digits), the rest (a template's fixed slots after its rank-indexed copy
    of the data) and a buffer of unit 0 do not. Each axis, outermost first, moves its digit: a segment within one
    period of the axis is cut where the rotation wraps (pieces below the cut move up a period); one whose pieces
    lie in different periods of it, each at the same place, is cut within every piece alike."""
    unit, k = frame[0][seg["b" + side]], frame[1][seg["b" + side]]
    period = unit * axes.n
    first = seg[side] + seg["i0"] * seg["s" + side] + seg["j0"]
    moved = (period > 0) & (first // np.maximum(period, 1) < k)
    fixed = {key: v[~moved] for key, v in seg.items()}
    work = [dict({key: v[moved] for key, v in seg.items()}, _u=unit[moved])]
    for a in reversed(range(len(axes.sizes))):
        nxt = []
        for part in work:
            if len(part[side]):
                out = _rotate_axis(part, side, part["_u"] * axes.below[a], axes.sizes[a],
                                   axes.digits(part["r" + side])[a])
                if out is None:
                    return None
                nxt += out
        work = nxt
    for part in work:
        del part["_u"]
    return [fixed] + work


def _rotate_axis(seg: dict, side: str, w: np.ndarray, z: int, g: np.ndarray, split: bool = True) -> list[dict] | None:
    """One axis of :func:`_rotate`: blocks of ``w`` elements, ``z`` to a period, digit moved back by ``g``. A
    progression that runs through a few periods of the axis (``split``) is cut into one part a period first."""
    seg = dict(seg, _w=w, _g=g)
    period, gw = w * z, g * w
    b, s = seg[side], seg["s" + side]
    i0, i1, j0, j1 = seg["i0"], seg["i1"], seg["j0"], seg["j1"]
    first = b + i0 * s + j0
    start = first // period * period
    within = (b + (i1 - 1) * s + j1 - 1) // period == first // period
    apart = ~within & (s > 0) & (s % period == 0) & ((b + i0 * s + j1 - 1) // period == first // period)
    if not (within | apart).all():
        if not split:
            return None
        rest = _by_period(_take(seg, ~(within | apart)), side, period[~(within | apart)])
        if rest is None:
            return None
        out = []
        for part in (_take(seg, within | apart), rest):
            got = _rotate_axis(part, side, part.pop("_w"), z, part.pop("_g"), split=False)
            if got is None:
                return None
            out += got
        return out
    last = b + (i1 - 1) * s + j1 - 1
    low_all, high_all = within & (last < start + gw), within & (first >= start + gw)
    whole = low_all | high_all              # (most: below or above the cut as a whole, moved as they are)
    out = []
    if whole.any():
        part = _take(seg, whole) if not whole.all() else dict(seg)
        part[side] = part[side] - gw[whole] + np.where(low_all[whole], period[whole], 0)
        out.append({key: v for key, v in part.items() if key not in ("_w", "_g")})
        if whole.all():
            return out
    seg = dict(seg, _P=period, _gw=gw, _T=start + gw, _at=b + i0 * s - start)
    inside = _take(seg, within & ~whole)
    low, high = _cut_at(inside, side)
    each = _take(seg, apart)                # every piece cut alike: j below gw - (its place in the period) wraps
    jm = each["_gw"] - each["_at"]
    low.append(dict(each, j1=np.minimum(each["j1"], jm)))
    high.append(dict(each, j0=np.maximum(each["j0"], jm)))
    for parts, up in ((low, True), (high, False)):
        for part in parts:
            keep = (part["i1"] > part["i0"]) & (part["j1"] > part["j0"])
            part = _take(part, keep)
            part[side] = part[side] - part["_gw"] + (part["_P"] if up else 0)
            out.append({key: v for key, v in part.items() if key not in ("_P", "_gw", "_T", "_at", "_w", "_g")})
    return out


_PERIODS = 64           # a progression through more periods of an axis than this is not cut: declined


def _by_period(seg: dict, side: str, period: np.ndarray) -> dict | None:
    """``seg``'s progressions cut into one part per period of ``period`` they run through (at most
    :data:`_PERIODS`); None where one runs through more, or a piece straddles a period's end."""
    b, s = seg[side], np.maximum(seg["s" + side], 1)
    i0, i1, j0 = seg["i0"], seg["i1"], seg["j0"]
    lo, hi = (b + i0 * s + j0) // period, (b + (i1 - 1) * s + j0) // period
    count = hi - lo + 1
    if (count > _PERIODS).any():
        return None
    at = np.repeat(np.arange(len(b)), count)
    q = np.repeat(lo, count) + (np.arange(len(at)) - np.repeat(np.cumsum(count) - count, count))
    out = _take(seg, at)
    bb, ss, jj = b[at], s[at], j0[at]
    first = np.maximum(i0[at], -((bb + jj - q * period[at]) // ss))          # pieces starting in period q
    last = np.minimum(i1[at], -((bb + jj - (q + 1) * period[at]) // ss))
    out["i0"], out["i1"] = first, last
    return _take(out, last > first)


def _take(seg: dict, mask: np.ndarray) -> dict:
    return {key: v[mask] for key, v in seg.items()}


def _cut_at(seg: dict, side: str) -> tuple[list[dict], list[dict]]:
    """``seg``'s elements below ``_T`` and at or above it, as parts (pieces no wider than the stride: at most one
    straddles ``_T``)."""
    b, s, t = seg[side], np.maximum(seg["s" + side], 1), seg["_T"]
    i0, i1, j0, j1 = seg["i0"], seg["i1"], seg["j0"], seg["j1"]
    ia = np.clip((t - b - j1) // s + 1, i0, i1)            # pieces [i0, ia) end at or before t
    ib = np.clip(-((b + j0 - t) // s), i0, i1)             # pieces [ib, i1) start at or after it
    jm = t - b - ia * s                                     # the straddling piece ia (when ia < ib) splits here
    mid = np.minimum(ib, ia + 1)
    return ([dict(seg, i1=ia), dict(seg, i0=ia, i1=mid, j1=np.minimum(j1, jm))],
            [dict(seg, i0=ia, i1=mid, j0=np.maximum(j0, jm)), dict(seg, i0=ib)])


def run(plans, call: Call, ops: PlanArrays, sizes: np.ndarray, seed: int = 0, levels: tuple[int, ...] = ()):
    """The report of ``plans`` for ``call`` simulated on rank 0 (see the module), or why the quotient does not
    apply or what it finds wrong (a str: the grid then runs and reports it). ``levels``: the machine's group sizes,
    innermost first (devices in a server, servers, ...): its rotations are tried too."""
    from .sim import SimReport, counts        # (sim imports this module)
    n = call.nranks
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
    bases = _bases(seed, n)
    levels = tuple(z for z in levels if z > 1)
    shapes = [(n,)] + ([] if whole or len(levels) < 2 or int(np.prod(levels)) != n else
                       [levels] + ([(levels[0], n // levels[0])] if len(levels) > 2 else []))
    sample = np.unique(np.array([0, 1, n // 2, n - 1] + [a for a in levels[:1] if a < n]))
    scratch = [(block, _ALL), (block, 1), (block, 2)] if whole else [(0, 0), (block, _ALL), (block, 1), (block, 2)]
    for shape, (u_scr, k) in ((a, b) for a in shapes for b in scratch):
        # scratch: not rotated, or periods of n blocks, all or the first k (then slots); a cheap look at a few
        # ranks first: most plans that differ differ there
        axes, frame = _Axes(shape), np.array([units + [u_scr], [_ALL, _ALL, k]], np.int64)
        if _periods_kept(ops, frame, n) and _sides_alike(ops, n, frame, axes, bases, sample):
            break
    else:
        return "the sampled ranks' regions are not rank 0's rotated"
    keys = _Keys(n, whole.element_sizes if whole else sizes)       # (Checks keeps a weak reference)
    checks = Checks(keys, whole.ops if whole else ops)      # (the structural checks: on the plans' elements)
    if checks.match_steps or checks.xbad_step < ops.nsteps or checks.lbad_step < ops.nsteps:
        return "a structural fault"
    s, r = checks.sends, checks.recvs
    loc = np.flatnonzero((ops.local == 1) & (ops.src.size > 0))
    for a, b in ((s, r), (loc, loc)):
        if not (np.array_equal(ops.src.cnt[a], ops.dst.cnt[b]) and np.array_equal(ops.src.rep[a], ops.dst.rep[b])):
            return "the two sides of a move are cut into different pieces"
        if whole and not np.array_equal(whole.tail[0][a], whole.tail[1][b]):
            return "a move pairs the tail slice with another"
    if (checks.lead[0] >= checks.lead[1]).any():
        return "a rank's local operations of a step touch common data (their order matters)"
    if not _relations_alike(ops, n, frame, axes, bases, s, r, loc):
        return "the ranks' relations are not rank 0's rotated"
    post = [(c.offset, c.count, sum(1 << j for j in c.ranks), c.shift) for c in call.spec.post(call, 0) if c.count]
    n_in = call.input_count(0)
    if whole:
        post = [(0, n, bits, 0) for o, c, bits, shift in post if (o, c, shift) == (0, call.count, 0)]
        if len(post) != 1:
            return "a postcondition that is not whole slices"
        n_in = n
    atoms = _Rank0(ops, call, frame, axes, sizes, u_orig, s_orig, s, r, loc, n_in, post).run()
    if isinstance(atoms, str):
        return atoms
    rounds, sent = counts(whole.ops if whole else ops, n)      # (elements, not slices)
    return SimReport(n, rounds, sent, n * atoms, quotient=True)


def _bases(seed: int, n: int) -> np.ndarray:
    """Per prime, the hash's random bases ``g, h, k`` (``g h`` not 1: its geometric series has a denominator)."""
    rng = np.random.default_rng([seed, n, 20])
    while True:
        bases = rng.integers(2, _PRIMES[1] - 2, size=(len(_PRIMES), 3))
        if all(int(b[0]) * int(b[1]) % p != 1 for b, p in zip(bases, _PRIMES)):
            return bases


class _NotBlocks(Exception):
    """A region that is not whole floor + tail slices (:class:`_Blocks`)."""


class _Blocks:
    """The rows of an AllReduce whose count ``C`` N does not divide, in whole slices: HCCL's "floor + tail" cut
    (``f = C // N`` elements a slice, the last ``t = C - f (N - 1)``: NHR, Ring) makes slices of two sizes, and
    rank ``r``'s tail is rank 0's slice ``N - 1 - r``; no element-wise rotation maps one rank's plan onto another's. Slice-wise
    one does: where every region of every buffer is whole slices (a period of ``C`` elements is ``N`` units),
    rank 0 in units decides as before, and each move pairs slices of equal sizes (the tail with the tail: its
    sides' tail flags, ``tail[side][row]``, must agree). Raises :class:`_NotBlocks` otherwise."""

    def __init__(self, ops: PlanArrays, sizes: np.ndarray, count: int, n: int) -> None:
        f, t = count // n, count - count // n * (n - 1)
        if f == 0:
            raise _NotBlocks(f"a count of {count} over {n} ranks leaves slices empty")
        self.ops = ops
        for name in ("step", "rank", "local", "index", "kind", "peer", "nsteps", "step_start"):
            setattr(self, name, getattr(ops, name))
        self.src, tail_s = _in_slices(ops.src, f, t, n, count)
        self.dst, tail_d = _in_slices(ops.dst, f, t, n, count)
        self.tail = (tail_s, tail_d)
        self.element_sizes = sizes
        self.sizes = -(-sizes // count) * n         # (whole periods of n slices)


def _in_slices(side, f: int, t: int, n: int, count: int):
    """``side``'s regions in slices (period ``count`` elements, ``n`` slices: ``n - 1`` of ``f``, then ``t``), and
    whether each ends with the tail; raises :class:`_NotBlocks` where one is not whole slices."""
    from .rows import Side
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


class _Keys:
    """What :class:`~.checks.Checks` asks of a simulator: the ranks, the buffers' sizes and their keys."""

    def __init__(self, n: int, sizes: np.ndarray) -> None:
        self.n, self.sizes = n, sizes
        self.at = np.concatenate([[0], np.cumsum(sizes + 1)])
        self.span = int(self.at[3])

    def base(self, rank, buf) -> np.ndarray:
        return np.asarray(rank, dtype=np.int64) * self.span + self.at[np.asarray(buf)]


# -- the relations' hashes ------------------------------------------------------------------
@lru_cache(maxsize=64)
def _table(g: int, p: int) -> np.ndarray:
    """``g ** (i << 8 k) % p`` for ``k < 4``, ``i < 256``: an exponent below 2^32 in four lookups."""
    t = np.empty((4, 256), np.int64)
    for k in range(4):
        b = pow(g, 1 << (8 * k), p)
        t[k] = [pow(b, i, p) for i in range(256)]
    return t


def _pow(g: int, exp: np.ndarray, p: int) -> np.ndarray:
    """``g ** exp % p`` elementwise (``exp`` reduced mod ``p - 1``)."""
    e = np.asarray(exp, np.int64) % (p - 1)
    t = _table(g, p)
    out = t[0][e & 255]
    for k in (1, 2, 3):
        out = out * t[k][(e >> (8 * k)) & 255] % p
    return out


def _geometric(a: np.ndarray, m: np.ndarray, p: int) -> np.ndarray:
    """``sum(a ** t for t < m) % p`` elementwise (``a`` nonzero mod p): computed once per distinct ``(a, m)``."""
    key, inv = np.unique(a * (1 << 31) + m % (p - 1), return_inverse=True)     # (a, m < 2^31: one int64)
    out = np.empty(len(key), np.int64)
    for i, (ai, mi) in enumerate(zip((key >> 31).tolist(), (key & ((1 << 31) - 1)).tolist())):
        out[i] = mi % p if ai == 1 else (pow(ai, mi, p) - 1) * pow(ai - 1, p - 2, p) % p
    return out[inv.reshape(-1)]


def _hash(seg: dict, n: int, bases: np.ndarray, frame: np.ndarray, axes: _Axes) -> np.ndarray | None:
    """Per prime, per owner (``seg['own']`` below ``n``): the sum over the segments' elements, each side in its
    rank's frame, of ``g^x h^y k^key``; None where a region cannot be rotated piece by piece."""
    out = np.zeros((len(_PRIMES), n), np.int64)
    xs = _rotate(seg, "x", frame, axes)
    for p in xs or ():
        ys = _rotate(p, "y", frame, axes)
        if ys is None:
            return None
        for part in ys:
            out = (out + _hash_part(part, n, bases)) % np.array(_PRIMES, np.int64)[:, None]
    return out if xs is not None else None


def _hash_part(seg: dict, n: int, bases: np.ndarray) -> np.ndarray:
    """:func:`_hash` of segments that each stay in their period."""
    out = np.zeros((len(_PRIMES), n), np.int64)
    x0 = seg["x"] + seg["i0"] * seg["sx"] + seg["j0"]
    y0 = seg["y"] + seg["i0"] * seg["sy"] + seg["j0"]
    for k, p in enumerate(_PRIMES):
        g, h, kk = (int(v) for v in bases[k])
        term = _pow(g, x0, p) * _pow(h, y0, p) % p * _pow(kk, seg["key"], p) % p
        a = _pow(g, seg["sx"], p) * _pow(h, seg["sy"], p) % p
        term = term * _geometric(a, seg["i1"] - seg["i0"], p) % p
        gh = g * h % p
        inv = pow(gh - 1, p - 2, p)             # (g h is not 1: g, h drawn from [2, p - 2) and checked)
        term = term * ((_pow(gh, seg["j1"] - seg["j0"], p) - 1) % p * inv % p) % p
        out[k] = np.bincount(seg["own"], weights=term.astype(np.float64), minlength=n).astype(np.int64) % p
    return out


def _periods_kept(ops: PlanArrays, frame: np.ndarray, n: int) -> bool:
    """Whether every region of a rotated period lies within it (see :func:`_rotate`)."""
    for side in (ops.src, ops.dst):
        for b in range(3):
            period = int(frame[0][b]) * n
            rows = np.flatnonzero((side.buf == b) & (side.size > 0)) if period else ()
            if len(rows):
                first = side.off[rows] // period
                if ((first < frame[1][b]) & (first != (side.end[rows] - 1) // period)).any():
                    return False
    return True


def _segments(ops: PlanArrays, xrows, yrows, xrank, yrank, key) -> dict:
    """The moves from side ``src`` of ``yrows`` (in the frame of rank ``yrank``) to side ``dst`` of ``xrows``
    (owned by ``xrank``, in its frame), as segments (see :func:`_rotate`)."""
    d, s = ops.dst, ops.src
    zero = np.zeros(len(xrows), np.int64)
    return dict(x=d.off[xrows], sx=d.stride[xrows], bx=d.buf[xrows], rx=xrank, y=s.off[yrows], sy=s.stride[yrows],
                by=s.buf[yrows], ry=yrank, i0=zero, i1=d.rep[xrows], j0=zero, j1=d.cnt[xrows], key=key, own=xrank)


def _relations_alike(ops, n, frame, axes, bases, s, r, loc) -> bool:
    """Whether every rank's relation (its receives with their sources, its local operations) is rank 0's."""
    recv_rank, send_rank = ops.rank[r], ops.rank[s]
    rel = axes.rel(send_rank, recv_rank)
    key_x = ((ops.step[r] * 3) * n + rel) * 9 + ops.dst.buf[r] * 3 + ops.src.buf[s]
    key_l = ((ops.step[loc] * 3 + np.where(ops.kind[loc] == REDUCE, 2, 1)) * n) * 9 + ops.dst.buf[loc] * 3 \
        + ops.src.buf[loc]
    segs = [_segments(ops, r, s, recv_rank, send_rank, key_x),
            _segments(ops, loc, loc, ops.rank[loc], ops.rank[loc], key_l)]
    f = _hash({k: np.concatenate([a[k] for a in segs]) for k in segs[0]}, n, bases, frame, axes)
    return f is not None and bool((f == f[:, :1]).all())


def _sides_alike(ops, n, frame, axes, bases, sample) -> bool:
    """Whether each side of the rows of the ``sample`` ranks (what each sends and receives, to and from which
    relative rank; what its locals read and write) is rank 0's, rotated: a necessary condition, on few rows."""
    rows = np.flatnonzero(np.isin(ops.rank, sample) & ((ops.src.size > 0) | (ops.dst.size > 0)))
    rank = ops.rank[rows]
    who = np.searchsorted(sample, rank)
    rel = np.where(ops.local[rows] == 0, axes.rel(np.maximum(ops.peer[rows], 0), rank), 0)
    segs = []
    for side, code in ((ops.src, 0), (ops.dst, 1)):
        has = (side.buf[rows] >= 0) & (side.size[rows] > 0)
        rr, b = rows[has], side.buf[rows[has]]
        zero = np.zeros(len(rr), np.int64)
        key = ((ops.step[rr] * 4 + ops.kind[rr]) * n + rel[has]) * 6 + b * 2 + code
        segs.append(dict(x=side.off[rr], sx=side.stride[rr], bx=b, rx=rank[has], y=side.off[rr],
                         sy=side.stride[rr], by=b, ry=rank[has], i0=zero, i1=side.rep[rr], j0=zero, j1=side.cnt[rr],
                         key=key, own=who[has]))         # (y: x again)
    f = _hash({k: np.concatenate([a[k] for a in segs]) for k in segs[0]}, len(sample), bases, frame, axes)
    return f is not None and bool((f == f[:, :1]).all())


# -- rank 0, exactly ------------------------------------------------------------------------
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


class _Rank0:
    """Rank 0's run, from its rows: what it receives (read from the rotated state of rank 0, which is the
    sender's), then its local operations in order; then its output against the postcondition."""

    def __init__(self, ops: PlanArrays, call: Call, frame, axes: _Axes, sizes, u_orig: int, s_orig: int, s, r, loc,
                 n_in: int, post: list) -> None:
        self.ops, self.call, self.n, self.axes = ops, call, call.nranks, axes
        self.n_in, self.post = n_in, post           # (in the frame's units: elements, or whole slices)
        self.frame, self.unit, self.krot, self.size = frame, frame[0].tolist(), frame[1].tolist(), sizes.tolist()
        self.u_orig, self.s_orig = u_orig, s_orig
        mine = ops.rank[r] == 0
        self.recv, self.send = r[mine], s[mine]                 # rank 0's receives and their senders' rows
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
        """``(buf, offset, count)`` of each piece of ``side`` of ``row`` in ``rank``'s rotated frame, cut where it
        passes the buffer's end."""
        b, cnt = int(side.buf[row]), int(side.cnt[row])
        off, stride, rep = int(side.off[row]), int(side.stride[row]), int(side.rep[row])
        u = self.unit[b]
        period = u * self.n                  # (as _rotate: rotated in the buffer's first k periods)
        if not rank or not period or off // period >= self.krot[b]:
            for i in range(rep):
                yield b, off + i * stride, cnt
            return
        base = off // period * period
        for i in range(rep):
            pos, end, run = off + i * stride, off + i * stride + cnt, None
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
        ops = self.ops
        periods = [u * self.n for u in self.unit]      # (a rotated period, whole: its canonical places)
        self.bufs = [_Buffer(max(s, min(-(-s // p), int(k)) * p) if p else s)
                     for s, p, k in zip(self.size, periods, self.frame[1])]
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
        try:
            for t in range(ops.nsteps):
                recv = self.recv[steps_r == t]
                if len(recv):
                    self.transfers(recv, self.send[steps_r == t], self.sent[steps_s == t])
                for row in self.loc[steps_l == t].tolist():
                    self.local(row)
            self.check_post()
        except _Fault as e:
            return f"rank 0: {e}"
        return sum(len(b.starts) for b in self.bufs)

    def transfers(self, recv: np.ndarray, send: np.ndarray, sent: np.ndarray) -> None:
        """One step's receives of rank 0: every source read before any write (the step's sends run at once)."""
        ops, writes, dsts = self.ops, [], []
        for rrow, srow in zip(recv.tolist(), send.tolist()):
            q = int(ops.rank[srow])
            for (bd, x, cnt), (bs, y, cnt_s) in _aligned(self.pieces(ops.dst, rrow, 0), self.pieces(ops.src, srow, q)):
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
            for off, v in out.read(offset, offset + count):
                if v[0] != bits or v[1] != offset + off + shift:
                    raise _Fault("output differs from the postcondition")


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
