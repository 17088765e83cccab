"""Simulator: every rank's plan in one process, on symbolic data, every rank at once.

It checks what HCCL's own algorithm analyzer checks with DataSlice / BufferSemantic, and what
MSCCLang's checker does with chunks: (a) each step's sends meet receives of the same size in
the same step, in the same order per pair of ranks, so nothing deadlocks; (b) every output
element ends holding exactly the contributions the collective's OpSpec demands, each once.

It works on regions, not elements, and on arrays, not Python objects: the plans are flattened
into one row per action (:class:`~pyhccl.verify.rows.PlanArrays`), every buffer of every rank
is cut into atoms at the boundaries the plans use (one sorted grid of keys), and a step of every
rank is a few numpy operations over the atoms it moves. An atom's symbolic value is (number of
contributions, wrapping sum of per-rank random 64-bit keys, the exact set of ranks as a bit set
when N <= 64, origin index): above 64 ranks a missing, doubled or foreign contribution changes
the count or the key sum, except with probability about 2^-62. A count of ten billion costs what
a count of ten does; the cost grows with the pieces the plans move, not with their size.
Local operations run the i-th of every rank together; a rank's chain of reduces into one
destination (a reduction in rank order) runs as one batch, and a batch whose checks flag
anything is run again op by op, so that the fault is reported exactly where it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core.call import Call, OpSpec
from ..plan.format import format_plans
from ..plan.ir import Plan
from .atoms import Grid, cut_keys, progressions, rank_keys, ranges, unique
from .rows import REDUCE, PlanArrays, counts
from . import memory, quotient
from .checks import Checks
from .heap import heap
from .post import post_arrays, post_rows
from .report import Mismatch, ranks_text, wrong_ranges

__all__ = ["Mismatch", "SimulationError", "SimReport", "simulate"]

_MASK_MAX_RANKS = 64
_KEY_LIMIT = 2**62
_COALESCE_EVERY = 8         # steps between tries to merge atoms (doubled after a try that merges little)
# the grid is cut step by step, not all up front, where the plans have 2^18 piece ends a step or more and a piece
# of a sample of ranks would hold 3 atoms or more cut up front; until it has an eighth as many atoms as ends
_CUT_BY_STEP, _CUT_WIDTH, _CUT_SAMPLE, _CUT_REST = 1 << 18, 3, 16, 8


class SimulationError(Exception):
    """A plan set that deadlocks, mismatches, or computes the wrong contributions.

    Attributes:
        mismatches: every wrong output range found (empty for structural errors).
        step, rank: where the first problem is, when known.
    """

    def __init__(self, message: str, *, mismatches: Sequence[Mismatch] = (), step: int | None = None,
                 rank: int | None = None, grid: str = "") -> None:
        super().__init__(message + ("\n" + grid if grid else ""))
        self.mismatches = list(mismatches)
        self.step = step
        self.rank = rank


@dataclass(frozen=True, slots=True)
class SimReport:
    """What a passing simulation measured."""

    nranks: int
    rounds: int
    max_elements_sent: int
    atoms: int          # summed over the ranks' buffers
    quotient: bool = False      # simulated on rank 0 for every rank (pyhccl.verify.quotient): atoms is N x rank 0's


def simulate(plans: Sequence[Plan], call: Call | OpSpec, count: int | None = None, *, in_place: bool = False,
             seed: int = 0, levels: tuple[int, ...] = ()) -> SimReport:
    """Run ``plans`` (one per rank, in rank order) for ``call``.

    ``simulate(plans, spec, count, in_place=...)`` is the short form for calls that need only a
    per-rank count. ``levels``: the machine's group sizes, innermost first (devices in a server,
    servers in a pod, pods): a plan set alike on every rank up to a rotation of those runs on rank 0
    (:mod:`pyhccl.verify.quotient`).

    Raises:
        SimulationError: at the first structural problem (unmatched or mismatched transfer,
            out-of-bounds or overlapping region, uninitialised read, double-counted reduce),
            or after the run listing every output range that is wrong (as a grid cut once up front and
            never merged lists them: a run that cut it by step or merged atoms and finds wrong output
            runs again so, where memory allows).
        ValueError: plans not one per rank in rank order, or buffers too large to key
            (ranks x (input + output + scratch elements) >= 2^62).
        MemoryBudgetError: the simulation would need more memory than the process may use
            (:mod:`pyhccl.verify.memory`; ``PYHCCL_VERIFY_MEMORY`` sets the budget).
    """
    if isinstance(call, OpSpec):
        call = Call(call.name, len(plans), count or 0, in_place=in_place)
    with heap():
        layout = _Layout(plans, call)
        if len(plans) >= quotient.QUOTIENT_MIN_RANKS:
            try:
                rep = quotient.run(plans, call, layout, seed, levels)
            except (ArithmeticError, IndexError, ValueError) as e:     # a plan the quotient did not foresee: the grid
                rep = f"{type(e).__name__}: {e}"                         # decides (tests call quotient.run directly)
            if not isinstance(rep, str):
                return rep
        sim = _Sim(plans, call, seed, layout=layout)
        try:
            return sim.run()
        except SimulationError as e:
            if not (e.mismatches and (sim.late or sim.g.loose)):
                raise
            found = e.with_traceback(None)      # (its frames would keep the grid alive)
        # the output ranges reported depend on where the grid was cut: reported as the grid cut up front reports them
        del sim
        try:
            _Sim(plans, call, seed, exact=True).run()
        except SimulationError as exact:
            raise exact.with_traceback(None) from None
        except memory.MemoryBudgetError:
            pass
        raise found


class _Layout:
    """Every rank's plan as rows (:class:`PlanArrays`), the buffers' sizes and their keys: what the grid and the
    quotient share (and :class:`~.checks.Checks` asks of them)."""

    def __init__(self, plans: Sequence[Plan], call: Call) -> None:
        self.n = n = len(plans)
        if n != call.nranks:
            raise ValueError(f"expecting {call.nranks} plans for {call.op} over {call.nranks} ranks, got {n}")
        for r, p in enumerate(plans):
            if p.rank != r:
                raise ValueError(f"expecting plans in rank order, got plan of rank {p.rank} at index {r}")
        self.ins = ins = np.array([call.input_count(r) for r in range(n)], dtype=np.int64)
        self.shift = shift = np.array([call.in_place_offset(r) if call.in_place else 0 for r in range(n)],
                                      dtype=np.int64)
        nin = int(ins.max(initial=0))
        nout = max((call.output_count(r) for r in range(n)), default=0)
        if call.in_place:
            nout = max(nout, int((ins + shift).max(initial=0)))
        self.what = what = memory.task("simulating", call)     # for the memory guard's checks before large steps
        self.ops = ops = PlanArrays(plans, shift if call.in_place else None,
                                    reserve=lambda actions: memory.require(what, memory.BYTES_PER_ACTION * actions))
        nscr = max((int(side.end[(side.buf == 2) & (side.size > 0)].max(initial=0)) for side in (ops.src, ops.dst)))
        self.sizes = np.array([nin, nout, nscr], dtype=np.int64)
        # a rank's keys: its input, output and scratch one after the other, one unused key after each
        self.at = np.concatenate([[0], np.cumsum(self.sizes + 1)])
        self.span = int(self.at[3])

    def base(self, rank, buf) -> np.ndarray:
        """The key of element 0 of ``buf`` (code) of ``rank``."""
        return np.asarray(rank, dtype=np.int64) * self.span + self.at[np.asarray(buf)]


class _Sim:
    def __init__(self, plans: Sequence[Plan], call: Call, seed: int, exact: bool = False,
                 layout: _Layout | None = None) -> None:
        self.plans, self.call = plans, call
        lay = layout or _Layout(plans, call)
        self.n = n = len(plans)
        self.keys = rank_keys(n, seed)
        self.use_mask = n <= _MASK_MAX_RANKS
        ins, shift, what, ops = lay.ins, lay.shift, lay.what, lay.ops
        self.what, self.ops, self.sizes = what, ops, lay.sizes
        nin, nout, nscr = lay.sizes.tolist()
        self.at, self.span, self.base = lay.at, lay.span, lay.base
        if n * self.span >= _KEY_LIMIT:
            raise ValueError(f"expecting ranks x (input + output + scratch elements) < 2^62 to simulate, got {n} x "
                             f"({nin} + {nout} + {nscr}): use a smaller count")
        self.step = -1
        self.marks = np.zeros(0, bool)      # the atoms a step sends (transfers)
        self.checks = Checks(self, ops)
        # the initial data: rank r's input, at its shift in the output when in place
        first = 1 if call.in_place else 0
        in_lo = self.base(np.arange(n, dtype=np.int64), first) + shift
        self.init = (in_lo[ins > 0], (in_lo + ins)[ins > 0], np.flatnonzero(ins > 0))
        memory.require(what, memory.BYTES_PER_POST_ROW * post_rows(call))
        self.post = post = post_arrays(call, self.keys, self.use_mask)
        self.post_lo = self.base(post.rank, 1) + post.off         # first key of each postcondition row
        bids = np.arange(3 * n, dtype=np.int64)
        starts = self.base(bids // 3, bids % 3)
        regions = self.checks.regions()
        extra = np.concatenate([starts, starts + self.sizes[bids % 3], self.init[0], self.init[1],
                                self.post_lo, self.post_lo + post.cnt * post.rep])
        ends = 2 * int(regions[2].sum()) + len(extra)
        per_atom = memory.RUN_BYTES_PER_ATOM + 8 * self.use_mask
        held = memory.resident() if per_atom * ends >= memory.MIN_CHECK_BYTES else None    # (a small call reads nothing)
        # each step cuts the grid where it moves data, so that atoms a later step cuts finer are not moved finer
        # before it (a level's reduce-scatter on the blocks that the next level splits); with many steps
        # (MeshChunk's N^2 rounds) each step's cut, a pass over the grid, costs more than that
        self.late = self.by_step = (not exact and ends >= _CUT_BY_STEP * max(ops.nsteps, 1)
                                    and self.cut_finer(regions, extra))
        self.cut_rest, self.grown = ends // _CUT_REST, 0
        if self.late:
            keys = unique(extra)
        else:
            memory.require(what, memory.CUT_BYTES_PER_END * ends)
            keys = cut_keys(*regions, extra)
        self.bounds = unique(np.concatenate([starts, starts + self.sizes[bids % 3]]))
        del regions, extra
        if held is not None:
            memory.require(what, held - memory.resident() + per_atom * len(keys))
        self.exact = exact
        self.g = g = Grid(keys, self.use_mask, reserve=lambda new, have: memory.require(   # (no cycle through self)
            what, per_atom * new + 16 * have))
        idx, who = ranges(np.searchsorted(keys, self.init[0]), np.searchsorted(keys, self.init[1]))
        r = self.init[2][who]
        g.card[idx] = 1
        g.key[idx] = self.keys[r]
        if self.use_mask:
            g.mask[idx] = np.left_shift(np.int64(1), r.astype(np.int64))
        g.origin[idx] = keys[idx] - self.init[0][who]

    # -- errors -------------------------------------------------------------------------
    def fail(self, rank: int, what: str) -> SimulationError:
        grid = format_plans(self.plans, mark=(self.step, rank))
        return SimulationError(f"step {self.step}, rank {rank}: {what}", step=self.step, rank=rank, grid=grid)

    # -- run ------------------------------------------------------------------------------
    def run(self) -> SimReport:
        ops = self.ops
        every = due = _COALESCE_EVERY
        for t in range(ops.nsteps):
            if t == due and not self.exact:     # merge the atoms that hold one value: later steps move fewer
                every = every if self.g.coalesce(self.bounds) else 2 * every
                due = t + every
            self.step = t
            if self.by_step:
                self.cut(t)     # (sets by_step False once it has cut every step left)
            self.checks.before_transfers(t)
            self.transfers(t)
            for batch in self.checks.local_batches(t):
                if not batch[5]:
                    self.local(batch)
                elif not self.local_merged(batch):     # a fault: run the rest of the step op by op to name it
                    for b in self.checks.local_batches(t, replay_from=batch[4]):
                        self.local(b)
                    raise AssertionError(f"step {t}: merged local operations flagged a fault that replaying "
                                         f"them one at a time does not raise")
        self.step = ops.nsteps
        if self.g.loose:
            post = self.post
            first = progressions(self.post_lo, post.cnt, post.rep)
            self.g.refine(np.concatenate([first, first + np.repeat(post.cnt, post.rep)]))
        self.check_post()
        return SimReport(self.n, *counts(ops, self.n), len(self.g.keys) - 3 * self.n)

    def cut_finer(self, regions, extra: np.ndarray) -> bool:
        """Whether a piece holds :data:`_CUT_WIDTH` atoms or more, on average, once the grid is cut up front: measured
        on a sample of ranks (a rank's buffers are cut by its own regions alone)."""
        key, cnt, rep, stride = regions
        pick = np.unique(np.linspace(0, self.n - 1, _CUT_SAMPLE).astype(np.int64))
        sel = np.isin(key // self.span, pick)
        key, cnt, rep = key[sel], cnt[sel], rep[sel]
        keys = cut_keys(key, cnt, rep, stride[sel], extra[np.isin(extra // self.span, pick)])
        width = np.searchsorted(keys, key + cnt) - np.searchsorted(keys, key)     # a region's first piece
        return int((width * rep).sum()) >= _CUT_WIDTH * int(rep.sum())

    def cut(self, t: int) -> None:
        """Cut the grid at both ends of every piece step ``t`` moves; once the grid has most of its atoms, or
        has grown by half at two steps (NHR's halving: every step cuts every block finer), at those of every step
        left (a pass over the grid a step costs more than it saves)."""
        if len(self.g.keys) >= self.cut_rest or self.grown >= 2:
            self.by_step = False
        regions = self.checks.regions(t, t if self.by_step else None)
        if len(regions[0]):
            memory.require(self.what, memory.CUT_BYTES_PER_END * 2 * int(regions[2].sum()))
            before = len(self.g.keys)
            self.g.refine(cut_keys(*regions, np.empty(0, np.int64)))
            self.grown += 2 * len(self.g.keys) >= 3 * before

    def transfers(self, t: int) -> None:
        srows, drows, a, b = self.checks.transfer_moves(t)
        if not len(srows):
            return
        g = self.g
        memory.require_moves(self.what, g.keys, a, b)
        s, d, sm, shift = g.pair(a, b)
        bad = g.card[s] == 0
        if bad.any():
            row = srows[sm[np.argmax(bad)]]
            raise self.fail(int(self.ops.rank[row]), f"reads {self.ops.action(row).src}, which holds no data yet "
                                                     f"(read before write)")
        if len(d) > 1 and not (d[1:] > d[:-1]).all():     # not increasing: some atom may be written twice
            order = np.argsort(d, kind="stable")
            dup = np.flatnonzero(d[order][1:] == d[order][:-1])
            if len(dup):
                row = drows[sm[order[dup + 1]].min()]
                raise self.fail(int(self.ops.rank[row]), f"receives into {self.ops.action(row).dst}, which "
                                                         f"another receive of this step also writes")
        if len(self.marks) != len(g.keys):
            self.marks = np.zeros(len(g.keys), bool)          # all False between uses
        self.marks[s] = True
        hit = self.marks[d]
        self.marks[s] = False
        if hit.any():
            row = drows[sm[np.argmax(hit)]]
            raise self.fail(int(self.ops.rank[row]), f"receives into {self.ops.action(row).dst}, which it sends "
                                                     f"in the same step")
        for f in g.values():
            f[d] = f[s]
        if shift is not None:
            g.origin[d] += shift
        g.writer[d] = t

    def local_merged(self, batch) -> bool:
        """Run a batch where a rank has several rows (its leading locals that touch disjoint data, a chain of
        reduces into one destination); False (nothing written) where any check could fail, for :meth:`local`
        to run op by op and report."""
        rows, a, b, static = batch[:4]
        if static is not None:
            return False
        g = self.g
        memory.require_moves(self.what, g.keys, a, b)
        s, d, m, shift = g.pair(a, b)
        if (g.card[s] == 0).any():
            return False
        red = (self.ops.kind[rows] == REDUCE)[m]
        dd, sr = d[red], s[red]
        origin = g.origin[s] if shift is None else g.origin[s] + shift     # what each destination atom reads
        if (g.card[dd] == 0).any() or (g.origin[dd] != origin[red]).any():
            return False
        if len(dd) < 2 or (dd[1:] > dd[:-1]).all():          # each destination atom once
            u, inv = dd, None
        else:
            u, inv = np.unique(dd, return_inverse=True)

        def acc(at_u, v, op=np.add):
            """The destinations' values ``at_u`` with the sources' ``v`` folded in (by ``op``)."""
            if inv is None:
                return op(at_u, v)
            op.at(at_u, inv, v)
            return at_u

        card = acc(g.card[u], g.card[sr])
        if (card > self.n).any():
            return False
        if self.use_mask:
            mask = acc(g.mask[u], g.mask[sr], np.bitwise_or)
            bits = acc(np.bitwise_count(g.mask[u].view(np.uint64)).astype(np.int64),
                       np.bitwise_count(g.mask[sr].view(np.uint64)))
            if (np.bitwise_count(mask.view(np.uint64)) != bits).any():
                return False
        self.write(s, d, red, origin, u, card, acc(g.key[u], g.key[sr]), mask if self.use_mask else None)
        return True

    def local(self, batch) -> None:
        rows, a, b, static = batch[:4]
        ops, g = self.ops, self.g
        if len(rows):
            memory.require_moves(self.what, g.keys, a, b)
            s, d, m, shift = g.pair(a, b)
        else:
            s = d = m = np.empty(0, np.int64)
            shift = None
        red = (ops.kind[rows] == REDUCE)[m]
        origin = g.origin[s] if shift is None else g.origin[s] + shift     # what each destination atom reads
        flags = [  # per atom, in the order the checks report them; a message takes the action and its move
            (g.card[s] == 0, lambda a, j: f"reads {a.src}, which holds no data yet (read before write)"),
        ]
        if red.any():           # the reduces' checks (a batch of copies, a rank's first copy of its input, has none)
            flags += [
                (red & (g.card[d] == 0), lambda a, j: f"reads {a.dst}, which holds no data yet (read before write)"),
                (red & (g.origin[d] != origin), lambda a, j: f"'{a}' reduces elements of different origin indices"),
            ]
            if self.use_mask:
                both = np.where(red, g.mask[d] & g.mask[s], 0)
                flags.append((both != 0, lambda a, j: f"'{a}' counts the contribution of ranks "
                                                      f"{ranks_text(np.bitwise_or.reduce(both[m == j]))} twice"))
            flags.append((red & (g.card[d] + g.card[s] > self.n),
                          lambda a, j: f"'{a}' gives more than {self.n} contributions: some counted twice"))
        first, what = None, None
        for flag, text in flags:
            if flag.any():
                j = int(m[flag].min())
                if first is None or j < first:
                    first, what = j, text
        if static is not None and (first is None or static[0] < int(ops.rank[rows[first]])):
            raise self.fail(*static)
        if first is not None:
            row = rows[first]
            raise self.fail(int(ops.rank[row]), what(ops.action(row), first))
        dd, sr = d[red], s[red]
        self.write(s, d, red, origin, dd, g.card[dd] + g.card[sr], g.key[dd] + g.key[sr],
                   g.mask[dd] | g.mask[sr] if self.use_mask else None)

    def write(self, s, d, red, origin, u, card, key, mask) -> None:
        """A batch's results: the copies' destination atoms ``d[~red]`` take their sources' values (``origin``:
        what each reads), the reduced atoms ``u`` their new ``card``, ``key`` and ``mask``."""
        g = self.g
        if len(u):              # some atoms reduced (u is empty exactly when red is all False): the rest copied
            copied = ~red
            dc, sc, oc = d[copied], s[copied], origin[copied]
        else:
            dc, sc, oc = d, s, origin
        for f in g.values():
            if f is not g.origin:       # the origin each copy reads is oc (its source's, shifted)
                f[dc] = f[sc]
        g.origin[dc] = oc
        g.card[u], g.key[u] = card, key
        if mask is not None:
            g.mask[u] = mask
        g.writer[d] = self.step

    # -- the postcondition ----------------------------------------------------------------
    def check_post(self) -> None:
        bad = wrong_ranges(self)
        if not bad:
            return
        first = bad[0]
        grid = format_plans(self.plans, mark=(first.step if first.step is not None and first.step >= 0
                                              else 0, first.rank))
        msg = (f"{len(bad)}{'+' if len(bad) >= 32 else ''} output ranges wrong; first: {first}\n"
               + "\n".join(f"  {m}" for m in bad[1:6]))
        raise SimulationError(msg, mismatches=bad, step=first.step, rank=first.rank, grid=grid)
