"""One row per collective: buffer sizes, bus-bandwidth factor, numpy reference, postcondition.

The benchmark, the simulator, the plan builders and the tests all read these rows
(nccl-tests src/common.h ``struct testColl``; busbw factors from nccl-tests doc/PERFORMANCE.md).
A :class:`Call` is one invocation: the op, the rank count and the counts as HCCL's API takes
them (a per-rank count; counts and displacements for the V ops; a send-count matrix for
AlltoAllV), the root and the in-place flag.

Buffer conventions (element offsets; every plan addresses ``in``, ``out`` and ``scr``):

============== ============================== ============================== =====================
op             input of rank r                output of rank r               in place
============== ============================== ============================== =====================
allreduce      c                              c                              input is out[0:c]
reduce         c                              c (root only)                  input is out[0:c]
broadcast      c (root's is the data)         c                              always: one buffer
all_gather     c                              n*c, block j from rank j       input is out[r*c:]
gather         c                              n*c at root                    root: out[root*c:]
scatter        n*c at root, none elsewhere    c, block r of root's input     no
reduce_scatter n*c                            c, block r reduced             out holds n*c input
all_gather_v   counts[r]                      displs[j]: counts[j] from j    no
reduce_scatt_v sum(counts) at displs          counts[r] reduced              no
alltoall       n*c, block j for rank j        n*c, block j from rank j       no
alltoallv      row r of the matrix            column r of the matrix         no
barrier        1 token                        1 token, touched by all ranks  no
batch_send_rcv its send items, packed          its receive items, packed      no (core/p2p.py)
============== ============================== ============================== =====================
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Callable, Sequence

import numpy as np

from .p2p import Items, check_items, layout, sendrecv_items

__all__ = ["Call", "Contrib", "OpSpec", "OPS", "get_opspec", "canonical_op", "hccl_op", "make_call", "HCCL_OPS"]


@dataclass(frozen=True, slots=True)
class Contrib:
    """What ``[offset, offset+count)`` of a rank's output must hold after the collective.

    Element ``x`` holds element ``x + shift`` of the input of every rank in ``ranks``, each
    exactly once (reduced together when there are several).
    """

    offset: int
    count: int
    ranks: frozenset[int]
    shift: int


@dataclass(frozen=True, slots=True)
class Call:
    """One collective call, described the way HCCL's API takes it.

    Args:
        op: pyhccl's op name (see :data:`OPS`; :func:`canonical_op` accepts HCCL's names).
        nranks: ranks in the communicator.
        count: elements per rank (HCCL's count: the per-rank input of AllReduce, AllGather,
            Broadcast, Reduce, Gather; the per-rank output of ReduceScatter and Scatter; the
            per-peer block of AlltoAll).
        root: the root rank of a rooted op.
        counts, displs: the V ops: per-rank counts and their offsets in the long buffer
            (default: packed in rank order).
        matrix: AlltoAllV: ``matrix[i][j]`` elements go from rank i to rank j; ``sdispls[i][j]``
            and ``rdispls[j][i]`` place them (default: packed in rank order).
        in_place: MPI.IN_PLACE (see the module table for where the input then lives).
    """

    op: str
    nranks: int
    count: int = 0
    root: int = 0
    counts: tuple[int, ...] | None = None
    displs: tuple[int, ...] | None = None
    matrix: tuple[tuple[int, ...], ...] | None = None
    sdispls: tuple[tuple[int, ...], ...] | None = None
    rdispls: tuple[tuple[int, ...], ...] | None = None
    in_place: bool = False
    items: Items | None = None      # batch_send_recv: per rank (kind, peer, count); default SendRecv by count

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", canonical_op(self.op))
        for name in ("nranks", "count", "root"):
            v = getattr(self, name)
            if type(v) is not int:
                object.__setattr__(self, name, _index(v, name))
        if type(self.in_place) is not bool:
            if not isinstance(self.in_place, (bool, np.bool_)):
                raise TypeError(f"expecting in_place as a bool, got {type(self.in_place).__name__}")
            object.__setattr__(self, "in_place", bool(self.in_place))
        n = self.nranks
        if n < 1:
            raise ValueError(f"expecting nranks >= 1, got {n}")
        if self.count < 0:
            raise ValueError(f"expecting count >= 0, got {self.count}")
        if not 0 <= self.root < n:
            raise ValueError(f"expecting root in range({n}), got {self.root}")
        spec = OPS[self.op]
        if spec.vector == "counts":
            if self.counts is None or len(self.counts) != n or any(c < 0 for c in self.counts):
                raise ValueError(f"{self.op} needs counts: {n} non-negative per-rank counts, got {self.counts}")
            if self.displs is None:
                object.__setattr__(self, "displs", tuple(accumulate(self.counts, initial=0))[:-1])
            elif len(self.displs) != n or any(d < 0 for d in self.displs):
                raise ValueError(f"expecting displs: {n} non-negative offsets, got {self.displs}")
            _check_disjoint("displs", self.displs, self.counts)
        if spec.vector == "matrix":
            m = self.matrix
            if m is None or len(m) != n or any(len(row) != n or any(x < 0 for x in row) for row in m):
                raise ValueError(f"alltoallv needs matrix: {n}x{n} non-negative send counts, got {m}")
            if self.sdispls is None:
                object.__setattr__(self, "sdispls", tuple(tuple(accumulate(row, initial=0))[:-1] for row in m))
            if self.rdispls is None:
                cols = [[m[i][j] for i in range(n)] for j in range(n)]
                object.__setattr__(self, "rdispls", tuple(tuple(accumulate(c, initial=0))[:-1] for c in cols))
            for name, d in (("sdispls", self.sdispls), ("rdispls", self.rdispls)):
                if len(d) != n or any(len(row) != n or any(x < 0 for x in row) for row in d):
                    raise ValueError(f"expecting {name}: {n}x{n} non-negative offsets, got {d}")
            for r in range(n):
                _check_disjoint(f"sdispls[{r}]", self.sdispls[r], m[r])
                _check_disjoint(f"rdispls[{r}]", self.rdispls[r], [m[i][r] for i in range(n)])
        if spec.vector == "items":
            items = sendrecv_items(n, self.count) if self.items is None else self.items
            object.__setattr__(self, "items", check_items(items, n))
        if self.in_place and not spec.in_place_ok:
            raise ValueError(f"{self.op} has no in-place form here")
        if self.op == "broadcast" and not self.in_place:
            object.__setattr__(self, "in_place", True)      # one buffer: the data sits in the output

    @property
    def spec(self) -> OpSpec:
        return OPS[self.op]

    def input_count(self, rank: int) -> int:
        """Elements of rank ``rank``'s input."""
        return self.spec.input_count(self, rank)

    def output_count(self, rank: int) -> int:
        """Elements of rank ``rank``'s output (the whole buffer when in place)."""
        return self.spec.output_count(self, rank)

    def in_place_offset(self, rank: int) -> int:
        """Where rank ``rank``'s input sits in its output buffer when in place."""
        if self.op == "all_gather" or (self.op == "gather" and rank == self.root):
            return rank * self.count
        return 0

    @property
    def data_count(self) -> int:
        """The size the benchmark reports, in elements (nccl-tests' ``count``)."""
        if self.counts is not None:
            return max(self.counts, default=0)
        if self.matrix is not None:
            return max((max(r, default=0) for r in self.matrix), default=0)
        if self.items is not None:
            return max((c for row in self.items for _, _, c in row), default=0)
        return self.count

    def hccl_nbytes(self, itemsize: int) -> int:
        """HCCL's data size D (what selection is given): the per-rank (per-peer) block; ReduceScatterV's total."""
        if self.op == "reduce_scatter_v":
            return sum(self.counts or ()) * itemsize
        return max(self.data_count, 1 if self.op == "barrier" else 0) * itemsize


