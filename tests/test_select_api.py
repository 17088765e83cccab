"""select(): modes, engine cascade, expansion modes, roll-back, errors, select_for, the CLI and purity."""

import ast
import logging
import pathlib

import pytest
from select_topos import KiB, MiB, topo

import pyhccl
from pyhccl.core import settings
from pyhccl.select import SelectionError, select, select_for
from pyhccl.select.__main__ import main

T8, TWO, UBX2 = "1x1x8", "1x2x8", "1x2x8;level0=mesh+clos"


def test_cascade_from_ccu_ms():
    sel = select("AllReduce", topo(TWO), 64 * MiB, "fp16", algo="")
    assert [e for e, _ in sel.rule_steps] == ["CCU_MS", "CCU_SCHED"]
    assert (sel.algorithm, sel.engine, sel.source) == ("CcuSchedAllReduceSequenceMeshMesh", "CCU_SCHED", "rules")
    sel = select("AllReduce", topo(TWO), 1 * KiB, "int64", algo="")
    assert [e for e, _ in sel.rule_steps] == ["CCU_MS", "CCU_SCHED", "AICPU"]
    assert (sel.algorithm, sel.engine) == ("AicpuAllReduceSoleNHRAicpuReduce", "AICPU_TS")


def test_expansion_modes(monkeypatch):
    t = topo(T8)
    assert select("AllReduce", t, 1 * KiB, algo="", expansion_mode="AIV").algorithm == "AivAllReduceSoleMeshOneShot"
    sel = select("AllReduce", t, 1 * KiB, "uint64", algo="", expansion_mode="AIV")      # AIV NOT_MATCH -> AICPU
    assert [e for e, _ in sel.rule_steps] == ["AIV", "AICPU"]
    with pytest.raises(SelectionError, match="every engine answered NOT_MATCH"):
        select("AllReduce", t, 1 * KiB, "uint64", algo="", expansion_mode="AIV_ONLY", mode="rules")
    monkeypatch.setenv("PYHCCL_OP_EXPANSION_MODE", "AI_CPU")
    assert select("AllReduce", t, 1 * KiB, algo="", expansion_mode=settings.expansion_mode()).engine == "AICPU_TS"
    monkeypatch.setenv("PYHCCL_OP_EXPANSION_MODE", "CCU")
    with pytest.raises(ValueError, match="unknown expansion mode 'CCU'.*did you mean"):
        select("AllReduce", t, 1 * KiB, algo="", expansion_mode=settings.expansion_mode())


def test_910_93_defaults_to_aicpu():
    assert select("AllReduce", topo(T8), 1 * KiB, algo="", device="910_93").engine == "AICPU_TS"


def test_top_level_uboe_forces_aicpu_and_host_dpu_goes_to_dpu():
    sel = select("AllReduce", topo("1x2x8;level1=uboe"), 1 * KiB, algo="")
    assert [e for e, _ in sel.rule_steps] == ["AICPU"] and sel.algorithm == "AicpuAllReducePipeLineMeshNHR"
    sel = select("AllReduce", topo("1x2x8;dpu=true"), 1 * KiB, algo="")
    assert (sel.algorithm, sel.engine) == ("DpuAllReduceSequenceMeshNHR", "HOSTCPU")


def test_rollback_to_aiv():
    t = topo("1x1x16;level0=mesh+clos;pcie=true")
    sel = select("AllToAll", t, 1 * KiB, algo="", expansion_mode="AI_CPU")
    assert (sel.algorithm, sel.engine) == ("AivAllToAllSoleMesh", "AIV_ONLY")
    sel = select("AllReduce", t, 1 * KiB, "int64", algo="", expansion_mode="AI_CPU")
    assert sel.engine == "AIV_ONLY"
    sel = select("AllReduce", t, 1 * KiB, "int32", algo="", expansion_mode="AI_CPU")
    assert sel.engine == "AICPU_TS"


@pytest.mark.parametrize("op, dtype", [("AllToAll", "fp32"), ("AllReduce", "int64")])
def test_rollback_on_uboe_top_level_ends_at_ccu_fail(op, dtype):
    # auto_selector_base.cc Select: the roll-back sets AIV_ONLY and calls ProcessAivConfig, which
    # turns a UBoE top level into CCU_FAIL before any AIV rule; Select then returns its NOT_MATCH
    t = topo("1x2x16;level0=mesh+clos;pcie=true;level1=uboe")
    assert t.top_level_uboe and t.level0_pcie_mix and t.level0_big_clos_range
    with pytest.raises(SelectionError, match="every engine answered NOT_MATCH") as err:
        select(op, t, 1 * KiB, dtype, algo="", mode="rules")
    sel = err.value.selection
    assert (sel.algorithm, sel.engine) == ("NOT_MATCH", "CCU_FAIL")
    assert [e for e, _ in sel.rule_steps] == ["rollback"]           # no AIV rule, no AICPU rule ran
    assert "topLevelUboe -> CCU_FAIL" in sel.rule_steps[0][1].why
    assert any("rollback" in line and "CCU_FAIL" in line for line in sel.trace)
    # the same machine without UBoE on top rolls back to AIV as before
    sel = select(op, topo("1x2x16;level0=mesh+clos;pcie=true"), 1 * KiB, dtype, algo="", mode="rules")
    assert sel.engine == "AIV_ONLY" and sel.rule_steps[-1][0] == "AIV"


