"""The tuner hook: disable, prefer, re-price, nothing added, a failing or slow plugin, loading by name."""

import sys
import types

import pytest
from select_topos import KiB, MiB, topo

from pyhccl.core import settings
from pyhccl.select import Tuner, TunerEntry, load_tuner, select

T8 = "1x1x8"


class Plugin:
    """Records calls and applies ``edits`` (name -> new cost)."""

    def __init__(self, edits=None, fail=False):
        self.edits, self.fail, self.inits, self.calls = edits or {}, fail, [], []

    def init(self, comm_info):
        self.inits.append(comm_info)

    def get_coll_info(self, op, nbytes, dtype, entries):
        self.calls.append((op, nbytes, dtype, [e.alg_name for e in entries]))
        if self.fail:
            raise RuntimeError("boom")
        for e in entries:
            if e.alg_name in self.edits:
                e.cost = self.edits[e.alg_name]
        return True


def _sel(plugin, nbytes=16 * MiB, **kw):
    return select("AllReduce", topo(T8), nbytes, "fp16", mode="cost", expansion_mode="AI_CPU", algo="",
                  tuner=Tuner(plugin, "test"), **kw)


def test_no_edit_keeps_the_model_and_skips_soft_checks():
    plugin = Plugin()
    sel = _sel(plugin)
    assert sel.algorithm == "AicpuAllReduceSoleMeshTwoShot"
    info = plugin.inits[0]
    assert (info.n_ranks, info.n_npus_per_server, info.n_servers) == (8, 8, 1)
    op, nbytes, dtype, names = plugin.calls[0]
    assert (op, nbytes, dtype) == ("AllReduce", 16 * MiB, "FP16")
    # soft policies off: the strict-order group algorithm (custom check R > 8) is costed now? it is uncalibrated,
    # but its topo custom check no longer filters it
    row = next(r for r in sel.cost_table if r.name == "AicpuAllReduceStrictOrderedGroupMesh")
    assert not row.filtered.startswith("topo: topoCustomCheck")


def test_disable_prefer_reprice():
    sel = _sel(Plugin({"AicpuAllReduceSoleMeshTwoShot": -1}))
    assert sel.algorithm == "AicpuAllReduceSoleMeshChunkTwoShot"                  # next cheapest: 196 us
    assert any("AicpuAllReduceSoleMeshTwoShot" in c and "disabled" in c for c in sel.cost.tuner_changes)
    sel = _sel(Plugin({"AicpuAllReduceSoleMeshOneShot": 0}))
    assert sel.algorithm == "AicpuAllReduceSoleMeshOneShot"
    assert any("preferred (0)" in c for c in sel.cost.tuner_changes)
    sel = _sel(Plugin({"AicpuAllReduceSoleNHR": 1e-6}))
    assert sel.algorithm == "AicpuAllReduceSoleNHR"
    assert any("re-priced to 1.0 us" in c for c in sel.cost.tuner_changes)


def test_nothing_can_be_added_and_names_are_read_only():
    class Adder(Plugin):
        def get_coll_info(self, op, nbytes, dtype, entries):
            with pytest.raises(AttributeError):
                entries[0].alg_name = "AicpuAllReduceSoleNHRAicpuReduce"
            with pytest.raises(AttributeError):
                entries.append(TunerEntry("X", "", "", "", 0.0))
            with pytest.raises(AttributeError):
                entries[0].extra = 1
    assert _sel(Adder()).algorithm == "AicpuAllReduceSoleMeshTwoShot"


def test_enrich_names():
    captured = []

    class Spy(Plugin):
        def get_coll_info(self, op, nbytes, dtype, entries):
            captured.extend(entries)
    select("AllReduce", topo(T8), 1 * KiB, mode="cost", expansion_mode="AI_CPU", algo="", tuner=Tuner(Spy(), "s"))
    e = next(e for e in captured if e.alg_name == "AicpuAllReduceSoleMeshOneShot")
    assert (e.engine_name, e.executor_name, e.template_name) == ("Aicpu", "sole", "meshoneshot")


def test_failing_plugin_is_disabled_with_a_warning(caplog):
    tuner = Tuner(Plugin({"AicpuAllReduceSoleMeshOneShot": 0}, fail=True), "bad")
    sel = select("AllReduce", topo(T8), 16 * MiB, mode="cost", expansion_mode="AI_CPU", algo="", tuner=tuner)
    assert sel.algorithm == "AicpuAllReduceSoleMeshTwoShot" and tuner.disabled
    assert "plugin disabled" in caplog.text
    sel = select("AllReduce", topo(T8), 16 * MiB, mode="cost", expansion_mode="AI_CPU", algo="", tuner=tuner)
    assert any("disabled earlier" in c for c in sel.cost.tuner_changes)


def test_three_slow_calls_disable():
    ticks = iter(range(0, 10_000))
    tuner = Tuner(Plugin(), "slow", clock=lambda: next(ticks) * 0.2)   # every call "takes" 200 ms
    for i in range(3):
        assert not tuner.disabled
        select("AllReduce", topo(T8), (i + 1) * KiB, mode="cost", expansion_mode="AI_CPU", algo="", tuner=tuner)
    assert tuner.disabled


def test_load_by_name(monkeypatch):
    mod = types.ModuleType("fake_tuner_mod")
    mod.Plugin = Plugin
    monkeypatch.setitem(sys.modules, "fake_tuner_mod", mod)
    monkeypatch.setenv("PYHCCL_TUNER_PLUGIN", "fake_tuner_mod:Plugin")
    tuner = load_tuner(settings.tuner_plugin())
    assert isinstance(tuner.plugin, Plugin) and load_tuner(settings.tuner_plugin()) is tuner
    assert load_tuner("none") is None and load_tuner("") is None
    with pytest.raises(ValueError, match="expecting PYHCCL_TUNER_PLUGIN as module:attr"):
        load_tuner("fake_tuner_mod")
    with pytest.raises(ValueError, match="cannot load tuner plugin"):
        load_tuner("fake_tuner_mod:Nope")
    with pytest.raises(TypeError, match="has no callable init"):
        Tuner(object(), "x")
