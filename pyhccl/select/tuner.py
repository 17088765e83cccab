"""The tuner hook: a Python mirror of hcclTunerPlugin_v1 (init, getCollInfo), loaded only by name.

HCCL source: src/ops/op_common/selector/inc/hccl_tuner_plugin.h (``hcclTunerFuncs_v1_t``,
``hcclTunerCommInfo_t``, ``hcclTunerAlgoEntry_t``), src/common/tuner/* (loading, the 100 ms x 3
slow-call rule), src/ops/op_common/selector/algo_name_mapper.cc (``Enrich``); hccl-selection.md §7.
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from ..algo.names import ENGINE_PREFIXES, EXECUTOR_TYPES, TEMPLATE_TYPES, parse_name
from ..algo.predicates import OpCall
from ..topo.info import TopoInfo

__all__ = ["TunerCommInfo", "TunerEntry", "TunerPlugin", "Tuner", "load_tuner", "SLOW_CALL_S",
           "SLOW_CALLS_TO_DISABLE", "SLOW_INIT_S"]

log = logging.getLogger("pyhccl.select")
SLOW_CALL_S = 0.100            # tuner: a getCollInfo call over 100 ms is slow
SLOW_CALLS_TO_DISABLE = 3      # tuner: three slow calls in a row disable the plugin for the process
SLOW_INIT_S = 5.0              # tuner: an init over 5000 ms only warns


@dataclass(frozen=True)
class TunerCommInfo:
    """``hcclTunerCommInfo_t``."""

    n_ranks: int
    n_npus_per_server: int
    n_servers: int
    n_pods: int
    n_super_pods: int
    comm_name: str = ""
    buffer_size: int = 0


class TunerEntry:
    """``hcclTunerAlgoEntry_t``: names are read-only; ``cost`` < 0 disables, 0 prefers, > 0 re-prices."""

    __slots__ = ("_alg", "_engine", "_executor", "_template", "cost")

    def __init__(self, alg_name: str, engine_name: str, executor_name: str, template_name: str, cost: float):
        self._alg, self._engine, self._executor, self._template = alg_name, engine_name, executor_name, template_name
        self.cost = cost

    alg_name = property(lambda self: self._alg)
    engine_name = property(lambda self: self._engine)
    executor_name = property(lambda self: self._executor)
    template_name = property(lambda self: self._template)

    def __repr__(self) -> str:
        return f"TunerEntry({self._alg!r}, cost={self.cost!r})"


class TunerPlugin(Protocol):
    """What a plugin provides (``hcclTunerFuncs_v1_t``)."""

    def init(self, comm_info: TunerCommInfo) -> None: ...

    def get_coll_info(self, op: str, nbytes: int, dtype: str, entries: tuple[TunerEntry, ...]) -> Any: ...


def _enrich(name: str) -> tuple[str, str, str]:
    """``AlgoNameMapper::Enrich``: engine, executor, template when the name is exactly one of each."""
    try:
        p = parse_name(name)
    except ValueError:                  # not an HCCL name (pyhccl's templates, native MPI)
        return "", "", ""
    if p.engine_prefix not in ENGINE_PREFIXES or len(p.templates) != 1 or p.rest or not p.executor:
        return "", "", ""
    keys = {v: k for k, v in {**EXECUTOR_TYPES, **TEMPLATE_TYPES}.items()}
    return p.engine_prefix, keys.get(p.executor, ""), keys.get(p.templates[0], "")


def comm_info(topo: TopoInfo, call: OpCall) -> TunerCommInfo:
    """The ``hcclTunerCommInfo_t`` HCCL fills from TopoInfo."""
    net = topo.net_layer_details
    per_layer = net.net_inst_num_of_layer
    local = net.local_net_ins_size_of_layer
    return TunerCommInfo(topo.user_rank_size, local[0] if local else topo.user_rank_size, topo.server_num,
                         per_layer[1] if len(per_layer) > 1 else 0, per_layer[2] if len(per_layer) > 2 else 0,
                         "", call.ccl_buffer_size)


class Tuner:
    """A loaded plugin with HCCL's safety rules: init once per communicator, disable on errors or slowness."""

    def __init__(self, plugin: Any, name: str = "", clock: Callable[[], float] = time.perf_counter):
        for attr in ("init", "get_coll_info"):
            if not callable(getattr(plugin, attr, None)):
                raise TypeError(f"tuner plugin {name or plugin!r} has no callable {attr}(); "
                                "expecting init(comm_info) and get_coll_info(op, nbytes, dtype, entries)")
        self.plugin, self.name, self.clock = plugin, name, clock
        self.disabled = False
        self._slow = 0
        self._inited: set = set()

    def enrich(self, op: str, call: OpCall, topo: TopoInfo, rows: list, changes: list[str]) -> None:
        """``TunerEnrichCostTable``: let the plugin re-price the costed rows in place."""
        if self.disabled:
            changes.append(f"tuner {self.name} disabled earlier: costs unchanged")
            return
        info = comm_info(topo, call)
        if info not in self._inited:
            self._inited.add(info)
            t0 = self.clock()
            try:
                self.plugin.init(info)
            except Exception as exc:  # noqa: BLE001 - a plugin error must not break selection
                log.warning("tuner %s: init failed (%s); using the plain cost model", self.name, exc)
                changes.append(f"tuner init failed: {exc}")
                return
            if self.clock() - t0 > SLOW_INIT_S:
                log.warning("tuner %s: init took over %.0f ms", self.name, SLOW_INIT_S * 1000)
        costed = [r for r in rows if r.cost is not None]
        entries = tuple(TunerEntry(r.name, *_enrich(r.name), r.cost) for r in costed)
        nbytes = call.nbytes * topo.user_rank_size if op == "ReduceScatter" else call.nbytes   # param.inputSize
        t0 = self.clock()
        try:
            self.plugin.get_coll_info(op, nbytes, call.dtype.name, entries)
        except Exception as exc:  # noqa: BLE001
            self.disabled = True
            log.warning("tuner %s: get_coll_info raised %r; plugin disabled, costs unchanged", self.name, exc)
            changes.append(f"tuner raised {exc!r}: disabled, costs unchanged")
            return
        self._slow = self._slow + 1 if self.clock() - t0 > SLOW_CALL_S else 0
        if self._slow >= SLOW_CALLS_TO_DISABLE:
            self.disabled = True
            log.warning("tuner %s: %d slow get_coll_info calls in a row; plugin disabled", self.name, self._slow)
            changes.append(f"tuner slow {self._slow} times in a row: disabled after this call")
        for row, entry in zip(costed, entries):
            cost = entry.cost
            if not isinstance(cost, (int, float)) or cost == row.cost:
                continue
            row.cost = float(cost)
            what = "disabled" if cost < 0 else "preferred (0)" if cost == 0 else f"re-priced to {cost * 1e6:.1f} us"
            changes.append(f"{row.name}: {row.model_cost * 1e6:.1f} us -> {what}")


_LOADED: dict[str, Tuner] = {}


def load_tuner(spec: str) -> Tuner | None:
    """The tuner named ``module:attr`` (``PYHCCL_TUNER_PLUGIN``'s form); None for "" or "none".

    Loaded once per process (as HCCL does): a second call with the same spec returns the same
    Tuner, so a plugin disabled for errors or slowness stays disabled. A class is instantiated
    with no arguments; any other object is used as is.

    Raises:
        ValueError: a malformed spec or a module / attribute that does not exist.
        TypeError: the object lacks ``init`` or ``get_coll_info``.
    """
    if not spec or spec.lower() == "none":
        return None
    module, sep, attr = spec.partition(":")
    if spec in _LOADED:
        return _LOADED[spec]
    if not sep or not module or not attr:
        raise ValueError(f"expecting PYHCCL_TUNER_PLUGIN as module:attr, got {spec!r}")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load tuner plugin {spec!r}: {exc}") from None
    _LOADED[spec] = Tuner(obj() if isinstance(obj, type) else obj, spec)
    return _LOADED[spec]
