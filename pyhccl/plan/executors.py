"""HCCL's executors: how templates compose across levels, data parts and link kinds.

hccl-templates.md §3. Each executor here returns one rank's steps; steps from parts that HCCL
runs at the same time are merged step by step (:func:`merge`), so over MPI their requests sit
in one Waitall and in the simulator they run in the same round.

- Sole (§3.1): one template over all ranks (:mod:`pyhccl.plan.sole`).
- Sequence (§3.2): levels one after another in HCCL's code order per op.
- Parallel (§3.3): two data parts over mesh->NHR and NHR->mesh level orders at once.
- Concur (§3.4): the same ranks over two link kinds at once, data split by HCCL's weights.
- PipeLine (§3.5, OmniPipe): data in slices so that one slice's level-1 stage overlaps the
  next slice's level-0 stage.
- StrictOrdered (§1.13) and the TwoShot / 2-die AllReduce executors (§3.6): ReduceScatter
  then AllGather on one level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import product, zip_longest
from typing import Callable, Sequence

from .ir import Buf, Region, Step, copy, recv, scratch_ends, send
from .shared import EVERY, Merged, Renamed, action_count
from .slices import Slices, VSlices
from .templates import positions

__all__ = ["Levels", "merge", "split_links", "pad", "cut_sequence", "block_sequence", "parallel_ratio",
           "concur_weights", "omnipipe_slice_count"]


class LayoutError(ValueError):
    """A layout an executor cannot compose (unequal groups, numbering not level-0 fastest)."""


# -- step-list algebra ------------------------------------------------------------------------
def merge(*parts: Sequence[Step]) -> list[Step]:
    """Step lists that run at the same time: step i of every part runs in step i together."""
    out = []
    for group in zip_longest(*parts):
        steps = [s for s in group if s is not None]
        if any(type(s) is Renamed or type(s) is Merged for s in steps):    # kept as the parts: made when read
            out.append(Merged(tuple(s for s in steps if action_count(s))))
        else:
            out.append(Step(tuple(a for s in steps for a in s.transfers), tuple(a for s in steps for a in s.local)))
    return out


def pad(steps: list[Step], length: int) -> list[Step]:
    """``steps`` followed by empty steps up to ``length`` (a phase every rank spends as many steps in)."""
    if len(steps) > length:
        raise AssertionError(f"phase of {len(steps)} steps, expected at most {length}")
    return steps + [Step() for _ in range(length - len(steps))]


def scratch_end(steps: Sequence[Step]) -> int:
    """One past the highest scratch element ``steps`` touch.

    Each step's figure is remembered by identity (with the step held, so its id stays its
    own): the memoised templates hand every rank of a call the same Step objects.
    """
    end = 0
    for s in steps:
        if type(s) is Merged:
            end = max(end, scratch_end(s.parts))
            continue
        below, delta = None, 0
        if type(s) is Renamed:
            m = s.moved
            if m is not None and m[0] is Buf.SCRATCH:       # regions in scratch moved (below ``m[2]``: data only)
                below, delta = (m[2] if len(m) == 3 else EVERY), m[1]
            s = s.template      # its scratch is the template's: counted once for every group and move
        low, high = _ends(s, below)
        end = max(end, low + delta if low else 0, high)
    return end


def _ends(s: Step, below: int | None) -> tuple[int, int]:
    """One past the highest scratch element of ``s``'s regions that start below ``below`` and of the others
    (None: all in the second), remembered."""
    key = (id(s), below)
    hit = _STEP_END.get(key)
    if hit is None or hit[0] is not s:
        if len(_STEP_END) >= _STEP_END_SIZE:
            _STEP_END.clear()
        hit = _STEP_END[key] = (s, *scratch_ends((s,), below))
    return hit[1], hit[2]


_STEP_END: dict[tuple[int, int | None], tuple[Step, int, int]] = {}
_STEP_END_SIZE = 1 << 16


def split_links(steps: Sequence[Step], shares: Sequence[float]) -> list[Step]:
    """Every transfer cut into one message per channel, in proportion to ``shares``.

    HCCL CalcDataSplitByPortGroupCommon / CalcDataSplitByPortGroupZAxisDetour
    (src/ops/op_common/template/template_utils.cc): channel i gets floor(count*share_i), the
    last channel the remainder. Sender and receiver cut regions of equal size the same way,
    so the pieces still match. Strided regions stay whole (one message through staging).
    """
    if len(shares) < 2:
        return list(steps)
    out = []
    for s in steps:
        xfer = []
        for a in s.transfers:
            r = a.src if a.src is not None else a.dst
            if r.repeat > 1 or r.count < len(shares):
                xfer.append(a)
                continue
            sizes = [int(r.count * f) for f in shares[:-1]]
            sizes.append(r.count - sum(sizes))
            off = r.offset
            for k in sizes:
                if k:
                    piece = Region(r.buf, off, k)
                    xfer.append(send(a.peer, piece) if a.src is not None else recv(a.peer, piece))
                off += k
        out.append(Step(tuple(xfer), s.local))
    return out


# -- levels -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Levels:
    """One rank's algorithm levels: its groups, their sizes and its coordinate in each.

    HCCL numbers ranks level 0 fastest (global rank = idx0 + L0*idx1 + L0*L1*idx2,
    hccl-templates.md §0.4), which the executors' block arithmetic relies on.
    """

    rank: int
    groups: tuple[tuple[int, ...], ...]

    @cached_property
    def dims(self) -> tuple[int, ...]:
        return tuple(len(g) for g in self.groups)

    @cached_property
    def me(self) -> tuple[int, ...]:
        return tuple(g.index(self.rank) for g in self.groups)

    @cached_property
    def mult(self) -> tuple[int, ...]:
        return _mults(self.dims)

    def coords(self, rank: int) -> tuple[int, ...]:
        return tuple(rank // m % d for m, d in zip(self.mult, self.dims))

    @classmethod
    def of(cls, rank: int, groups: Sequence[Sequence[int]], nranks: int, uniform: bool, name: str) -> Levels:
        """This rank's levels; LayoutError unless the groups form HCCL's regular grid (which also
        makes every rank's groups agree, whatever ``uniform`` says of the machine)."""
        lv = cls(rank, tuple(tuple(g) for g in groups))
        if math.prod(lv.dims) != nranks:
            raise LayoutError(f"{name} needs {len(groups)} levels of equal-size groups whose sizes multiply to "
                              f"{nranks} ranks; this layout has groups of sizes {lv.dims}"
                              f"{'' if uniform else ' and levels of unequal groups'}")
        me, mult = lv.me, lv.mult
        if sum(c * m for c, m in zip(me, mult)) != rank or any(
                g != tuple(range(rank - me[k] * mult[k], rank + (len(g) - me[k]) * mult[k], mult[k]))
                for k, g in enumerate(lv.groups)):
            raise LayoutError(f"{name} needs ranks numbered level 0 fastest (HCCL's order); "
                              f"rank {rank} has groups {lv.groups}")
        return lv


def _mults(dims: Sequence[int]) -> tuple[int, ...]:
    """Rank distance between neighbours at each level: 1, L0, L0*L1, ..."""
    m, out = 1, []
    for d in dims:
        out.append(m)
        m *= d
    return tuple(out)


# -- cut-style sequences: AllReduce, Broadcast, Reduce ----------------------------------------
def cut_sequence(lv: Levels, order: Sequence[int], down: Callable, up: Callable | None, data: Region,
                 scratch: int, *, root: int | None = None, down_rooted: bool = False,
                 up_rooted: bool = False) -> list[list[Step]]:
    """Phases of a level sequence that cuts ``data`` level by level (HCCL's AllReduce Sequence).

    Down the levels in ``order`` each level cuts the region it got into "floor + tail" slices
    over its group (slice = floor(curr/L), the last position takes the rest;
    ins_v2_all_reduce_sequence_executor_aicpu.cc) and runs ``down`` (ReduceScatter, or Scatter
    from the root's position with ``down_rooted``); then back up in reverse order ``up``
    (AllGather, or Gather to the root with ``up_rooted``). ``down(level, group, pos, slices,
    root_pos, scratch)`` and ``up(...)`` return steps. Rooted phases run only in the groups on
    the root's path; the others spend the same number of empty steps, so every rank's phases
    line up. Returns one step list per phase.
    """
    me, dims = lv.me, lv.dims
    rc = lv.coords(root) if root is not None else None
    phases: list[list[Step]] = []
    region, largest = data, data.count
    cuts = []
    for s, k in enumerate(order):
        sl = Slices.floor_tail(region.offset, region.count, dims[k])
        big = Slices.floor_tail(region.offset, largest, dims[k])
        active = not down_rooted or all(me[l] == rc[l] for l in order[s + 1:])
        rpos = rc[k] if down_rooted else None
        probe = down(k, positions(dims[k]), 0, big, 0 if down_rooted else None, scratch)
        steps = down(k, lv.groups[k], me[k], sl, rpos, scratch) if active else []
        phases.append(pad(steps, len(probe)))
        scratch = max(scratch, scratch_end(probe))     # each phase its own scratch: see aligned()
        cuts.append((k, sl, big, rc[k] if rc is not None else None))
        region = Region(data.buf, region.offset + me[k] * sl.size, sl.count(me[k]))
        largest = big.count(dims[k] - 1)
    if up is None:
        return phases
    for s, (k, sl, big, rpos) in enumerate(reversed(cuts)):
        done = [kk for kk, *_ in reversed(cuts)][:s]
        active = not up_rooted or all(me[l] == rc[l] for l in done)
        probe = up(k, positions(dims[k]), 0, big, 0 if up_rooted else None, scratch)
        steps = up(k, lv.groups[k], me[k], sl, rpos if up_rooted else None, scratch) if active else []
        phases.append(pad(steps, len(probe)))
        scratch = max(scratch, scratch_end(probe))
    return phases


# -- block-style sequences: ReduceScatter, AllGather, Scatter --------------------------------
def block_slices(lv: Levels, k: int, fixed: Sequence[int], c: int, lo: int, hi: int, base: int) -> VSlices | None:
    """Slices of per-rank blocks over my level-``k`` group.

    Slice ``j`` = the blocks whose level-k coordinate is j and whose coordinates at the levels
    in ``fixed`` are mine (all values at the other levels): HCCL's strided ``repeatNum``
    slices (ins_v2_reduce_scatter_sequence_executor_aicpu.cc). Each block contributes its
    window ``[lo, hi)``; ``base`` is where block 0 starts. None when the window is empty.
    """
    if hi <= lo or c == 0:
        return None
    return _block_slices(lv.dims, k, tuple(fixed), sum(lv.me[l] * lv.mult[l] for l in fixed), c, lo, hi, base)


@lru_cache(maxsize=4096)
def _block_slices(dims: tuple[int, ...], k: int, fixed: tuple[int, ...], start: int, c: int, lo: int, hi: int,
                  base: int) -> VSlices:
    """:func:`block_slices` for the ranks whose blocks at the ``fixed`` levels start at block ``start``
    (the same for every member of a group at those levels: computed once per group)."""
    w = hi - lo
    mult = _mults(dims)
    free = [l for l in range(len(dims)) if l != k and l not in fixed]
    blocks = sorted(start + sum(x * mult[l] for x, l in zip(xs, free)) for xs in product(*(range(dims[l]) for l in free)))
    runs: list[list[int]] = []
    for b in blocks:
        a = b * c + lo
        if runs and w == c and runs[-1][0] + runs[-1][1] == a:
            runs[-1][1] += w
        else:
            runs.append([a, w])
    length = runs[0][1]
    gaps = {y[0] - x[0] for x, y in zip(runs, runs[1:])}
    if any(r[1] != length for r in runs) or len(gaps) > 1:
        raise LayoutError(f"level {k}'s blocks do not form one strided pattern for this level order")
    stride = gaps.pop() if gaps else None
    offs = tuple(base + runs[0][0] + j * mult[k] * c for j in range(dims[k]))
    return VSlices(offs, (length,) * dims[k], len(runs), stride if len(runs) > 1 else None)


def block_sequence(lv: Levels, order: Sequence[int], run: Callable, c: int, lo: int, hi: int, base: int,
                   scratch: int, *, narrowing: bool, root: int | None = None) -> list[list[Step]]:
    """Phases of a level sequence over per-rank blocks (ReduceScatter, Scatter: ``narrowing``;
    AllGather: widening), in ``order``. ``run(level, group, pos, slices, root_pos, scratch)``.

    Narrowing: before level ``order[s]`` I hold the blocks whose coordinates at ``order[:s]``
    are mine. Widening: the blocks whose coordinates at ``order[s+1:]`` are mine. A rooted
    narrowing sequence (Scatter) runs a level only in the groups on the root's path.
    """
    me = lv.me
    rc = lv.coords(root) if root is not None else None
    phases = []
    for s, k in enumerate(order):
        fixed = list(order[:s]) if narrowing else list(order[s + 1:])
        sl = block_slices(lv, k, fixed, c, lo, hi, base)
        if sl is None:
            phases.append([])
            continue
        rpos = rc[k] if rc is not None else None
        active = rc is None or all(me[l] == rc[l] for l in order[s + 1:])
        probe = run(k, positions(lv.dims[k]), 0, sl, 0 if rc is not None else None, scratch)
        phases.append(pad(run(k, lv.groups[k], me[k], sl, rpos, scratch) if active else [], len(probe)))
        scratch = max(scratch, scratch_end(probe))
    return phases


# -- HCCL's split rules ----------------------------------------------------------------------
def parallel_ratio(op: str, dims: Sequence[int]) -> float:
    """The Parallel executor's part-0 share: CalcParallelDataSplitRatio's built-in formula.

    src/ops/op_common/template/template_utils.cc (hccl-templates.md §3.3) with one port per
    link (pyhccl emulates no port groups): intraPorts = L0-1, interPorts = 1. Scatter is fixed
    at 0.5 (ins_v2_scatter_parallel_executor.cc); AllGather's share is capped at 0.5; the
    result is quantised to k/8, k in 1..7.
    """
    l0, l1 = dims[0], dims[1]
    if op == "scatter" or l0 < 2 or l1 < 2:
        return 0.5
    intra, inter = l0 - 1, 1
    if op in ("allreduce", "reduce_scatter", "reduce"):
        mesh, clos = 21 * (l0 - 1) / (20 * l0 * intra), (l1 - 1) / (l1 * inter)
    elif op == "broadcast":
        mesh, clos = (l0 - 1) / (l0 * intra), (l1 - 1) / (l1 * inter)
    else:
        mesh, clos = (l0 - 1) / intra, (l1 - 1) / inter
    r = clos / (clos + mesh)
    if op == "all_gather":
        r = min(r, 0.5)
    return min(7, max(1, round(r * 8))) / 8


#: Concur weights (w0 mesh : w1 CLOS) per op and engine (hccl-templates.md §3.4).
_CONCUR_WEIGHTS = {
    ("all_gather", "CCU"): (11, 10), ("all_gather", "Aicpu"): (37, 25),
    ("allreduce", "CcuSched"): (11, 10), ("allreduce", "CcuMS"): (22, 10), ("allreduce", "Aicpu"): (11, 10),
    ("reduce_scatter", "CcuSched"): (10, 12), ("reduce_scatter", "CcuMS"): (11, 10),
    ("reduce_scatter", "Aicpu"): (21, 20),
    ("alltoall", "CCU"): (100, 113), ("alltoall", "Aicpu"): (10, 12), ("alltoallv", "CCU"): (12, 10),
}


def concur_weights(op: str, engine: str, n: int) -> tuple[int, int]:
    """w0:w1 for the Concur executor; default (N-1):4 (ins_v2_*_concurrent_executor.cc)."""
    engine = {"CcuMs": "CcuMS"}.get(engine, engine)
    for key in ((op, engine), (op, "CCU" if engine.startswith("Ccu") else engine)):
        if key in _CONCUR_WEIGHTS:
            return _CONCUR_WEIGHTS[key]
    return max(n - 1, 1), 4


def omnipipe_slice_count(x: int, b: float = 1.0) -> int:
    """OmniPipe's step count T for an axis of ``x`` ranks and bandwidth ratio ``b`` = yB/xB.

    src/ops/op_common/omnipipe_data_slice_calc.cc CalAllgatherDataSize2D (hccl-templates.md
    §1.9): q = (X-1)/b; T = ceil(log(X-b)/log q) + 1 when X > b (b+1 when q = 1), capped at
    MAX_STEP_NUM = 5. pyhccl takes HCCL's default equal bandwidths (BW_OMNI_DEFAULT on both
    axes), so b = 1.
    """
    if x <= b:
        return 1
    q = (x - 1) / b
    t = int(b + 1) if q == 1 else math.ceil(math.log(x - b) / math.log(q)) + 1
    return max(1, min(t, 5))


def window_parts(lo: int, hi: int, shares: Sequence[float]) -> list[tuple[int, int]]:
    """``[lo, hi)`` cut in proportion to ``shares`` (floors, the last part takes the rest)."""
    w, out, at = hi - lo, [], lo
    for i, f in enumerate(shares):
        k = hi - at if i == len(shares) - 1 else int(w * f)
        out.append((at, at + k))
        at += k
    return out


def aligned(at_least: int, lo: int, period: int) -> int:
    """The first scratch offset >= ``at_least`` that is ``lo`` modulo ``period``.

    A part working on the window starting at ``lo`` then keeps its scratch mirror a whole
    number of periods from its data, as a part alone at ``lo = 0`` would. The simulator's
    atom grid is shared by all steps, so scratch reused at another offset from the same data
    (by another part, or by another phase) makes it split element by element; parts and
    phases therefore get scratch areas of their own.
    """
    if period <= 0:
        return at_least
    return lo + max(0, -(-(at_least - lo) // period)) * period


def copy_step(dst: Region, src: Region) -> list[Step]:
    """One step copying ``src`` to ``dst`` (an empty step when there is nothing to copy)."""
    return [Step(local=(copy(dst, src),))] if dst.size and dst != src else [Step()]


def in_blocks(buf: Buf, c: int, lo: int, hi: int, n: int) -> Region | None:
    """The window ``[lo, hi)`` of all n blocks of c elements, as one region."""
    w = hi - lo
    if w <= 0 or n == 0:
        return None
    if w == c or n == 1:
        return Region(buf, lo, (n - 1) * c + w)
    return Region(buf, lo, w, n, c)


def skew(slice_phases: Sequence[list[list[Step]]]) -> list[Step]:
    """A software pipeline: slice i's phase p runs in super-step i+p, concurrently with the others."""
    nphase = max((len(p) for p in slice_phases), default=0)
    out: list[Step] = []
    for t in range(len(slice_phases) + nphase - 1):
        live = [ph[t - i] for i, ph in enumerate(slice_phases) if 0 <= t - i < len(ph)]
        out += merge(*live)
    return out


def flatten(phases: Sequence[list[Step]]) -> list[Step]:
    return [s for p in phases for s in p]


def zip_phases(a: Sequence[list[Step]], b: Sequence[list[Step]]) -> list[Step]:
    """Two parts' phases side by side: phase i of each runs together (the Parallel executor)."""
    return flatten(merge(x or [], y or []) for x, y in zip_longest(a, b))

