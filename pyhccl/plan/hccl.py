"""HCCL's registered algorithms as plans: each name runs through its executor and templates.

The registry (pyhccl.algo.registry) gives every name its executor class and template classes
per level. Here a template class maps to one of pyhccl's templates by what it does (its role
and algorithm, read off HCCL's class names), and an executor class to one of
:mod:`pyhccl.plan.executors`' compositions. Every HCCL engine runs as MPI point-to-point, so a
CCU, AIV or DPU template runs the schedule of the AICPU template that moves the same data; the
engine changes rules and costs, not the data flow. Multi-link ("MultiJetty"/"MultiLink") and
Z-axis-detour ("MeshConcur") variants cut every transfer into one message per channel with
HCCL's shares, which over MPI become concurrent messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, wraps
from typing import Callable, Sequence

from ..algo.registry import Registration, get
from ..core.call import HCCL_OPS, Call
from . import executors as ex
from .executors import LayoutError, Levels
from .ir import Buf, Region, Step
from .slices import Slices
from .sole import TABLES, data_window, op_steps, rotates
from .templates import memoised, positions
from .templates.p2p import batch_send_recv

__all__ = ["NotRunnableError", "Form", "template_form", "executor_kind", "build_registered", "not_runnable_reason",
           "rotation_built"]

#: MAX_JETTY_NUM (src/ops/op_common/template/template_utils.h): channels per peer, equal port shares.
MULTILINK_SHARES = (0.25, 0.25, 0.25, 0.25)


class NotRunnableError(NotImplementedError):
    """An HCCL algorithm pyhccl cannot run: its kind, or this layout for its executor."""


@dataclass(frozen=True)
class Form:
    """What a template class does: its role (see pyhccl.plan.templates) and pyhccl's template for it."""

    role: str
    name: str
    split: str | None = None       # "detour" | "multilink" | None


_ROLE_WORDS = (("ReduceScatter", "RS"), ("AllGather", "AG"), ("AllReduce", "AR"), ("Allreduce", "AR"),
               ("AlltoAll", "A2A"), ("AllToAll", "A2A"), ("Barrier", "BARRIER"), ("Broadcast", "BCAST"),
               ("Scatter", "SCATTER"), ("Gather", "GATHER"), ("Reduce", "REDUCE"))


#: Algorithm words in HCCL's template class names (lower case), first match wins; else Mesh.
_ALGO_WORDS = (("orderpreservedlevel1", "OrderedLevel1"), ("orderpreservedgroup", "OrderedGroup"),
               ("aicpureduce", "NHRAicpuReduce"), ("pairwise", "Pairwise"), ("concurrent", "ConcurrentMeshNHR"),
               ("meshchunk", "MeshChunk"), ("oneshot", "MeshOneShot"), ("twoshot", "MeshTwoShot"), ("nhr", "NHR"))


def template_form(cls: str) -> Form | None:
    """The role and pyhccl template of HCCL template class ``cls``; None for point-to-point ones.

    Read off the class name as HCCL builds it (``<Engine>Temp<Op><Algorithm><Variant>``,
    src/ops/<op>/template/): OrderPreserved, AicpuReduce, Pairwise, MeshChunk, OneShot/TwoShot,
    Concurrent (one kernel over mesh and CLOS), NHR, Mesh (also Intra/Inter/2Die/Dpu forms).
    """
    role = next((r for word, r in _ROLE_WORDS if word in cls), None)
    if role is None:
        return None
    split = "detour" if "ZAxisDetour" in cls else "multilink" if "MultiJetty" in cls else None
    low = cls.lower()
    name = next((n for word, n in _ALGO_WORDS if word in low), "Mesh")
    if role == "AR" and name in ("Mesh", "MeshChunk"):
        name = "MeshTwoShot" if name == "Mesh" else "MeshChunkTwoShot"   # CCU mesh AllReduce: RS then AG phase
    return Form(role, name, split)


