"""HCCL algorithm names: parse and format ``<Engine><OpType><Executor><Template>...`` by parts.

HCCL source: src/common/alg_parse.cc (``ENGINE_TYPES``, ``OP_TYPES``, ``EXECUTOR_TYPES``,
``ALGO_TYPES``, ``ParseAlgName``), src/ops/op_common/selector/hccl_algo_dims.h
(``hcclEngineType_t``), src/ops/op_common/inc/alg_param.h (``OpExecuteConfig``) and
src/ops/op_common/selector/cost_model.h (``EngineType``).
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass

__all__ = ["HcclEngine", "OpExecuteConfig", "CostEngine", "ENGINE_PREFIXES", "OP_TYPES",
           "EXECUTOR_TYPES", "TEMPLATE_TYPES", "AlgName", "parse_name", "format_name",
           "engine_of", "to_exec_config", "to_hccl_engine", "to_cost_engine", "close_matches",
           "Runtime", "RUNTIME_SEP", "AlgoRef", "parse_algo_ref"]


class HcclEngine(enum.IntEnum):
    """``hcclEngineType_t`` (hccl_algo_dims.h)."""

    AICPU = 0
    CCU_MS = 1
    CCU_SCHED = 2
    AIV = 3
    DPU = 4


class OpExecuteConfig(enum.IntEnum):
    """``OpExecuteConfig`` (alg_param.h): what the selectors and ``AlgAttrs.engine`` use."""

    DEFAULT = 0
    HOSTCPU_TS = 1
    AICPU_TS = 2
    AIV = 3
    AIV_ONLY = 4
    CCU_MS = 5
    CCU_SCHED = 6
    AICPU = 7
    HOSTCPU = 8
    CCU_FAIL = 9


class CostEngine(enum.IntEnum):
    """Cost-model ``EngineType`` (cost_model.h): picks bandwidths, latency and launch cost."""

    AICPU = 0
    CCU = 1
    CCU_CIR_MODE = 2
    AIV = 3
    CPU = 4


#: Pascal engine prefix -> engine, in ``GetEnginePrefixEntries`` order; "CcuSched" before "CcuMS"
#: does not matter (neither is a prefix of the other). alg_parse.cc ENGINE_TYPES.
ENGINE_PREFIXES: dict[str, OpExecuteConfig] = {
    "Aicpu": OpExecuteConfig.AICPU_TS, "Aiv": OpExecuteConfig.AIV, "Dpu": OpExecuteConfig.HOSTCPU,
    "CcuMS": OpExecuteConfig.CCU_MS, "CcuSched": OpExecuteConfig.CCU_SCHED,
}
#: key -> Pascal op types (alg_parse.cc OP_TYPES, plus hccl_algo_dims.h HcclOpTypeToPascal's newer ones).
OP_TYPES: dict[str, str] = {
    "allgather": "AllGather", "allgatherv": "AllGatherV", "allreduce": "AllReduce",
    "alltoall": "AllToAll", "alltoallv": "AllToAllV", "alltoallvc": "AllToAllVC",
    "broadcast": "Broadcast", "reduce": "Reduce", "reducescatter": "ReduceScatter",
    "reducescatterv": "ReduceScatterV", "scatter": "Scatter", "send": "Send", "recv": "Recv",
    "barrier": "Barrier", "batchsendrecv": "BatchSendRecv",
}
#: key -> Pascal executors (alg_parse.cc EXECUTOR_TYPES; OmniPipe names use "PipeLine").
EXECUTOR_TYPES: dict[str, str] = {
    "sole": "Sole", "sequence": "Sequence", "parallel": "Parallel", "pipeline": "PipeLine",
    "concur": "Concur", "strictordered": "StrictOrdered",
}
#: key -> Pascal templates (alg_parse.cc ALGO_TYPES, newer AlgoType incl. MultiJetty and Pairwise).
#: ``nhrsinglechannel`` is spelt ``MeshSingleChannel`` in HCCL (sic).
TEMPLATE_TYPES: dict[str, str] = {
    "mesh": "Mesh", "mesh2die": "Mesh2Die", "meshoneshot": "MeshOneShot", "meshtwoshot": "MeshTwoShot",
    "meshconcur": "MeshConcur", "meshmultilink": "MeshMultiLink", "meshchunk": "MeshChunk",
    "meshchunktwoshot": "MeshChunkTwoShot", "nhr": "NHR", "nhrmultilink": "NHRMultiLink",
    "nhraicpureduce": "NHRAicpuReduce", "nhrsinglechannel": "MeshSingleChannel",
    "meshconcurrent": "MeshConcurrent", "nhrmultijetty": "NHRMultiJetty",
    "meshmultijetty": "MeshMultiJetty", "pairwise": "Pairwise",
    "multijetty": "MultiJetty", "singlechannel": "SingleChannel", "twoshot": "TwoShot",
}
_HCCL_TO_CONFIG = {HcclEngine.AICPU: OpExecuteConfig.AICPU_TS, HcclEngine.CCU_MS: OpExecuteConfig.CCU_MS,
                   HcclEngine.CCU_SCHED: OpExecuteConfig.CCU_SCHED, HcclEngine.AIV: OpExecuteConfig.AIV,
                   HcclEngine.DPU: OpExecuteConfig.HOSTCPU}
_CONFIG_TO_COST = {OpExecuteConfig.AICPU_TS: CostEngine.AICPU, OpExecuteConfig.AICPU: CostEngine.AICPU,
                   OpExecuteConfig.AIV: CostEngine.AIV, OpExecuteConfig.AIV_ONLY: CostEngine.AIV,
                   OpExecuteConfig.CCU_MS: CostEngine.CCU, OpExecuteConfig.CCU_SCHED: CostEngine.CCU,
                   OpExecuteConfig.HOSTCPU: CostEngine.CPU, OpExecuteConfig.HOSTCPU_TS: CostEngine.CPU}


@dataclass(frozen=True)
class AlgName:
    """An algorithm name split into HCCL's dimensions.

    ``engine_prefix`` is "" for names without a known prefix (HCCL then assumes AICPU_TS);
    ``templates`` is empty when the tail does not parse (HCCL logs a warning and keeps the name).
    """

    engine_prefix: str
    op: str
    executor: str
    templates: tuple[str, ...]
    rest: str = ""

    @property
    def engine(self) -> OpExecuteConfig:
        """The engine HCCL reads from the prefix (``GetEngineByAlgName``; no prefix -> AICPU_TS)."""
        return ENGINE_PREFIXES.get(self.engine_prefix, OpExecuteConfig.AICPU_TS)

    def __str__(self) -> str:
        return format_name(self)


def format_name(name: AlgName) -> str:
    """The Pascal-case name of ``name``'s parts, e.g. ``CcuSchedAllReduceParallelMeshNHR``."""
    return name.engine_prefix + name.op + name.executor + "".join(name.templates) + name.rest