def _check_disjoint(name: str, displs: Sequence[int], counts: Sequence[int]) -> None:
    spans = sorted((d, d + c) for d, c in zip(displs, counts) if c)
    for (_, hi), (lo, _) in zip(spans, spans[1:]):
        if lo < hi:
            raise ValueError(f"expecting {name} to place blocks without overlap, got blocks overlapping at {lo}")


@dataclass(frozen=True)
class OpSpec:
    """Semantics of one collective.

    ``input_count(call, rank)`` / ``output_count(call, rank)``: buffer sizes;
    ``post(call, rank)``: what the output must hold; ``reference(call, inputs, ufunc)``:
    numpy's answer per rank (None where a rank has no output); ``busbw_factor(n)``:
    nccl-tests' bus-bandwidth factor; ``reduces``: the op combines data with a reduce op;
    ``replicated``: every rank's result is the same (checked bitwise); ``vector``: which
    extra counts the call needs (None, "counts" or "matrix").
    """

    name: str
    hccl: str
    rooted: bool
    reduces: bool
    replicated: bool
    in_place_ok: bool
    input_count: Callable[[Call, int], int]
    output_count: Callable[[Call, int], int]
    busbw_factor: Callable[[int], float]
    post: Callable[[Call, int], list[Contrib]]
    reference: Callable[[Call, Sequence[np.ndarray], Callable], list[np.ndarray | None]]
    vector: str | None = None

    def __repr__(self) -> str:
        return f"OpSpec({self.name})"