def executor_kind(executor: str) -> str:
    """sole | twoshot | ordered | sequence | parallel | concur | pipeline | p2p."""
    for word, kind in (("SendRecv", "p2p"), ("Send", "p2p"), ("Recv", "p2p"), ("OmniPipe", "pipeline"),
                       ("Parallel", "parallel"), ("Concurrent", "concur"), ("OrderPreserved", "ordered"),
                       ("TwoShotSole", "twoshot"), ("2Die", "twoshot"), ("Sequence", "sequence"), ("Sole", "sole")):
        if word in executor:
            return kind
    return "unknown"


def not_runnable_reason(name: str) -> str | None:
    """Why the registered algorithm ``name`` never runs in pyhccl, or None when it can."""
    reg = get(name)
    try:
        _check(reg)
    except NotRunnableError as e:
        return str(e)
    return None


@lru_cache(maxsize=1024)
def _check(reg: Registration) -> tuple[tuple[Form, ...], ...]:
    """``reg``'s templates, level by level (read once per registration: every rank's build asks)."""
    kind = executor_kind(reg.executor)
    if reg.op == "BatchSendRecv" and not reg.levels:
        return ()               # InsV2BatchSendRecvExecutor: no template, the pair-wise schedule (templates/p2p.py)
    if kind == "p2p" or HCCL_OPS.get(reg.op) is None:
        raise NotRunnableError(f"{reg.name} is point-to-point ({reg.op}); mpi4py's Send/Recv on the wrapped "
                               f"communicator carry it")
    if kind == "unknown":
        raise NotRunnableError(f"{reg.name}: executor {reg.executor} is not one pyhccl composes")
    forms = []
    for level in reg.levels:
        row = []
        for t in level:
            f = template_form(t)
            if f is None or f.name not in TABLES[f.role] and f.name != "ConcurrentMeshNHR":
                raise NotRunnableError(f"{reg.name}: template {t} has no pyhccl counterpart "
                                       f"({f.role if f else '?'}/{f.name if f else '?'})")
            row.append(f)
        forms.append(tuple(row))
    if not forms:
        raise NotRunnableError(f"{reg.name} has no templates")
    return tuple(forms)


def _fn(form: Form, reg: Registration, n: int) -> Callable:
    """The template function for ``form``, with its link split when the algorithm has one."""
    shares: tuple[float, ...] = ()
    if form.split == "detour":
        # level0DataRatio: 0.5, or 0.25 for AllGather/ReduceScatter on 2 ranks (SetchannelsPerRank, §2)
        ratio = 0.25 if n == 2 and form.role in ("AG", "RS") else 0.5
        shares = (ratio, 1 - ratio)
    elif form.split == "multilink" or ("MultiLink" in reg.name or "MultiJetty" in reg.name) and "NHR" in form.name:
        # several ports per peer on the CLOS (NHR) links; mesh levels keep their one direct link
        shares = MULTILINK_SHARES
    if not shares:
        return TABLES[form.role][form.name]
    return _split_fn(form.role, form.name, shares)


@lru_cache(maxsize=256)
def _split_fn(role: str, name: str, shares: tuple[float, ...]) -> Callable:
    """Template ``role``/``name`` with every transfer cut by ``shares`` (memoised like the template)."""
    fn = TABLES[role][name]
    fn = getattr(fn, "__wrapped__", fn)         # the split result is memoised below, not the unsplit one too

    @wraps(fn)                                  # (its signature: the data's buffer when no buf is passed)
    def split(*a, **k):
        steps = fn(*a, **k)
        # a group's strided (repeat) slices stay one message per transfer on every member alike
        if any(getattr(x, "repeat", 1) > 1 for x in a):
            return steps
        return ex.split_links(steps, shares)
    return memoised(split)


def rotation_built(call: Call, reg: Registration) -> bool:
    """Whether :func:`build_registered` makes every rank's steps for ``call`` as rank 0's moved on by its rank: one
    template over all ranks in rank order (the Sole executor's branch below) that :func:`~.sole.rotates`."""
    try:
        forms = _check(reg)
    except NotRunnableError:
        return False
    if not forms or HCCL_OPS[reg.op] != call.op:
        return False
    kind, f = executor_kind(reg.executor), forms[0][0]
    one = kind == "sole" and f.name != "ConcurrentMeshNHR" or kind in ("twoshot", "ordered") and call.op != "allreduce"
    return one and rotates(call, _fn(f, reg, call.nranks), positions(call.nranks))