def parse_name(name: str) -> AlgName:
    """Split an HCCL algorithm name into engine, op type, executor and templates.

    Follows ``ParseAlgName``: the engine is the first prefix the name starts with, the op type
    the first op pattern in the name, then one executor, then greedy longest-first templates.
    A name that breaks the grammar keeps its unparsed tail in ``rest`` with no templates (HCCL
    logs a warning); an unknown prefix such as ``CcuMs`` stays in ``engine_prefix``.

    Raises:
        TypeError: ``name`` is not a str.
        ValueError: ``name`` has no op type; the message lists them.
    """
    if not isinstance(name, str):
        raise TypeError(f"expecting name as str, got {type(name).__name__}")
    prefix = next((p for p in sorted(ENGINE_PREFIXES, key=len, reverse=True) if name.startswith(p)), "")
    ops = sorted(OP_TYPES.values(), key=len, reverse=True)
    at = {o: name.find(o, len(prefix)) for o in ops}
    found = [o for o in ops if at[o] >= 0]
    if not found:
        raise ValueError(f"algorithm name {name!r} has no op type; valid op types: {', '.join(OP_TYPES.values())}")
    op = min(found, key=lambda o: (at[o], -len(o)))          # first op pattern, longest at that place
    prefix = name[:at[op]]                                   # an unknown prefix (e.g. "CcuMs") is kept
    tail = name[at[op] + len(op):]
    executor = next((e for e in sorted(EXECUTOR_TYPES.values(), key=len, reverse=True) if tail.startswith(e)), "")
    tail = tail[len(executor):]
    templates: list[str] = []
    tpls = sorted(set(TEMPLATE_TYPES.values()), key=len, reverse=True)
    while tail and executor:
        t = next((t for t in tpls if tail.startswith(t)), None)
        if t is None:
            break
        templates.append(t)
        tail = tail[len(t):]
    if tail:  # unmatched rest: HCCL warns and keeps no algoTypes
        return AlgName(prefix, op, executor, (), "".join(templates) + tail)
    return AlgName(prefix, op, executor, tuple(templates))


