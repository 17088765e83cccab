"""``python -m pyhccl.bench allreduce``: pyhccl's AllReduce against the wrapped MPI's."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from ..comm import Communicator
from ..ops import dtype_by_name
from ..opspec import get_opspec
from ..plan.build import ALLREDUCE_ALGOS, resolve_algo
from .driver import BenchArgs, Row, UsageError, fill, parse_args, sizes, time_call

__all__ = ["run"]

_MPI_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
_UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}

ALGO_HELP = (f"algorithms, comma-separated: auto (HCCL's selection), all (every template), or any of "
             f"{', '.join(ALLREDUCE_ALGOS)} (HCCL names accepted); default auto")


def run(comm: MPI.Intracomm, argv: Sequence[str] | None = None) -> tuple[BenchArgs, list[Row]]:
    """Benchmark AllReduce on ``comm``; every rank returns the same rows."""
    args = parse_args("allreduce", argv, ALGO_HELP)
    algos = _algos(args.algo)
    comms = {a: Communicator(comm, algo=a) for a in algos}
    spec = get_opspec("allreduce")
    n, rank = comm.Get_size(), comm.Get_rank()
    rows: list[Row] = []
    for dname in args.dtypes:
        dtype = dtype_by_name(dname)
        for redop in args.redops:
            for size in sizes(args, dtype.itemsize):
                count = size // dtype.itemsize
                send, recv = np.empty(count, dtype), np.empty(count, dtype)
                mop = _MPI_OPS[redop]
                native = None
                if args.native and _native_can(dtype):
                    fill(send, args.seed, rank, redop)
                    native = time_call(comm, lambda: comm.Allreduce(send, recv, mop), args.iters, args.warmup)
                expected = _expected(args, dtype, count, n, redop) if args.check else None
                for algo, pc in comms.items():
                    fill(send, args.seed, rank, redop)
                    t = time_call(comm, lambda: pc.Allreduce(send, recv, mop), args.iters, args.warmup)
                    name = algo or f"auto:{pc.last_selection.algorithm if pc.last_selection else '-'}"
                    ip = recv.copy()
                    t_ip = time_call(comm, lambda: pc.Allreduce(MPI.IN_PLACE, ip, mop), args.iters, args.warmup)
                    wrong = ip_wrong = 0
                    if expected is not None:
                        fill(send, args.seed, rank, redop)
                        recv.fill(0)
                        pc.Allreduce(send, recv, mop)
                        fill(ip, args.seed, rank, redop)
                        pc.Allreduce(MPI.IN_PLACE, ip, mop)
                        wrong = comm.allreduce(int(np.count_nonzero(recv != expected)), op=MPI.SUM)
                        ip_wrong = comm.allreduce(int(np.count_nonzero(ip != expected)), op=MPI.SUM)
                    bw = spec.busbw_factor(n)
                    rows.append(Row(size, count, dname, redop, -1,
                                    t * 1e6, _gbs(size, t), _gbs(size, t) * bw, wrong,
                                    t_ip * 1e6, _gbs(size, t_ip), _gbs(size, t_ip) * bw, ip_wrong,
                                    name, native * 1e6 if native is not None else None,
                                    native / t if native is not None and t > 0 else None))
    return args, rows


def _algos(text: str) -> list[str | None]:
    """``auto,all,NHR`` to [None, every template..., "NHR"] without repeats (None = the default rule)."""
    out: list[str | None] = []
    for name in (t.strip() for t in text.split(",")):
        try:
            names = [None] if name == "auto" else list(ALLREDUCE_ALGOS) if name == "all" else [resolve_algo(name)]
        except ValueError as e:
            raise UsageError(str(e)) from None
        out += [a for a in names if a not in out]
    return out


def _expected(args: BenchArgs, dtype: np.dtype, count: int, n: int, redop: str) -> np.ndarray:
    """The exact result, folded from every rank's inputs in rank order."""
    acc = np.empty(count, dtype)
    fill(acc, args.seed, 0, redop)
    x = np.empty(count, dtype)
    for r in range(1, n):
        fill(x, args.seed, r, redop)
        _UFUNCS[redop](acc, x, out=acc)
    return acc


def _native_can(dtype: np.dtype) -> bool:
    """Whether the wrapped MPI has a datatype for ``dtype`` (bfloat16 never; float16 on MPICH only)."""
    try:
        return dtlib.from_numpy_dtype(dtype) != MPI.DATATYPE_NULL
    except (KeyError, ValueError, TypeError):
        return False


def _gbs(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0