def build_registered(call: Call, reg: Registration, rank: int, groups: Sequence[Sequence[int]],
                     uniform: bool) -> list[Step]:
    """Rank ``rank``'s steps for ``call`` with the registered algorithm ``reg``.

    Raises:
        NotRunnableError: the algorithm is not a collective pyhccl runs, its op is not the
            call's, or the layout does not fit its executor (the message says which).
    """
    forms = _check(reg)
    if HCCL_OPS[reg.op] != call.op:
        raise NotRunnableError(f"{reg.name} is an {reg.op} algorithm, not {call.spec.hccl}")
    if not forms:
        return batch_send_recv(call, rank)
    kind = executor_kind(reg.executor)
    n = call.nranks
    everyone = positions(n)
    try:
        if kind == "sole":
            f = forms[0][0]
            if f.name == "ConcurrentMeshNHR":
                mesh = Form(f.role, "MeshTwoShot" if f.role == "AR" else "Mesh")
                return _concur(call, reg, rank, (mesh, mesh if f.role == "A2A" else Form(f.role, "NHR")))
            return op_steps(call, _fn(f, reg, n), rank, everyone)
        if kind in ("twoshot", "ordered"):
            if call.op != "allreduce":
                return op_steps(call, _fn(forms[0][0], reg, n), rank, everyone)
            return _rs_then_ag(call, rank, _fn(forms[0][0], reg, n), _fn(forms[0][1], reg, n),
                               floor_tail=kind == "ordered")
        if kind == "concur":
            return _concur(call, reg, rank, forms[0])
        lv = Levels.of(rank, groups, n, uniform, reg.name)
        if len(lv.dims) != len(forms):
            raise NotRunnableError(f"{reg.name} has {len(forms)} levels, got groups for {len(lv.dims)}")
        fns = [{f.role: (f, _fn(f, reg, lv.dims[k])) for f in row} for k, row in enumerate(forms)]
        top = list(range(len(forms)))
        if kind == "sequence":
            return ex.flatten(_phases(call, lv, fns, None, 0, ex_window(call), 0))
        if kind == "parallel":
            if len(top) != 2:
                raise NotRunnableError(f"{reg.name}: the Parallel executor takes 2 levels, got {len(top)}")
            r = ex.parallel_ratio(call.op, lv.dims)
            (a, b), (c, d) = ex.window_parts(0, ex_window(call), (r, 1 - r))
            p0 = _phases(call, lv, fns, (0, 1), a, b, 0)
            p1 = _phases(call, lv, fns, (1, 0), c, d, ex.aligned(_scratch_after(p0, call), c, ex_window(call)))
            return ex.zip_phases(p0, p1)
        if kind == "pipeline":
            t = ex.omnipipe_slice_count(lv.dims[1])
            parts = ex.window_parts(0, ex_window(call), (1 / t,) * t)
            out, scr = [], 0
            for lo, hi in parts:
                ph = _phases(call, lv, fns, None, lo, hi, ex.aligned(scr, lo, ex_window(call)))
                scr = _scratch_after(ph, call, scr)
                out.append(ph)
            return ex.skew(out)
    except LayoutError as e:
        raise NotRunnableError(str(e)) from None
    raise NotRunnableError(f"{reg.name}: executor {reg.executor} is not one pyhccl composes")


def ex_window(call: Call) -> int:
    """The per-rank block length the multi-level executors cut (the V ops have none)."""
    if call.counts is not None or call.matrix is not None:
        raise NotRunnableError(f"{call.op} runs on one level only")
    return data_window(call)


def _scratch_after(phases, call: Call, floor: int = 0) -> int:
    return max(floor, ex.scratch_end(ex.flatten(phases)), _staging(call))


def _staging(call: Call) -> int:
    """Scratch the block-style ops stage all n blocks in (ReduceScatter out of place, Scatter)."""
    if call.op == "reduce_scatter" and not call.in_place or call.op == "scatter":
        return call.nranks * call.count
    return 0