def _fold(inputs: Sequence[np.ndarray], ufunc: Callable) -> np.ndarray:
    acc = inputs[0].copy()
    for x in inputs[1:]:
        ufunc(acc, x, out=acc)
    return acc


def _all(n: int) -> frozenset[int]:
    return frozenset(range(n))


def _one(r: int) -> frozenset[int]:
    return frozenset((r,))


def _if(cond: bool, xs: list[Contrib]) -> list[Contrib]:
    return xs if cond else []


def _rs_ref(c: Call, xs, uf):
    total = _fold(xs, uf)
    return [total[c.displs[r]:c.displs[r] + c.counts[r]] for r in range(c.nranks)]


def _agv_out(c: Call, r: int) -> int:
    return max((d + k for d, k in zip(c.displs, c.counts)), default=0)


def _agv_ref(c: Call, xs, uf):
    out = np.zeros(_agv_out(c, 0), xs[0].dtype) if xs else None
    for j, x in enumerate(xs):
        out[c.displs[j]:c.displs[j] + c.counts[j]] = x[:c.counts[j]]
    return [out] * c.nranks


def _a2av_in(c: Call, r: int) -> int:
    return max((d + k for d, k in zip(c.sdispls[r], c.matrix[r])), default=0)


def _a2av_out(c: Call, r: int) -> int:
    return max((c.rdispls[r][i] + c.matrix[i][r] for i in range(c.nranks)), default=0)


def _a2av_ref(c: Call, xs, uf):
    outs = []
    for j in range(c.nranks):
        o = np.zeros(_a2av_out(c, j), xs[0].dtype)
        for i in range(c.nranks):
            k = c.matrix[i][j]
            o[c.rdispls[j][i]:c.rdispls[j][i] + k] = xs[i][c.sdispls[i][j]:c.sdispls[i][j] + k]
        outs.append(o)
    return outs


def _row(name, hccl, *, rooted=False, reduces=False, replicated=False, in_place_ok=False, vector=None,
         inp, out, busbw, post, ref) -> OpSpec:
    return OpSpec(name, hccl, rooted, reduces, replicated, in_place_ok, inp, out, busbw, post, ref, vector)


def _n1(n: int) -> float:
    return (n - 1) / n