def engine_of(name: str) -> OpExecuteConfig:
    """The engine of an algorithm name by its prefix; no known prefix -> AICPU_TS (§1.1)."""
    return next((e for p, e in ENGINE_PREFIXES.items() if name.startswith(p)), OpExecuteConfig.AICPU_TS)


def to_exec_config(engine: HcclEngine) -> OpExecuteConfig:
    """``hcclEngineType_t`` -> ``OpExecuteConfig`` (DPU is HOSTCPU)."""
    return _HCCL_TO_CONFIG[HcclEngine(engine)]


def to_hccl_engine(config: OpExecuteConfig) -> HcclEngine | None:
    """``OpExecuteConfig`` -> ``hcclEngineType_t``; None for DEFAULT and CCU_FAIL."""
    config = OpExecuteConfig(config)
    if config in (OpExecuteConfig.AICPU, OpExecuteConfig.AICPU_TS):
        return HcclEngine.AICPU
    if config == OpExecuteConfig.AIV_ONLY:
        return HcclEngine.AIV
    if config == OpExecuteConfig.HOSTCPU_TS:
        return HcclEngine.DPU
    return next((h for h, c in _HCCL_TO_CONFIG.items() if c == config), None)


def to_cost_engine(config: OpExecuteConfig) -> CostEngine:
    """``OpExecuteConfig`` -> cost-model ``EngineType`` (CCU_MS and CCU_SCHED both price as CCU)."""
    return _CONFIG_TO_COST.get(OpExecuteConfig(config), CostEngine.AICPU)


def close_matches(word: str, choices) -> str:
    """", did you mean X?" for the closest choices, or ""."""
    found = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(found)}?" if found else ""


class Runtime(enum.Enum):
    """Where a plan runs: MPI point-to-point (the default) or pyhccl's shared-memory engine (``@shm``)."""

    MPI = ""
    SHM = "shm"


#: The suffix that names the shared-memory runtime in user text and tuning files ("MeshTwoShot@shm").
RUNTIME_SEP = "@"


@dataclass(frozen=True)
class AlgoRef:
    """An algorithm as the user or a tuning file names it: the name, and the runtime it runs on.

    ``str(ref)`` is the text form (``"MeshTwoShot@shm"``); :func:`parse_algo_ref` reads it back.
    """

    name: str
    runtime: Runtime = Runtime.MPI

    def __str__(self) -> str:
        return self.name if self.runtime is Runtime.MPI else f"{self.name}{RUNTIME_SEP}{self.runtime.value}"

    @property
    def shm(self) -> bool:
        return self.runtime is Runtime.SHM


def parse_algo_ref(text: str) -> AlgoRef:
    """``"Name"`` or ``"Name@shm"`` (any case of the runtime) as an :class:`AlgoRef`.

    Raises:
        ValueError: an unknown runtime after ``@``.
    """
    name, sep, runtime = str(text).partition(RUNTIME_SEP)
    if not sep:
        return AlgoRef(name)
    try:
        return AlgoRef(name, Runtime(runtime.lower()))
    except ValueError:
        raise ValueError(f"unknown runtime {runtime!r} in algorithm {text!r}; valid: "
                         f"'{RUNTIME_SEP}{Runtime.SHM.value}' (pyhccl's shared-memory engine) or none (MPI)") from None