def _rs_then_ag(call: Call, rank: int, rs: Callable, ag: Callable, *, floor_tail: bool = False) -> list[Step]:
    """AllReduce as ReduceScatter then AllGather on one level: "ceil" slices (two-shot SplitData), or
    "floor + tail" for the order-preserving executor (ins_v2_all_reduce_order_preserved_executor.cc)."""
    n, c = call.nranks, call.count
    steps = [] if call.in_place else ex.copy_step(Region(Buf.OUTPUT, 0, c), Region(Buf.INPUT, 0, c))
    if c == 0 or n == 1:
        return steps
    sl = Slices.floor_tail(0, c, n) if floor_tail else Slices.ceil(0, c, n)
    group = positions(n)
    return steps + rs(group, rank, sl, buf=Buf.OUTPUT, scratch=0) + ag(group, rank, sl, buf=Buf.OUTPUT, scratch=0)


def _concur(call: Call, reg: Registration, rank: int, forms: Sequence[Form]) -> list[Step]:
    """The Concur executor: two templates over all ranks at once, data split w0 : w1 (§3.4)."""
    n = call.nranks
    w0, w1 = ex.concur_weights(call.op, reg.parts.engine_prefix, n)
    everyone = positions(n)
    f0, f1 = (_fn(f, reg, n) for f in forms)
    if call.op == "alltoallv":
        return _concur_a2av(call, rank, f0, f1, w0, w1)
    (a, b), (c, d) = ex.window_parts(0, ex_window(call), (w0 / (w0 + w1), w1 / (w0 + w1)))
    s0 = op_steps(call, f0, rank, everyone, lo=a, hi=b, scratch=_staging(call))
    s1 = op_steps(call, f1, rank, everyone, lo=c, hi=d,
                  scratch=ex.aligned(max(ex.scratch_end(s0), _staging(call)), c, ex_window(call)))
    return ex.merge(s0, s1)


def _concur_a2av(call: Call, rank: int, f0, f1, w0: int, w1: int) -> list[Step]:
    """AlltoAllV over two templates: per-peer counts split floor(count/(w0+w1))*w0 to the mesh."""
    n, m = call.nranks, call.matrix
    group = positions(n)

    def cut(buf, off, k):
        k0 = k // (w0 + w1) * w0
        return (Region(buf, off, k0) if k0 else None), (Region(buf, off + k0, k - k0) if k - k0 else None)
    sends = [cut(Buf.INPUT, call.sdispls[rank][j], m[rank][j]) for j in range(n)]
    recvs = [cut(Buf.OUTPUT, call.rdispls[rank][j], m[j][rank]) for j in range(n)]
    s0 = f0(group, rank, [s[0] for s in sends], [r[0] for r in recvs], scratch=0)
    s1 = f1(group, rank, [s[1] for s in sends], [r[1] for r in recvs], scratch=ex.scratch_end(s0))
    return ex.merge(s0, s1)


