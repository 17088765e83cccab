"""The Sole executor: one-level plans for AllReduce, ReduceScatter and AllGather.

HCCL: src/ops/*/executor/ins_v2_*_sole_executor.cc (one template over the whole communicator,
TopoMatch1D). The executor copies the input into the output (unless in place), runs the
template in place there, and for ReduceScatter works in scratch and copies its slice out.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from typing import Callable

from .ir import Buf, Plan, Region, Step, copy
from .slices import Slices
from .templates import (all_gather_mesh, all_gather_nhr, all_gather_ring, allreduce_mesh_chunk,
                        allreduce_mesh_one_shot, allreduce_mesh_two_shot, allreduce_nhr, allreduce_nhr_aicpu_reduce,
                        allreduce_rhd, allreduce_ring, reduce_scatter_mesh, reduce_scatter_nhr, reduce_scatter_ring)

__all__ = ["ALLREDUCE_ALGOS", "HCCL_NAMES", "REDUCE_SCATTER_FORMS", "ALL_GATHER_FORMS", "resolve_algo",
           "build_allreduce", "build_reduce_scatter", "build_all_gather"]

#: AllReduce templates by short name, in the order the benchmark lists them.
ALLREDUCE_ALGOS: dict[str, Callable[..., list[Step]]] = {
    "MeshOneShot": allreduce_mesh_one_shot,
    "MeshTwoShot": allreduce_mesh_two_shot,
    "MeshChunkTwoShot": allreduce_mesh_chunk,
    "NHR": allreduce_nhr,
    "NHRAicpuReduce": allreduce_nhr_aicpu_reduce,
    "Ring": allreduce_ring,
    "RHD": allreduce_rhd,
}

#: HCCL's registered names for the same algorithms (src/ops/all_reduce/executor/, REGISTER_EXEC_V2).
#: Ring and RHD are documented by HCCL but registered under no name.
HCCL_NAMES = {
    "AicpuAllReduceSoleMeshOneShot": "MeshOneShot",
    "AicpuAllReduceSoleMeshTwoShot": "MeshTwoShot",
    "AicpuAllReduceSoleMeshChunkTwoShot": "MeshChunkTwoShot",
    "AicpuAllReduceSoleNHR": "NHR",
    "AicpuAllReduceSoleNHRAicpuReduce": "NHRAicpuReduce",
}

#: ReduceScatter and AllGather templates by short name (their one-level forms, for verify and tests).
REDUCE_SCATTER_FORMS = {"Mesh": reduce_scatter_mesh, "NHR": reduce_scatter_nhr, "Ring": reduce_scatter_ring}
ALL_GATHER_FORMS = {"Mesh": all_gather_mesh, "NHR": all_gather_nhr, "Ring": all_gather_ring}


def resolve_algo(name: str, choices: dict[str, object] = ALLREDUCE_ALGOS) -> str:
    """The short template name for ``name`` (short or HCCL form, any case).

    Raises:
        ValueError: unknown name; the message lists the valid names and the close matches.
    """
    names = list(choices) + [n for n, short in HCCL_NAMES.items() if short in choices]
    for n in names:
        if n.lower() == name.lower():
            return HCCL_NAMES.get(n, n)
    lower = {n.lower(): n for n in names}
    close = [lower[m] for m in difflib.get_close_matches(name.lower(), lower, n=3, cutoff=0.6)]
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise ValueError(f"unknown algorithm {name!r}{hint}; valid: {', '.join(names)}")


@lru_cache(maxsize=1024)
def build_allreduce(algo: str, rank: int, nranks: int, count: int, in_place: bool = False) -> Plan:
    """Rank ``rank``'s AllReduce plan over ``count`` elements with template ``algo``."""
    name = resolve_algo(algo)
    data = Region(Buf.OUTPUT, 0, count)
    steps = [] if in_place or count == 0 else [Step(local=(copy(data, Region(Buf.INPUT, 0, count)),))]
    steps += ALLREDUCE_ALGOS[name](tuple(range(nranks)), rank, data, scratch=0)
    return Plan(rank, tuple(steps), _meta("allreduce", name, nranks, count, in_place))


@lru_cache(maxsize=1024)
def build_reduce_scatter(algo: str, rank: int, nranks: int, count: int) -> Plan:
    """ReduceScatter (block form): ``count`` elements out per rank, ``nranks*count`` in."""
    name = resolve_algo(algo, REDUCE_SCATTER_FORMS)
    total = count * nranks
    slices = Slices(0, nranks, count, nranks, 0)
    steps = [Step(local=(copy(Region(Buf.SCRATCH, 0, total), Region(Buf.INPUT, 0, total)),))] if total else []
    steps += REDUCE_SCATTER_FORMS[name](tuple(range(nranks)), rank, slices, buf=Buf.SCRATCH, scratch=total)
    if count:
        steps.append(Step(local=(copy(Region(Buf.OUTPUT, 0, count), Region(Buf.SCRATCH, rank * count, count)),)))
    return Plan(rank, tuple(steps), _meta("reduce_scatter", name, nranks, count, False))


@lru_cache(maxsize=1024)
def build_all_gather(algo: str, rank: int, nranks: int, count: int) -> Plan:
    """AllGather: ``count`` elements in per rank, ``nranks*count`` out."""
    name = resolve_algo(algo, ALL_GATHER_FORMS)
    slices = Slices(0, nranks, count, nranks, 0)
    steps = [Step(local=(copy(Region(Buf.OUTPUT, rank * count, count), Region(Buf.INPUT, 0, count)),))] if count else []
    steps += ALL_GATHER_FORMS[name](tuple(range(nranks)), rank, slices, buf=Buf.OUTPUT)
    return Plan(rank, tuple(steps), _meta("all_gather", name, nranks, count, False))


def _meta(op: str, algo: str, nranks: int, count: int, in_place: bool) -> tuple:
    return (("op", op), ("algo", algo), ("nranks", nranks), ("count", count), ("in_place", in_place))
