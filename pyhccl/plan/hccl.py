"""HCCL's registered AllReduce algorithms as plans: Sole and Sequence executors over HCCL templates.

HCCL: src/ops/all_reduce/executor/ins_v2_all_reduce_sole_executor.cc,
ins_v2_all_reduce_sequence_executor_aicpu.cc and ..._aicpu_3level.cc (hccl-templates.md §3.1-3.2).
Every HCCL engine runs as MPI point-to-point here, so a CCU or AIV template runs the schedule
of the AICPU template that moves the same data; the engine only changes rules and costs.
"""

from __future__ import annotations

from typing import Callable, Sequence

from .build import ALLREDUCE_ALGOS, _meta
from .ir import Buf, Plan, Region, Step, copy
from .slices import Slices
from .templates import all_gather_mesh, all_gather_nhr, reduce_scatter_mesh, reduce_scatter_nhr

__all__ = ["SOLE_TEMPLATES", "LEVEL_TEMPLATES", "NotRunnableError", "build_hccl_allreduce", "build_registered",
           "not_runnable_reason"]

#: One-level AllReduce templates by the pyhccl schedule they run.
SOLE_TEMPLATES = {
    "InsTempAllReduceMesh1DOneShot": "MeshOneShot",       # ins_temp_all_reduce_mesh_1D_one_shot.cc
    "AivTempAllReduceMesh1DOneShot": "MeshOneShot",       # aiv_temp_all_reduce_mesh_1D_oneshot.cc
    "CcuTempAllReduceMesh1DOneShot": "MeshOneShot",       # ccu_temp_all_reduce_mesh_1D_one_shot.cc
    "InsTempAllReduceMesh1DTwoShot": "MeshTwoShot",       # ins_temp_all_reduce_mesh_1D_two_shot.cc
    "InsTempAllReduceMesh1DTwoShotMeshChunk": "MeshChunkTwoShot",  # ..._two_shot_mesh_chunk.cc
    "AivTempAllReduceMesh1DTwoShot": "MeshTwoShot",       # aiv_temp_all_reduce_mesh_1D_twoshot.cc
    "CcuTempAllReduceMesh1D": "MeshTwoShot",              # ccu_kernel_all_reduce_mesh1d.cc: RS phase, then AG phase
    "CcuTempAllReduceMeshMem2Mem1D": "MeshTwoShot",       # cost M(2n) + rd(n(R-1)): the two-shot's profile
    "InsTempAllReduceNHR": "NHR",                         # ins_temp_all_reduce_nhr.cc
    "CcuTempAllReduceNHRMem2Mem1D": "NHR",                # ccu_temp_all_reduce_nhr_1D_mem2mem.cc
    "InsTempAllReduceAicpuReduceNHR": "NHRAicpuReduce",   # ins_temp_all_reduce_aicpu_reduce_nhr.cc
}

#: Per-level ReduceScatter / AllGather templates of the Sequence executors.
LEVEL_TEMPLATES: dict[str, Callable] = {
    "InsTempReduceScatterMesh1D": reduce_scatter_mesh,
    "CcuTempReduceScatterMesh1DMem2Mem": reduce_scatter_mesh,
    "InsTempReduceScatterNHR": reduce_scatter_nhr,
    "CcuTempReduceScatterNHR1DMem2Mem": reduce_scatter_nhr,
    "InsTempAllGatherMesh1D": all_gather_mesh,
    "CcuTempAllGatherMesh1DMem2Mem": all_gather_mesh,
    "InsTempAllGatherNHR": all_gather_nhr,
    "CcuTempAllGatherNHR1DMem2Mem": all_gather_nhr,
}

_SOLE = "InsV2AllReduceSoleExecutor"
_SEQUENCE = ("InsV2AllReduceSequenceExecutorAicpu", "InsV2AllReduceSequenceExecutorAicpu3Level")


class NotRunnableError(NotImplementedError):
    """An HCCL algorithm whose executor or templates pyhccl cannot run yet."""


