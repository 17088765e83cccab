"""``python -m pyhccl.bench <op>``: any collective, pyhccl against the wrapped MPI, through mpi4py's methods.

One loop for every op (nccl-tests src/common.cu ``TimeTest``): per size, the native MPI call is
timed once, then every algorithm out of place and in place; then the inputs are re-seeded, each
form runs once more and is compared with the op's numpy reference (:attr:`OpSpec.reference`).
The op only changes which mpi4py method is called and with which buffers (:data:`BENCH_OPS`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from ..algo.names import AlgoRef, Runtime, parse_algo_ref
from ..comm import Communicator, dtype_by_name
from ..core.call import OPS, Call
from ..plan.api import flat_names, hccl_names, resolve_name
from ..run.shm import OPS as SHM_OPS
from ..topo import TopoSpec, comm_topology
from ..verify import check, machine
from .driver import BenchArgs, Row, UsageError, fill, parse_args, sizes, time_call

__all__ = ["BenchOp", "BENCH_OPS", "run"]

_MPI_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
_UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
_PROGRESS_SECONDS = 5.0
_TUNED = "@tuned"                # the communicator with --tuning's file
_FAST = "@fast"                  # the default communicator: pyhccl's fast paths priced by the machine profile


@dataclass(frozen=True)
class BenchOp:
    """How the benchmark calls one collective.

    Attributes:
        op: pyhccl's op name (the :data:`~pyhccl.core.call.OPS` row: sizes, busbw factor, reference).
        method: the mpi4py method both communicators are called with.
        block: nccl-tests' size is the whole buffer of N blocks (per-rank count = size / N).
    """

    op: str
    method: str
    block: bool = False

    @property
    def in_place(self) -> bool:
        """Whether the table has an in-place column (Bcast has one buffer only)."""
        return OPS[self.op].in_place_ok and self.op != "broadcast"


#: Benchmarks by command name.
BENCH_OPS: dict[str, BenchOp] = {
    "allreduce": BenchOp("allreduce", "Allreduce"),
    "allgather": BenchOp("all_gather", "Allgather", block=True),
    "reducescatter": BenchOp("reduce_scatter", "Reduce_scatter_block", block=True),
    "alltoall": BenchOp("alltoall", "Alltoall", block=True),
    "broadcast": BenchOp("broadcast", "Bcast"),
    "reduce": BenchOp("reduce", "Reduce"),
    "gather": BenchOp("gather", "Gather", block=True),
    "scatter": BenchOp("scatter", "Scatter", block=True),
    "alltoallv": BenchOp("alltoallv", "Alltoallv", block=True),
    "allgatherv": BenchOp("all_gather_v", "Allgatherv", block=True),
}


def run(name: str, comm: MPI.Intracomm, argv: Sequence[str] | None = None) -> tuple[BenchArgs, list[Row]]:
    """Benchmark the collective ``name`` (a key of :data:`BENCH_OPS`) on ``comm``; every rank returns the rows.

    Raises:
        UsageError: a bad flag, an unknown algorithm, or a collective pyhccl.Communicator lacks.
    """
    bop = BENCH_OPS[name]
    spec = OPS[bop.op]
    args = parse_args(name, argv, _algo_help(bop.op))
    if not callable(Communicator.__dict__.get(bop.method)):
        raise UsageError(f"pyhccl.Communicator has no {bop.method} yet: nothing to benchmark for {name}")
    n, rank = comm.Get_size(), comm.Get_rank()
    if spec.rooted and not 0 <= args.root < n:
        raise UsageError(f"expecting -r root in range({n}), got {args.root}")
    try:
        spec_of_machine = comm_topology(comm, args.topo).spec
    except ValueError as e:
        raise UsageError(f"--topo: {e}") from None
    comms = _communicators(bop.op, args, comm, spec_of_machine)
    redops = args.redops if spec.reduces else ("none",)
    jobs = [(dname, redop, size) for dname in args.dtypes for redop in redops
            for size in sizes(args, dtype_by_name(dname).itemsize, n if bop.block else 1)]
    rows: list[Row] = []
    t0 = t_last = time.perf_counter()
    for i, (dname, redop, size) in enumerate(jobs):
        rows += _one_size(bop, args, comm, comms, dtype_by_name(dname), dname, redop, size)
        if rank == 0 and time.perf_counter() - t_last > _PROGRESS_SECONDS:       # long sweeps: say where we are
            t_last = time.perf_counter()
            print(f"# progress: {i + 1}/{len(jobs)} sizes x {len(comms)} algorithms in {t_last - t0:.0f} s "
                  f"(last {dname} {redop} {size} B)", file=sys.stderr, flush=True)
    return args, rows


def _algo_help(op: str) -> str:
    return (f"algorithms, comma-separated: auto (HCCL's selection, as PYHCCL_PROFILE=hccl), fast (the default "
            f"communicator: pyhccl's fast paths priced by the machine profile), all (pyhccl's templates and every "
            f"HCCL name eligible for the topology), templates, hccl, or names: {', '.join(flat_names(op))} or "
            f"HCCL's names; default auto,fast")


def _communicators(op: str, args: BenchArgs, comm: MPI.Intracomm, topo: TopoSpec) -> dict[str, Communicator]:
    """One pyhccl communicator per algorithm of ``--algo`` (key "" for HCCL's selection)."""
    out: dict[str, Communicator] = {}
    profiles = bool(args.tune or args.tuning or args.report)
    tokens = [t.strip() for t in args.algo.split(",") if t.strip()]
    if profiles and "auto" not in (t.lower() for t in tokens):
        tokens.insert(0, "auto")
    for token in tokens:
        key = token.lower()
        if key == "auto":
            names = [""]
        elif key == "fast":
            if _FAST not in out:
                try:
                    out[_FAST] = Communicator(comm, topo=args.topo, tuning="", profile="auto")
                except ValueError as e:
                    raise UsageError(f"--algo fast: {e}") from None
            continue
        elif key in ("all", "templates", "hccl"):
            names = _eligible(op, key, args, comm, topo)
        else:
            try:
                ref = parse_algo_ref(token)
                names = [str(AlgoRef(resolve_name(op, ref.name), ref.runtime))]
            except ValueError as e:
                raise UsageError(str(e)) from None
        for a in names:
            if a in out:
                continue
            try:                      # with a tuning file in play, "auto" is HCCL's profile
                out[a] = Communicator(comm, algo=a or "", topo=args.topo, tuning="" if profiles else None,
                                      profile="hccl")
            except ValueError as e:
                if key in ("all", "templates", "hccl"):
                    continue                  # the communicator does not take this name for forcing
                raise UsageError(f"--algo {a}: {e}") from None
    if args.tuning:
        try:
            out[_TUNED] = Communicator(comm, topo=args.topo, tuning=args.tuning)
        except ValueError as e:
            raise UsageError(f"--tuning (default PYHCCL_TUNING_FILE): {e}") from None
    first = next(iter(out.values()), None)
    shm = any(parse_algo_ref(a).shm for a in out if a not in (_TUNED, _FAST))
    for a, pc in out.items():         # one scratch for all: they run one at a time (30 x 64 MiB would not fit)
        pc.share_scratch(first)
        if shm and a != _FAST:        # and one shared window (the fast one keeps the engine it measured on)
            pc.share_window(first)
    return out


def _eligible(op: str, key: str, args: BenchArgs, comm: MPI.Intracomm, topo: TopoSpec) -> list[str]:
    """pyhccl's templates and/or the HCCL names whose attributes accept the topology and that build.

    Every rank decides alike: the same simulation of a small call on the same machine.
    """
    m = machine(topo)
    n = comm.Get_size()
    names = (flat_names(op) if key in ("all", "templates") else []) + (hccl_names(op) if key in ("all", "hccl") else [])
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    one_node = comm.allreduce(node.Get_size() == n, op=MPI.LAND)
    node.Free()
    call = _call(op, n, n + 1, args.root, False)
    keep = []
    for a in names:
        res = check(call, a, m, dtype=args.dtypes[0], reduce_op=args.redops[0])
        if res.ok:
            keep.append(a)
    if one_node and key in ("all", "templates") and op in SHM_OPS:   # the templates on the shared-memory engine
        keep += [str(AlgoRef(a, Runtime.SHM)) for a in flat_names(op) if a in keep]
    return keep


def _call(op: str, n: int, count: int, root: int, in_place: bool) -> Call:
    """The Call the benchmark makes with per-rank (or per-peer) count ``count``."""
    if op == "all_gather_v":
        return Call(op, n, counts=tuple(count * (1 + r % 3) // 2 for r in range(n)))
    if op == "alltoallv":
        return Call(op, n, matrix=tuple(tuple(count * (1 + (i + 2 * j) % 3) // 2 for j in range(n)) for i in range(n)))
    return Call(op, n, count, root=root if OPS[op].rooted else 0, in_place=in_place)


def _one_size(bop: BenchOp, args: BenchArgs, comm: MPI.Intracomm, comms: dict[str, Communicator],
              dtype: np.dtype, dname: str, redop: str, size: int) -> list[Row]:
    n, rank = comm.Get_size(), comm.Get_rank()
    spec = OPS[bop.op]
    count = size // dtype.itemsize // (n if bop.block else 1)
    mop = _MPI_OPS.get(redop, MPI.SUM)
    calls = {False: _call(bop.op, n, count, args.root, False)}
    if bop.in_place and args.inplace:
        calls[True] = _call(bop.op, n, count, args.root, True)
    owner = next(iter(comms.values())) if args.shared and comms else None
    shared: list[np.ndarray] = []

    def alloc(count: int, dt: np.dtype) -> np.ndarray:
        shared.append(owner.alloc_shared(count, dt))
        return shared[-1]

    bufs = {ip: _buffers(c, rank, dtype, alloc if owner else None) for ip, c in calls.items()}

    def invoke(target: Any, ip: bool, arrays: dict = bufs) -> Callable[[], None]:
        a = _method_args(bop, calls[ip], rank, *arrays[ip], mop)
        fn = getattr(target, bop.method)
        return lambda: fn(*a)

    nb = {False: _buffers(calls[False], rank, dtype)} if owner else bufs
    times: dict[tuple[str, bool], float | None] = {}
    native = None
    for _ in range(args.rounds):        # rounds: each algorithm measured once per round, the fastest round counts
        if args.native and _native_can(dtype):
            # native MPI on ordinary arrays even with --buffers shared: shared memory has no huge pages here,
            # which costs native MPI 10-25 % at 4-64 MiB; its users would not allocate there
            _prepare(calls[False], rank, nb[False], args.seed, redop)
            t = time_call(comm, invoke(comm, False, nb), args.iters, args.warmup, args.budget, args.blocks)
            native = t if native is None else min(native, t)
        for algo, pc in comms.items():
            for ip in calls:
                _prepare(calls[ip], rank, bufs[ip], args.seed, redop)
                t = _time_or_none(comm, invoke(pc, ip), args)
                prev = times.get((algo, ip))
                times[(algo, ip)] = t if prev is None or t is None else min(prev, t)
    del nb
    expected = _reference(calls, rank, dtype, args.seed, redop) if args.check else {}
    rows = []
    bw = spec.busbw_factor(n)
    for algo, pc in comms.items():
        res: dict[bool, tuple[float | None, int]] = {}
        for ip in calls:
            t = times[(algo, ip)]
            wrong = 0
            if t is not None and ip in expected:
                bufs[ip][1][...] = 0
                _prepare(calls[ip], rank, bufs[ip], args.seed, redop)
                invoke(pc, ip)()
                ref = expected[ip]
                mine = 0 if ref is None else int(np.count_nonzero(bufs[ip][1][:ref.size] != ref))
                wrong = comm.allreduce(mine, op=MPI.SUM)
            res[ip] = (t, wrong if t is not None or not ip else None)
        t, wrong = res[False]
        t_ip, ip_wrong = res.get(True, (None, None))
        prefix = {_TUNED: "tuned:", _FAST: "fast:", "": "auto:"}.get(algo)
        label = prefix + _selected(pc) if prefix else algo
        rows.append(Row(size, count * (n if bop.block else 1), dname, redop, args.root if spec.rooted else -1,
                        _us(t), _gbs(size, t), _gbs(size, t, bw), wrong,
                        _us(t_ip), _gbs(size, t_ip), _gbs(size, t_ip, bw), ip_wrong,
                        label, _us(native), native / t if native is not None and t else None,
                        calls[False].hccl_nbytes(dtype.itemsize)))
    for b in shared:
        owner.free_shared(b)
    return rows


def _buffers(call: Call, rank: int, dtype: np.dtype, alloc: Callable | None = None) -> tuple[np.ndarray, np.ndarray]:
    """This rank's send and receive arrays (in place: the receive array holds the input too); with
    ``alloc`` (``Communicator.alloc_shared``) in shared memory, every rank allocating the largest rank's size."""
    if alloc is None:
        return np.empty(call.input_count(rank), dtype), np.empty(max(call.output_count(rank), 0), dtype)
    n = call.nranks
    nin, nout = max(call.input_count(r) for r in range(n)), max(max(call.output_count(r), 0) for r in range(n))
    return alloc(nin, dtype)[:call.input_count(rank)], alloc(nout, dtype)[:max(call.output_count(rank), 0)]


def _fill_input(call: Call, rank: int, send: np.ndarray, seed: int, redop: str) -> None:
    fill(send, seed, rank, redop if OPS[call.op].reduces else None)


def _prepare(call: Call, rank: int, bufs: tuple[np.ndarray, np.ndarray], seed: int, redop: str) -> None:
    """Seed the input; where this rank's call reads it from the output (in place, Bcast), put it there."""
    send, recv = bufs
    _fill_input(call, rank, send, seed, redop)
    if call.in_place and (call.op not in ("reduce", "gather") or rank == call.root):
        at = call.in_place_offset(rank)
        recv[at:at + send.size] = send


def _method_args(bop: BenchOp, call: Call, rank: int, send: np.ndarray, recv: np.ndarray, mop: MPI.Op) -> tuple:
    """The arguments of ``comm.<method>`` for this call, as mpi4py takes them."""
    ip, root, is_root = call.in_place, call.root, rank == call.root
    src = MPI.IN_PLACE if ip else send
    op = bop.op
    if op in ("allreduce", "reduce_scatter"):
        return src, recv, mop
    if op == "reduce":
        return (MPI.IN_PLACE if ip and is_root else send), (recv if is_root else None), mop, root
    if op == "broadcast":
        return recv, root
    if op == "all_gather":
        return src, recv
    if op == "gather":
        return (MPI.IN_PLACE if ip and is_root else send), (recv if is_root else None), root
    if op == "scatter":
        return (send if is_root else None), recv, root
    if op == "alltoall":
        return send, recv
    if op == "all_gather_v":
        return send, [recv, (list(call.counts), list(call.displs))]
    if op == "alltoallv":
        n = call.nranks
        return ([send, (list(call.matrix[rank]), list(call.sdispls[rank]))],
                [recv, ([call.matrix[i][rank] for i in range(n)], list(call.rdispls[rank]))])
    raise ValueError(f"no benchmark form for {op!r}")


def _reference(calls: dict[bool, Call], rank: int, dtype: np.dtype, seed: int, redop: str) -> dict:
    """Per form, this rank's exact result from the op's numpy reference over every rank's inputs."""
    out = {}
    for ip, call in calls.items():
        inputs = []
        for r in range(call.nranks):
            x = np.empty(call.input_count(r), dtype)
            _fill_input(call, r, x, seed, redop)
            inputs.append(x)
        got = OPS[call.op].reference(call, inputs, _UFUNCS.get(redop, np.add))
        out[ip] = got[rank]
    return out


def _time_or_none(comm: MPI.Intracomm, fn: Callable[[], None], args: BenchArgs) -> float | None:
    """:func:`time_call`, or None when the communicator refuses the call (on every rank alike)."""
    try:
        return time_call(comm, fn, args.iters, args.warmup, args.budget, args.blocks)
    except (RuntimeError, NotImplementedError):
        return None


def _selected(pc: Communicator) -> str:
    """The name behind the communicator's last call (its ``last_algorithm`` when it has one)."""
    name = getattr(pc, "last_algorithm", None)
    if name:
        return name
    sel = getattr(pc, "last_selection", None)
    return sel.algorithm if sel is not None else "-"


def _native_can(dtype: np.dtype) -> bool:
    """Whether the wrapped MPI has a datatype for ``dtype`` (bfloat16 never; float16 on MPICH only)."""
    try:
        return dtlib.from_numpy_dtype(dtype) != MPI.DATATYPE_NULL
    except (KeyError, ValueError, TypeError):
        return False


def _us(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e6


def _gbs(nbytes: int, seconds: float | None, factor: float = 1.0) -> float | None:
    """GB/s for ``nbytes`` in ``seconds``, times ``factor`` (the busbw factor); None without a time."""
    if seconds is None:
        return None
    return nbytes / seconds / 1e9 * factor if seconds > 0 else 0.0