def _phases(call: Call, lv: Levels, fns: list[dict[str, tuple[Form, Callable]]], order: Sequence[int] | None, lo: int, hi: int,
            scratch: int) -> list[list[Step]]:
    """One data window's phases through the levels, in HCCL's Sequence order unless ``order`` is given.

    HCCL's code order per op (hccl-templates.md §3.2, "Ordering rules — doc vs code"; pyhccl
    follows the code): AllReduce RS L0 -> L1 -> L2 -> AG L2 -> L1 -> L0; ReduceScatter intra
    first (strided), then inter; AllGather inter first, then intra; Broadcast intra Scatter ->
    inter Scatter -> inter AG -> intra AG; Reduce RS down then Gather up to the root; Scatter
    the root's frame first, then the upper levels; Barrier level by level.
    """
    op, c, n = call.op, call.count, call.nranks
    up_levels = list(range(len(lv.dims)))
    me = lv.me
    IN, OUT, SCR = Buf.INPUT, Buf.OUTPUT, Buf.SCRATCH
    w = hi - lo

    def role(k, r):
        if r in fns[k]:
            return fns[k][r][1]
        alt = {"GATHER": "RS"}.get(r)     # OmniPipe Reduce chains name only their RS templates
        if alt in fns[k] and fns[k][alt][0].name in TABLES[r]:
            return TABLES[r][fns[k][alt][0].name]
        raise NotRunnableError(f"level {k} has no {r} template")

    if op in ("allreduce", "reduce", "broadcast"):
        data = Region(OUT, lo, w)
        first = [] if call.in_place or op == "broadcast" else ex.copy_step(data, Region(IN, lo, w))
        if w == 0:
            return [first]
        down_role = "SCATTER" if op == "broadcast" else "RS"
        up_role = "GATHER" if op == "reduce" else "AG"
        if op == "broadcast" and "BCAST" in fns[0]:
            return [first] + _bcast_levels(call, lv, fns, data, scratch)

        def down(k, group, pos, sl, rpos, scr):
            f = role(k, down_role)
            return f(group, pos, rpos, sl, buf=OUT, scratch=scr) if rpos is not None else \
                f(group, pos, sl, buf=OUT, scratch=scr)

        def up(k, group, pos, sl, rpos, scr):
            f = role(k, up_role)
            return f(group, pos, rpos, sl, buf=OUT, scratch=scr) if rpos is not None else \
                f(group, pos, sl, buf=OUT, scratch=scr)
        order = list(order) if order is not None else up_levels
        return [first] + ex.cut_sequence(lv, order, down, up, data, scratch, root=call.root,
                                         down_rooted=op == "broadcast", up_rooted=op == "reduce")
    if op == "barrier":
        tok = Region(OUT, 0, 1)
        first = ex.copy_step(tok, Region(IN, 0, 1))
        order = list(order) if order is not None else up_levels
        return [first] + [role(k, "BARRIER")(lv.groups[k], me[k], tok, scratch=scratch) for k in order]
    if op in ("reduce_scatter", "scatter", "all_gather"):
        narrowing = op != "all_gather"
        order = list(order) if order is not None else (up_levels if narrowing else up_levels[::-1])
        if op == "reduce_scatter":
            buf = OUT if call.in_place else SCR
            first = [] if call.in_place or w == 0 else \
                ex.copy_step(ex.in_blocks(SCR, c, lo, hi, n), ex.in_blocks(IN, c, lo, hi, n))
        elif op == "scatter":
            buf = IN if lv.rank == call.root else SCR
            first = []
        else:
            buf = OUT
            first = [] if call.in_place or w == 0 else \
                ex.copy_step(Region(OUT, lv.rank * c + lo, w), Region(IN, lo, w))
        r = "RS" if op == "reduce_scatter" else "SCATTER" if op == "scatter" else "AG"
        scr0 = max(scratch, _staging(call))

        def run(k, group, pos, sl, rpos, scr):
            f = role(k, r)
            return f(group, pos, rpos, sl, buf=buf, scratch=scr) if rpos is not None else \
                f(group, pos, sl, buf=buf, scratch=scr)
        phases = ex.block_sequence(lv, order, run, c, lo, hi, 0, scr0, narrowing=narrowing,
                                   root=call.root if op == "scatter" else None)
        last = []
        if narrowing and w:
            last = ex.copy_step(Region(OUT, lo, w), Region(buf, lv.rank * c + lo, w))
        return [first] + phases + [last]
    raise NotRunnableError(f"{op} has no multi-level executor in HCCL")


def _bcast_levels(call, lv, fns, data, scratch):
    """Broadcast with a Broadcast template per level (OmniPipe chains): the top level first, among
    the ranks at the root's lower coordinates, then each level below."""
    me, rc = lv.me, lv.coords(call.root)
    order = list(range(len(lv.dims)))[::-1]
    phases = []
    for s, k in enumerate(order):
        f = fns[k]["BCAST"][1]
        active = all(me[l] == rc[l] for l in order[s + 1:])
        length = len(f(positions(lv.dims[k]), 0, 0, data, scratch=scratch))
        phases.append(ex.pad(f(lv.groups[k], me[k], rc[k], data, scratch=scratch) if active else [], length))
    return phases