OPS: dict[str, OpSpec] = {s.name: s for s in [
    _row("allreduce", "AllReduce", reduces=True, replicated=True, in_place_ok=True,
         inp=lambda c, r: c.count, out=lambda c, r: c.count, busbw=lambda n: 2 * (n - 1) / n,
         post=lambda c, r: _if(c.count > 0, [Contrib(0, c.count, _all(c.nranks), 0)]),
         ref=lambda c, xs, uf: [_fold(xs, uf)] * len(xs)),
    _row("reduce", "Reduce", rooted=True, reduces=True, in_place_ok=True,
         inp=lambda c, r: c.count, out=lambda c, r: c.count, busbw=lambda n: 1.0,
         post=lambda c, r: _if(c.count > 0 and r == c.root, [Contrib(0, c.count, _all(c.nranks), 0)]),
         ref=lambda c, xs, uf: [_fold(xs, uf) if r == c.root else None for r in range(len(xs))]),
    _row("broadcast", "Broadcast", rooted=True, replicated=True, in_place_ok=True,
         inp=lambda c, r: c.count, out=lambda c, r: c.count, busbw=lambda n: 1.0,
         post=lambda c, r: _if(c.count > 0, [Contrib(0, c.count, _one(c.root), 0)]),
         ref=lambda c, xs, uf: [xs[c.root].copy() for _ in xs]),
    _row("all_gather", "AllGather", replicated=True, in_place_ok=True,
         inp=lambda c, r: c.count, out=lambda c, r: c.nranks * c.count, busbw=_n1,
         post=lambda c, r: _if(c.count > 0, [Contrib(j * c.count, c.count, _one(j), -j * c.count)
                                             for j in range(c.nranks)]),
         ref=lambda c, xs, uf: [np.concatenate(xs)] * len(xs)),
    _row("gather", "Gather", rooted=True, in_place_ok=True,
         inp=lambda c, r: c.count, out=lambda c, r: c.nranks * c.count if r == c.root else 0, busbw=_n1,
         post=lambda c, r: _if(c.count > 0 and r == c.root, [Contrib(j * c.count, c.count, _one(j), -j * c.count)
                                                             for j in range(c.nranks)]),
         ref=lambda c, xs, uf: [np.concatenate(xs) if r == c.root else None for r in range(len(xs))]),
    _row("scatter", "Scatter", rooted=True,
         inp=lambda c, r: c.nranks * c.count if r == c.root else 0, out=lambda c, r: c.count, busbw=_n1,
         post=lambda c, r: _if(c.count > 0, [Contrib(0, c.count, _one(c.root), r * c.count)]),
         ref=lambda c, xs, uf: [xs[c.root][r * c.count:(r + 1) * c.count].copy() for r in range(len(xs))]),
    _row("reduce_scatter", "ReduceScatter", reduces=True, in_place_ok=True,
         inp=lambda c, r: c.nranks * c.count,
         out=lambda c, r: c.nranks * c.count if c.in_place else c.count, busbw=_n1,
         post=lambda c, r: _if(c.count > 0, [Contrib(0, c.count, _all(c.nranks), r * c.count)]),
         ref=lambda c, xs, uf: list(np.split(_fold(xs, uf), len(xs)))),
    _row("all_gather_v", "AllGatherV", replicated=True, vector="counts",
         inp=lambda c, r: c.counts[r], out=_agv_out, busbw=_n1,
         post=lambda c, r: [Contrib(c.displs[j], c.counts[j], _one(j), -c.displs[j])
                            for j in range(c.nranks) if c.counts[j]],
         ref=_agv_ref),
    _row("reduce_scatter_v", "ReduceScatterV", reduces=True, vector="counts",
         inp=lambda c, r: _agv_out(c, r), out=lambda c, r: c.counts[r], busbw=_n1,
         post=lambda c, r: _if(c.counts[r] > 0, [Contrib(0, c.counts[r], _all(c.nranks), c.displs[r])]),
         ref=_rs_ref),
    _row("alltoall", "AllToAll",
         inp=lambda c, r: c.nranks * c.count, out=lambda c, r: c.nranks * c.count, busbw=_n1,
         post=lambda c, r: _if(c.count > 0, [Contrib(j * c.count, c.count, _one(j), (r - j) * c.count)
                                             for j in range(c.nranks)]),
         ref=lambda c, xs, uf: [np.concatenate([x[r * c.count:(r + 1) * c.count] for x in xs])
                                for r in range(len(xs))]),
    _row("alltoallv", "AllToAllV", vector="matrix",
         inp=_a2av_in, out=_a2av_out, busbw=_n1,
         post=lambda c, r: [Contrib(c.rdispls[r][i], c.matrix[i][r], _one(i), c.sdispls[i][r] - c.rdispls[r][i])
                            for i in range(c.nranks) if c.matrix[i][r]],
         ref=_a2av_ref),
    _row("batch_send_recv", "BatchSendRecv", vector="items",
         inp=lambda c, r: sum(x for _, x, _ in layout(c.items)[r][0]),
         out=lambda c, r: sum(x for _, x, _, _ in layout(c.items)[r][1]), busbw=lambda n: 1.0,
         post=lambda c, r: [Contrib(o, x, _one(p), so - o) for o, x, p, so in layout(c.items)[r][1] if x],
         ref=lambda c, xs, uf: [np.concatenate([xs[p][so:so + x] for _, x, p, so in layout(c.items)[r][1]]
                                               + [xs[r][:0]]) for r in range(len(xs))]),
    _row("barrier", "Barrier", reduces=True, replicated=True,
         inp=lambda c, r: 1, out=lambda c, r: 1, busbw=lambda n: 0.0,
         post=lambda c, r: [Contrib(0, 1, _all(c.nranks), 0)],
         ref=lambda c, xs, uf: [_fold(xs, uf)] * len(xs)),
]}