def build_hccl_allreduce(name: str, executor: str, levels: Sequence[Sequence[str]], rank: int,
                         groups: Sequence[Sequence[int]], count: int, in_place: bool = False, *,
                         uniform: bool = True) -> Plan:
    """Rank ``rank``'s plan for HCCL's AllReduce algorithm ``name``.

    Args:
        name: the registered name (for messages and metadata).
        executor, levels: its executor class and template chain per level (the registry's).
        groups: this rank's group per algorithm level (level 0 first); one group of all ranks
            for the Sole executor.
        count, in_place: the call.
        uniform: whether every group of each level has the same size (HCCL's symmetric
            layouts); the Sequence executor needs it.

    Raises:
        NotRunnableError: an executor or template pyhccl does not run yet, or a layout it
            cannot compose (groups of different sizes at one level).
    """
    chain = " -> ".join("/".join(lv) for lv in levels)
    data = Region(Buf.OUTPUT, 0, count)
    steps = [] if in_place or count == 0 else [Step(local=(copy(data, Region(Buf.INPUT, 0, count)),))]
    if executor == _SOLE and len(levels) == 1 and len(levels[0]) == 1 and levels[0][0] in SOLE_TEMPLATES:
        group = tuple(groups[0])
        steps += ALLREDUCE_ALGOS[SOLE_TEMPLATES[levels[0][0]]](group, group.index(rank), data, scratch=0)
    elif executor in _SEQUENCE and all(len(lv) == 2 and set(lv) <= LEVEL_TEMPLATES.keys() for lv in levels):
        if len(groups) != len(levels) or not uniform:
            raise NotRunnableError(f"algorithm {name!r} needs {len(levels)} levels of equal-size groups; "
                                   f"this layout has {len(groups)}{'' if uniform else ', of unequal sizes'}")
        steps += _sequence(rank, [tuple(g) for g in groups], levels, data)
    else:
        raise NotRunnableError(f"algorithm {name!r} (executor {executor}, templates {chain}) does not run in "
                               f"pyhccl yet; runnable: Sole over {', '.join(SOLE_TEMPLATES)}; Sequence over "
                               f"{', '.join(LEVEL_TEMPLATES)}")
    return Plan(rank, tuple(steps), _meta("allreduce", name, _size(groups), count, in_place))


def _sequence(rank: int, groups: list[tuple[int, ...]], levels: Sequence[Sequence[str]], data: Region) -> list[Step]:
    """RS level 0, RS level 1, ... then AG from the top level down (ins_v2_all_reduce_sequence_executor_aicpu.cc).

    Each level cuts the region it received into "floor + tail" slices over its group (slice =
    floor(curr/L), the last position takes the remainder), reduce-scatters them, and hands its
    own slice to the next level; the AllGathers then run in reverse order. Each level's
    ReduceScatter gets its own scratch area (HCCL splits the CCL buffer between phases too).
    """
    steps: list[Step] = []
    region, stack, scratch = data, [], 0
    for group, (rs, _) in zip(groups, levels):
        slices = Slices.floor_tail(region.offset, region.count, len(group))
        pos = group.index(rank)
        level = LEVEL_TEMPLATES[rs](group, pos, slices, buf=Buf.OUTPUT, scratch=scratch)
        steps += level
        scratch = max(scratch, Plan(rank, tuple(level)).scratch_count())
        stack.append((group, pos, slices))
        region = Region(Buf.OUTPUT, region.offset + pos * slices.size, slices.count(pos))
    for (group, pos, slices), (_, ag) in zip(reversed(stack), reversed(levels)):
        steps += LEVEL_TEMPLATES[ag](group, pos, slices, buf=Buf.OUTPUT)
    return steps


def _size(groups: Sequence[Sequence[int]]) -> int:
    """Ranks the groups span (their sizes multiplied)."""
    n = 1
    for g in groups:
        n *= len(g)
    return n


def build_registered(call, reg, rank, groups, uniform):
    """Rank ``rank``'s steps for ``call`` with the registered algorithm ``reg`` (its executor)."""
    if call.op != "allreduce":
        raise NotRunnableError(f"algorithm {reg.name!r} does not run in pyhccl yet")
    return list(build_hccl_allreduce(reg.name, reg.executor, reg.levels, rank, groups, call.count, call.in_place,
                                      uniform=uniform).steps)


def not_runnable_reason(name: str) -> str | None:
    """Why the registered algorithm ``name`` never runs in pyhccl, or None when it runs."""
    return None