def test_modes():
    t = topo(UBX2)
    with pytest.raises(SelectionError, match="every engine answered NOT_MATCH") as err:
        select("AllReduce", t, 1 * MiB, mode="rules", algo="")
    assert err.value.selection.algorithm == "NOT_MATCH"
    sel = select("AllReduce", t, 1 * MiB, mode="auto", algo="")
    assert sel.source == "cost" and sel.algorithm != "NOT_MATCH" and sel.rule_steps and sel.cost_table
    assert any("cost model over the candidates" in n for n in sel.notes)
    assert select("AllReduce", topo(T8), 1 * KiB, mode="cost", algo="").source == "cost"


def test_engine_without_cascade_returns_not_match():
    sel = select("AllReduce", topo(TWO), 1 * KiB, engine="CCU_MS", cascade=False)
    assert (sel.algorithm, sel.source) == ("NOT_MATCH", "engine")
    sel = select("AllReduce", topo(TWO), 1 * KiB, engine="AICPU", algo="")
    assert sel.rule_steps[0][0] == "AICPU"


def test_rule_answer_attribute_disagreement_is_noted():
    sel = select("AllReduce", topo("1x2x8;level1=uboe"), 1 * KiB, algo="")
    assert any("attributes would reject it" in n for n in sel.notes)      # PipeLineMeshNHR is declared UBX-only


@pytest.mark.parametrize("kw, match", [
    (dict(op="allreduse"), "unknown op 'allreduse'.*did you mean allreduce"),
    (dict(nbytes=-1), "expecting nbytes as an int >= 0, got -1"),
    (dict(dtype="fp17"), "unknown dtype 'fp17'"),
    (dict(reduce_op="avg"), "unknown reduce_op 'avg'"),
    (dict(device="951"), "unknown device '951'.*did you mean 950"),
    (dict(mode="fast"), "unknown mode 'fast'"),
    (dict(engine="CCU"), "unknown engine 'CCU'.*did you mean"),
    (dict(deterministic="yes"), "unknown deterministic 'yes'"),
])
def test_argument_errors(kw, match):
    args = dict(op="AllReduce", topo_info=topo(T8), nbytes=8) | kw
    with pytest.raises(ValueError, match=match):
        select(args.pop("op"), args.pop("topo_info"), args.pop("nbytes"), algo="", **args)


def test_type_errors():
    with pytest.raises(TypeError, match="expecting topo_info as pyhccl.topo.TopoInfo"):
        select("AllReduce", "1x1x8", 8)
    with pytest.raises(TypeError, match="expecting dtype as str"):
        select("AllReduce", topo(T8), 8, 3.5)


def test_select_for_is_cached_and_follows_the_environment(monkeypatch):
    monkeypatch.delenv("PYHCCL_ALGO", raising=False)
    a = select_for("AllReduce", topo(T8), 1 * KiB, "fp32", "sum", **settings.selection())
    assert select_for("AllReduce", topo(T8), 1 * KiB, "fp32", "sum", **settings.selection()) is a
    monkeypatch.setenv("PYHCCL_ALGO", "AicpuAllReduceSoleNHR")
    assert select_for("AllReduce", topo(T8), 1 * KiB, "fp32", "sum",
                      **settings.selection()).algorithm == "AicpuAllReduceSoleNHR"


def test_trace_and_debug_log(caplog):
    caplog.set_level(logging.DEBUG, logger="pyhccl.select")
    sel = select("AllReduce", topo(UBX2), 1 * MiB, algo="")
    text = "\n".join(sel.trace)
    for part in ("topology: R=16", "rules:", "CCU_MS", "cost model:", "filtered:", "winner:", "executor"):
        assert part in text
    assert "winner:" in caplog.text


def test_cli(capsys):
    assert main(["--topo", "1x1x8", "allreduce", "--size", "64K", "--dtype", "fp16"]) == 0
    out = capsys.readouterr().out
    assert "winner: CcuMSAllReduceSoleMeshOneShot (engine CCU_MS, by rules)" in out
    assert main(["--topo", "1x1x8", "allreduce", "--size", "64K", "--mode", "cost",
                 "--expansion-mode", "AI_CPU", "--algo", ""]) == 0
    assert "AicpuAllReduceSoleMeshOneShot" in capsys.readouterr().out
    assert main(["--topo", "1x2x8;level0=mesh+clos", "allreduce", "--mode", "rules", "--algo", ""]) == 1
    assert main(["--topo", "1x1x8", "allreduse"]) == 2
    assert "unknown op" in capsys.readouterr().err


def test_cli_summarises_instance_sizes_at_scale(capsys):
    assert main(["--topo", "1x128x64", "allreduce", "--size", "1M", "--algo", ""]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("topology:"))
    assert line.endswith("layer sizes=[L0: 128 x 64; L1: 1 x 8192]") and len(line) < 160
    sel = select("AllReduce", topo("[[[0,1,2,3,4,5,6,7],[0,1,2,3,4,5,6,7],[0,1,2,3]]]"), 1 * KiB, algo="")
    assert "layer sizes=[L0: 2 x 8, 1 x 4; L1: 1 x 20]" in str(sel)
    assert sel.topo.net_layer_details.inst_size_list_of_layer == ((8, 8, 4), (20,))     # the data stays complete


def test_pure_modules_do_not_import_mpi4py():
    root = pathlib.Path(pyhccl.__file__).parent
    for path in list((root / "algo").rglob("*.py")) + list((root / "select").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(m.startswith("mpi4py") for m in mods), path