#: HCCL's op names (HcclCMDType) to pyhccl's.
HCCL_OPS = {s.hccl: s.name for s in OPS.values()}
HCCL_OPS["AllToAllVC"] = "alltoallv"

_ALIASES = {"reducescatter": "reduce_scatter", "allgather": "all_gather", "bcast": "broadcast",
            "allgatherv": "all_gather_v", "reducescatterv": "reduce_scatter_v", "reduce_scatter_block": "reduce_scatter",
            "all_to_all": "alltoall", "all_to_allv": "alltoallv", "alltoallvc": "alltoallv",
            "batchsendrecv": "batch_send_recv", "sendrecv": "batch_send_recv"}


def canonical_op(name: str) -> str:
    """pyhccl's name for an op given as pyhccl, HCCL or mpi4py names it (any case).

    Raises:
        ValueError: unknown op; the message lists the valid names.
    """
    if name in OPS:
        return name
    key = name.lower().replace("-", "_")
    for k in (key, key.replace("_", "")):       # all_reduce, Allreduce, all-gather, AllGather...
        k = _ALIASES.get(k, k)
        if k in OPS:
            return k
    raise ValueError(f"unknown collective {name!r}; valid: {', '.join(OPS)} (or HCCL's names: "
                     f"{', '.join(HCCL_OPS)})")


def get_opspec(name: str) -> OpSpec:
    """The row for ``name`` (see :func:`canonical_op`). Raises ValueError listing the valid names."""
    return OPS[canonical_op(name)]


def hccl_op(name: str) -> str:
    """HCCL's op type (HcclCMDType's name) for an op as pyhccl, HCCL or mpi4py names it; AllToAllVC stays itself.

    Raises:
        ValueError: unknown op (from :func:`canonical_op`).
    """
    if str(name).replace("_", "").replace("-", "").lower() == "alltoallvc":
        return "AllToAllVC"                 # its own HCCL op type (and rules), the same pyhccl call as AllToAllV
    return OPS[canonical_op(str(name))].hccl


def _index(v: Any, name: str) -> int:
    """``v`` as an int (numpy's integers too); a bool, a float or a string raises, naming ``name``."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"expecting {name} as an int, got bool")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"expecting {name} as an int, got {type(v).__name__}") from None


def make_call(op: str, nranks: int, *, count: int = 0, root: int | None = None, counts: Sequence[int] | None = None,
              displs: Sequence[int] | None = None, send_count_matrix: Sequence[Sequence[int]] | None = None,
              in_place: bool = False, items=None) -> Call:
    """The :class:`Call` for HCCL's arguments, checked against what ``op`` takes.

    A V op without ``counts`` (AllToAllV without ``send_count_matrix``) gets ``count`` for every
    rank (every pair); BatchSendRecv without ``items`` is SendRecv of ``count`` to the next rank
    (:func:`~pyhccl.core.p2p.sendrecv_items`).

    Raises:
        ValueError: an argument the op does not take, or a bad value (from :class:`Call`).
    """
    op = canonical_op(op)
    spec = OPS[op]
    if root is not None and not spec.rooted:
        raise ValueError(f"expecting root only for a rooted op (Broadcast, Reduce, Gather, Scatter), got root={root} "
                         f"for {spec.hccl}")
    if (counts is not None or displs is not None) and spec.vector != "counts":
        raise ValueError(f"expecting counts/displs only for AllGatherV and ReduceScatterV, got them for {spec.hccl}")
    if send_count_matrix is not None and spec.vector != "matrix":
        raise ValueError(f"expecting send_count_matrix only for AllToAllV/AllToAllVC, got it for {spec.hccl}")
    if spec.vector == "counts":
        counts = (count,) * nranks if counts is None else counts
        return Call(op, nranks, counts=tuple(counts), displs=None if displs is None else tuple(displs))
    if items is not None and spec.vector != "items":
        raise ValueError(f"expecting items only for BatchSendRecv, got them for {spec.hccl}")
    if spec.vector == "matrix":
        m = tuple((count,) * nranks for _ in range(nranks)) if send_count_matrix is None else send_count_matrix
        return Call(op, nranks, matrix=tuple(tuple(row) for row in m))
    if spec.vector == "items":
        return Call(op, nranks, count, items=items, in_place=in_place)
    return Call(op, nranks, count, root=root or 0, in_place=in_place)
