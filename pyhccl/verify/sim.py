"""Simulator: every rank's plan in one process, on symbolic data.

It checks what HCCL's own algorithm analyzer checks with DataSlice / BufferSemantic, and what
MSCCLang's checker does with chunks: (a) each step's sends meet receives of the same size in
the same step, in the same order per pair of ranks, so nothing deadlocks; (b) every output
element ends holding exactly the contributions the collective's OpSpec demands, each once.

It works on regions, not elements: each buffer is cut into atoms at the boundaries the plans
use, and an atom's symbolic value is (number of contributions, sum of per-rank random keys,
bit set of ranks when N <= 64, origin index). A count of ten billion costs what a count of
ten does; the cost grows with the number of distinct slices, not their size.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core.call import Call, OpSpec
from ..plan.format import format_plans
from ..plan.ir import Action, Buf, Kind, Plan, Region
from .atoms import AtomBuffer, rank_keys

__all__ = ["Mismatch", "SimulationError", "SimReport", "simulate"]

_MASK_MAX_RANKS = 64


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One output range that does not hold what it must."""

    rank: int
    buf: str
    lo: int
    hi: int
    expected: str
    got: str
    step: int | None

    def __str__(self) -> str:
        at = f" (last written at step {self.step})" if self.step is not None and self.step >= 0 else ""
        return f"rank {self.rank} {self.buf}[{self.lo}:{self.hi}]: expected {self.expected}, got {self.got}{at}"


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


def simulate(plans: Sequence[Plan], call: Call | OpSpec, count: int | None = None, *, in_place: bool = False,
             seed: int = 0) -> SimReport:
    """Run ``plans`` (one per rank, in rank order) for ``call``.

    ``simulate(plans, spec, count, in_place=...)`` is the short form for calls that need only a
    per-rank count.

    Raises:
        SimulationError: at the first structural problem (unmatched or mismatched transfer,
            out-of-bounds or overlapping region, uninitialised read, double-counted reduce),
            or after the run listing every output range that is wrong.
    """
    if isinstance(call, OpSpec):
        call = Call(call.name, len(plans), count or 0, in_place=in_place)
    return _Sim(plans, call, seed).run()


