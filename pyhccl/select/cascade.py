"""The starting engine (expansion mode) and the engine cascade inside one rule selector.

HCCL source: src/ops/op_common/op_common.cc (``HcclGetOpExpansionMode``, ``Selector``),
src/ops/op_common/selector/auto_selector_base.cc (``AutoSelectorBase::Select``,
``ProcessAivConfig``, ``IsRollBackAiv``); hccl-selection.md §4.0-§4.3.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..algo.dtypes import HcclDataType
from ..algo.names import OpExecuteConfig as E
from ..algo.names import close_matches
from .rules.base import Answer, Ctx, miss

__all__ = ["EXPANSION_MODES", "DEVICES", "initial_config", "is_rollback_aiv", "run_cascade", "ENGINE_KEYS"]

#: HCCL_OP_EXPANSION_MODE values -> opExecuteConfig (op_common.cc ``ParseOpExpansion`` + mapping;
#: anything that is not AI_CPU / AIV / CCU maps to AICPU_TS). AIV_ONLY can only come from the comm
#: config in HCCL; pyhccl accepts it here as that config.
EXPANSION_MODES: dict[str, E] = {
    "CCU_MS": E.CCU_MS, "CCU_SCHED": E.CCU_SCHED, "AI_CPU": E.AICPU_TS, "AICPU_TS": E.AICPU_TS, "AIV": E.AIV,
    "HOST": E.AICPU_TS, "HOST_TS": E.AICPU_TS, "AICPU_CacheDisable": E.AICPU_TS, "AIV_ONLY": E.AIV_ONLY,
}
#: Emulated devices -> HcclDevType name and default starting engine (op_common.cc: 950/960 start at
#: CCU_MS, the default when no comm config says otherwise; 910_93 defaults to aicpuUnfold).
DEVICES: dict[str, tuple[str, E]] = {
    "950": ("DEV_TYPE_950", E.CCU_MS), "960": ("DEV_TYPE_960", E.CCU_MS), "910_93": ("DEV_TYPE_910_93", E.AICPU_TS),
}
#: Rule-selector engines as the select() API names them.
ENGINE_KEYS = ("CCU_MS", "CCU_SCHED", "AIV", "AICPU", "DPU")
_ALLTOALL = frozenset({"AllToAll", "AllToAllV", "AllToAllVC"})


def initial_config(device: str, expansion_mode: str | None) -> E:
    """The opExecuteConfig a selection starts from.

    Args:
        device: "950", "960" or "910_93".
        expansion_mode: an HCCL_OP_EXPANSION_MODE value; None for the device's default.

    Raises:
        ValueError: unknown device or expansion mode; the message lists the valid ones.
    """
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}{close_matches(device, DEVICES)}; valid: {', '.join(DEVICES)}")
    mode = expansion_mode
    if mode is None:
        return DEVICES[device][1]
    if mode not in EXPANSION_MODES:
        raise ValueError(f"unknown expansion mode {mode!r} (PYHCCL_OP_EXPANSION_MODE){close_matches(mode, EXPANSION_MODES)}"
                         f"; valid: {', '.join(EXPANSION_MODES)}")
    return EXPANSION_MODES[mode]


def is_rollback_aiv(x: Ctx) -> bool:
    """``IsRollBackAiv``: the PCIe-mesh scene and the PCIe P2P scene force AIV_ONLY."""
    t, op = x.topo, x.call.op
    if t.level0_pcie_mix and t.level0_big_clos_range and (
            op in _ALLTOALL or (x.call.dtype == HcclDataType.INT64 and op in ("AllReduce", "ReduceScatter", "Reduce"))):
        return True
    return t.level0_pcie_mix and t.server_num == 1 and op in ("Send", "Recv") and not x.allconn


def _rule(rules: dict[str, Callable[[Ctx], Answer]], key: str, x: Ctx) -> Answer:
    fn = rules.get(key)
    return fn(x) if fn else miss(f"no {key} selector for {x.call.op} (base class NOT_MATCH)")


def run_cascade(rules: dict[str, Callable[[Ctx], Answer]], x: Ctx, config: E,
                steps: list[tuple[str, Answer]]) -> tuple[Answer, E]:
    """``Selector`` + ``AutoSelectorBase::Select``: try engines from ``config`` down, first MATCH wins.

    Appends (engine key, answer) for every selector tried to ``steps``, and ("rollback", answer)
    where the AIV roll-back ends without trying one; returns the final answer and the
    opExecuteConfig it leaves (NOT_MATCH answers keep the last engine tried).
    """
    def attempt(key: str, ctx: Ctx = x) -> Answer:
        ans = _rule(rules, key, ctx)
        steps.append((key, ans))
        return ans

    def process_aiv(cfg: E, ctx: Ctx = x) -> tuple[Answer | None, E]:
        """``ProcessAivConfig``: (the answer that ends the selection, or None to go on; the config)."""
        if cfg not in (E.AIV, E.AIV_ONLY):
            return None, cfg
        if x.topo.top_level_uboe:                               # before any AIV rule
            return None, E.CCU_FAIL
        ans = attempt("AIV", ctx)
        if ans.matched or cfg == E.AIV_ONLY:
            return ans, cfg
        return None, E.CCU_FAIL

    if x.topo.top_level_uboe:                                   # op_common.cc Selector, step 3
        config = E.AICPU_TS
    if x.topo.host_dpu_only:                                    # CheckHostDPUOnly
        return attempt("DPU"), E.HOSTCPU
    if config == E.CCU_MS:
        ans = attempt("CCU_MS")
        if ans.matched:
            return ans, E.CCU_MS
        config = E.CCU_SCHED
    if config == E.CCU_SCHED:
        ans = attempt("CCU_SCHED")
        if ans.matched:
            return ans, E.CCU_SCHED
        config = E.CCU_FAIL
    ans, config = process_aiv(config)
    if ans is not None:
        return ans, config
    if config in (E.AICPU_TS, E.HOSTCPU_TS, E.CCU_FAIL, E.AICPU):
        if is_rollback_aiv(x):
            # auto_selector_base.cc Select: AIV_ONLY, then ProcessAivConfig, and its result stands
            ans, config = process_aiv(E.AIV_ONLY, Ctx(x.topo, replace(x.call, aiv_only=True)))
            if ans is None:                                     # HCCL returns the NOT_MATCH it had
                ans = miss("IsRollBackAiv -> AIV_ONLY; ProcessAivConfig: topLevelUboe -> CCU_FAIL "
                           "before any AIV rule; no AICPU fallback")
                steps.append(("rollback", ans))
            return ans, config
        return attempt("AICPU"), E.AICPU_TS
    return miss(f"no selector for opExecuteConfig {config.name}"), config