class _Sim:
    def __init__(self, plans: Sequence[Plan], call: Call, seed: int) -> None:
        self.plans, self.call, self.in_place = plans, call, call.in_place
        self.n = n = len(plans)
        if n != call.nranks:
            raise ValueError(f"expecting {call.nranks} plans for {call.op} over {call.nranks} ranks, got {n}")
        for r, p in enumerate(plans):
            if p.rank != r:
                raise ValueError(f"expecting plans in rank order, got plan of rank {p.rank} at index {r}")
        self.keys = rank_keys(n, seed)
        self.use_mask = n <= _MASK_MAX_RANKS
        ins = [call.input_count(r) for r in range(n)]
        self.shift = [call.in_place_offset(r) if call.in_place else 0 for r in range(n)]
        nin = max(ins, default=0)
        nout = max((call.output_count(r) for r in range(n)), default=0)
        if call.in_place:
            nout = max([nout] + [i + s for i, s in zip(ins, self.shift)])
        nscr = max((p.scratch_count() for p in plans), default=0)
        self.pairs: dict[tuple, tuple] = {}    # aligned atoms, valid until a split
        self.splits = 0
        self.bufs = []
        for r, p in enumerate(plans):
            bounds = self._bounds(p)
            self.bufs.append({
                Buf.INPUT: AtomBuffer("in", nin, 1, bounds[Buf.INPUT], self.on_split),
                Buf.OUTPUT: AtomBuffer("out", nout, 1, bounds[Buf.OUTPUT], self.on_split),
                Buf.SCRATCH: AtomBuffer("scr", nscr, 1, bounds[Buf.SCRATCH], self.on_split),
            })
            if not ins[r]:
                continue
            first = self.bufs[r][Buf.OUTPUT if call.in_place else Buf.INPUT]
            init = first.atoms(Region(Buf.INPUT, self.shift[r], ins[r]))
            first.val[0, init, AtomBuffer.CARD] = 1
            first.val[0, init, AtomBuffer.ORIGIN] = first.starts[:-1][init] - self.shift[r]
            first.val[0, init, AtomBuffer.KEY] = self.keys[r]
            if self.use_mask:
                first.val[0, init, AtomBuffer.MASK] = np.int64(1) << np.int64(r)
        self.step = -1

    def _bounds(self, p: Plan) -> dict[Buf, np.ndarray]:
        """Every piece boundary plan ``p`` uses, per buffer: its rank's starting atoms.

        Strided regions are grouped by (stride, count, phase) and their piece ranges merged
        first, so that N ranks' overlapping strided slices expand once, not N times.
        """
        simple: dict[Buf, set] = {b: set() for b in Buf}
        families: dict[tuple, list] = defaultdict(list)
        for s in p.steps:
            for a in s.transfers + s.local:
                for r in (a.src, a.dst):
                    if r is None or not r.count:
                        continue
                    r = self.aliased(p.rank, r)
                    buf = r.buf
                    if r.repeat == 1:
                        simple[buf].update((r.offset, r.offset + r.count))
                    else:
                        q, phase = divmod(r.offset, r.stride)
                        families[(buf, r.stride, r.count, phase)].append((q, q + r.repeat))
        out = {b: [np.fromiter(v, np.int64, len(v))] for b, v in simple.items()}
        for (buf, stride, count, phase), spans in families.items():
            spans.sort()
            lo, hi = spans[0]
            merged = []
            for x, y in spans[1:]:
                if x > hi:
                    merged.append((lo, hi))
                    lo = x
                hi = max(hi, y)
            merged.append((lo, hi))
            idx = np.concatenate([np.arange(x, y, dtype=np.int64) for x, y in merged])
            starts = phase + stride * idx
            out[buf] += [starts, starts + count]
        return {b: np.unique(np.concatenate(v)) for b, v in out.items()}

    def on_split(self) -> None:
        """Atoms were renumbered: every cached alignment is stale."""
        self.pairs.clear()
        self.splits += 1

    # -- errors -------------------------------------------------------------------------
    def fail(self, rank: int, what: str) -> SimulationError:
        grid = format_plans(self.plans, mark=(self.step, rank))
        return SimulationError(f"step {self.step}, rank {rank}: {what}", step=self.step, rank=rank, grid=grid)

    def aliased(self, rank: int, r: Region) -> Region:
        """In place, the input is a part of the output buffer."""
        if self.in_place and r.buf is Buf.INPUT:
            return r.moved(Buf.OUTPUT, self.shift[rank])
        return r

    def addr(self, rank: int, r: Region):
        r = self.aliased(rank, r)
        b = self.bufs[rank][r.buf]
        if r.end > b.size:
            raise self.fail(rank, f"region {r} is out of bounds ({b.name} holds {b.size} elements)")
        return b, b.lookup(r)[0]

    def pair(self, rank_s: int, rs: Region, rank_d: int, rd: Region):
        """Aligned atom indices for moving ``rs`` (on rank_s) to ``rd`` (on rank_d)."""
        rs, rd = self.aliased(rank_s, rs), self.aliased(rank_d, rd)
        key = (rank_s, rs, rank_d, rd)
        hit = self.pairs.get(key)
        if hit is not None:
            return hit
        bs, ia = self.addr(rank_s, rs)
        bd, ib = self.addr(rank_d, rd)
        wa, wb = bs.lookup(rs)[1], bd.lookup(rd)[1]
        if len(wa) != len(wb) or (wa != wb).any():
            both = np.union1d(np.cumsum(wa), np.cumsum(wb))[:-1]
            bs.split(bs.to_region_offsets(rs, both))
            bd.split(bd.to_region_offsets(rd, both))
            return self.pair(rank_s, rs, rank_d, rd)
        hit = self.pairs[key] = (bs, ia, bd, ib)
        return hit

    def check_init(self, rank: int, v: np.ndarray, r: Region) -> None:
        if not v[:, AtomBuffer.CARD].all():
            raise self.fail(rank, f"reads {r}, which holds no data yet (read before write)")

    # -- run ------------------------------------------------------------------------------
    def run(self) -> SimReport:
        nsteps = max((len(p.steps) for p in self.plans), default=0)
        for t in range(nsteps):
            self.step = t
            self.transfers(t)
            for rank, p in enumerate(self.plans):
                if t < len(p.steps):
                    for a in p.steps[t].local:
                        self.local(rank, a)
        self.step = nsteps
        self.check_post()
        return SimReport(self.n, max((p.step_count for p in self.plans), default=0),
                         max((p.count_sent() for p in self.plans), default=0),
                         sum(len(b.widths) for bufs in self.bufs for b in bufs.values()))

    def transfers(self, t: int) -> None:
        sends: dict[tuple[int, int], list[Region]] = defaultdict(list)
        recvs: dict[tuple[int, int], list[Region]] = defaultdict(list)
        for rank, p in enumerate(self.plans):
            if t >= len(p.steps):
                continue
            for a in p.steps[t].transfers:
                region = a.src if a.kind is Kind.SEND else a.dst
                if region is None or a.kind not in (Kind.SEND, Kind.RECV):
                    raise self.fail(rank, f"'{a}' is not a transfer")
                if a.peer is None or not 0 <= a.peer < self.n or a.peer == rank:
                    raise self.fail(rank, f"'{a}' names peer {a.peer}; expecting a rank in range({self.n}) "
                                          f"other than {rank}")
                if a.kind is Kind.SEND:
                    sends[(rank, a.peer)].append(region)
                else:
                    recvs[(a.peer, rank)].append(region)
        for key in sends.keys() | recvs.keys():
            s, r = sends.get(key, []), recvs.get(key, [])
            if len(s) != len(r) or any(x.size != y.size for x, y in zip(s, r)):
                src, dst = key
                raise self.fail(dst if len(s) > len(r) else src,
                                f"rank {src} sends [{', '.join(map(str, s))}] to rank {dst}, which receives "
                                f"[{', '.join(map(str, r))}] from it in this step; sends and receives must "
                                f"match in number, order and size")
        todo = [(src, rs, dst, rd) for (src, dst), regs in sends.items()
                for rs, rd in zip(regs, recvs[(src, dst)]) if rs.size]
        while True:                    # align every move first: a split renumbers atoms
            before = self.splits
            aligned = [self.pair(src, rs, dst, rd) for src, rs, dst, rd in todo]
            if self.splits == before:
                break
        moves = []
        for (src, rs, dst, rd), (bs, ia, bd, ib) in zip(todo, aligned):
            v = bs.read(src, ia)
            self.check_init(src, v, rs)
            moves.append((v, bd, ib, dst, rd))
            bs.reader[0, ia] = t
        for val, bd, ib, dst, rd in moves:
            if (bd.writer[0, ib] == t).any():
                raise self.fail(dst, f"receives into {rd}, which another receive of this step also writes")
            if (bd.reader[0, ib] == t).any():
                raise self.fail(dst, f"receives into {rd}, which it sends in the same step")
            bd.write(dst, ib, val, t)

    def local(self, rank: int, a: Action) -> None:
        if a.kind not in (Kind.REDUCE, Kind.COPY) or a.src is None or a.dst is None:
            raise self.fail(rank, f"'{a}' is not a local operation")
        if a.src.size != a.dst.size:
            raise self.fail(rank, f"'{a}' has {a.src.size} source and {a.dst.size} destination elements")
        if not a.src.size:
            return
        bs, ia, bd, ib = self.pair(rank, a.src, rank, a.dst)
        val = bs.read(rank, ia)
        self.check_init(rank, val, a.src)
        if a.kind is Kind.REDUCE:
            cur = bd.read(rank, ib)
            self.check_init(rank, cur, a.dst)
            C, K, M, O = range(4)
            if (cur[:, O] != val[:, O]).any():
                raise self.fail(rank, f"'{a}' reduces elements of different origin indices")
            if self.use_mask and (cur[:, M] & val[:, M]).any():
                dup = int(np.bitwise_or.reduce(cur[:, M] & val[:, M]))
                raise self.fail(rank, f"'{a}' counts the contribution of ranks {_ranks(dup)} twice")
            cur[:, C] += val[:, C]
            if (cur[:, C] > self.n).any():
                raise self.fail(rank, f"'{a}' gives more than {self.n} contributions: some counted twice")
            cur[:, K] += val[:, K]
            cur[:, M] |= val[:, M]
            val = cur
        bd.write(rank, ib, val, self.step)

    def check_post(self) -> None:
        bad: list[Mismatch] = []
        cache: dict[frozenset, tuple] = {}
        for rank in range(self.n):
            for c in self.call.spec.post(self.call, rank):
                if c.ranks not in cache:
                    rk = sorted(c.ranks)
                    key = self.keys[rk].sum() if rk else np.int64(0)
                    mask = np.int64(sum(1 << r for r in rk) - (1 << 64 if 63 in c.ranks else 0)) \
                        if self.use_mask else np.int64(0)
                    cache[c.ranks] = (len(rk), key, mask)
                card, key, mask = cache[c.ranks]
                out = self.bufs[rank][Buf.OUTPUT]
                idx = out.atoms(Region(Buf.OUTPUT, c.offset, c.count))
                want_origin = out.starts[:-1][idx] + c.shift
                got = out.read(rank, idx).T
                ok = (got[0] == card) & (got[1] == key) & (got[3] == want_origin)
                if self.use_mask:
                    ok &= got[2] == mask
                if ok.all():
                    continue
                atoms = np.arange(len(out.widths))[idx]
                for j in np.flatnonzero(~ok)[:8]:
                    a = atoms[j]
                    bad.append(Mismatch(rank, "out", int(out.starts[a]), int(out.starts[a + 1]),
                                        self.describe(card, mask, c.shift),
                                        self.describe(int(got[0][j]), int(got[2][j]),
                                                      int(got[3][j] - out.starts[a]), key_ok=bool(got[1][j] == key)),
                                        int(out.writer[0, a])))
            if len(bad) >= 32:
                break
        if bad:
            first = bad[0]
            grid = format_plans(self.plans, mark=(first.step if first.step is not None and first.step >= 0
                                                  else 0, first.rank))
            msg = (f"{len(bad)}{'+' if len(bad) >= 32 else ''} output ranges wrong; first: {first}\n"
                   + "\n".join(f"  {m}" for m in bad[1:6]))
            raise SimulationError(msg, mismatches=bad, step=first.step, rank=first.rank, grid=grid)

    def describe(self, card: int, mask: int, shift: int, key_ok: bool | None = None) -> str:
        if card == 0:
            return "no data"
        who = f"ranks {_ranks(mask)}" if self.use_mask else f"{card} contributions"
        if self.use_mask is False and key_ok is False:
            who += " (not the right ranks)"
        return f"{who} of input index +{shift}" if shift >= 0 else f"{who} of input index {shift}"


def _ranks(mask: int) -> str:
    mask = int(mask) & (1 << 64) - 1
    rs = [i for i in range(mask.bit_length()) if mask >> i & 1]
    return "{" + ",".join(map(str, rs)) + "}"
