"""pyhccl.verify.memory: a call too large for the memory available fails with a clear reason, not the OOM killer."""

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pyhccl.verify.api as api
import pyhccl.verify.memory as memory
from pyhccl.plan.api import build_plan
from pyhccl.verify import MemoryBudgetError, machine, make_call, verify
from pyhccl.verify.atoms import Moves
from pyhccl.verify.sim import simulate

_GIB = 2**30


def test_a_tiny_budget_fails_with_the_reason_and_the_fix(monkeypatch):
    monkeypatch.setattr(api, "_PASSED", {})             # not the report of an equal plan set simulated before
    monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", "0.001")     # 1 MiB: less than this process holds
    r = verify("AllGather", "1x1x384", algo="Ring", count=8)       # 294 528 actions: about 100 MiB to flatten
    assert r.status == "failed" and r.algorithm == "Ring"
    first = r.error.splitlines()[0]         # (refused 4 ranks into building: the rows alone are past the budget)
    assert first.startswith("building and simulating all_gather over 384 ranks (count 8) (the first 4 ranks' plans "
                            "hold 767 actions each, the median; the simulator's rows of every rank's, about ")
    assert "B allowed by PYHCCL_VERIFY_MEMORY: use a smaller count (--count) or fewer ranks" in first
    assert "Traceback" not in r.error
    m = machine("1x1x384")
    call = make_call("AllGather", 384, count=8)
    plans = [build_plan(call, "Ring", rank, m) for rank in range(384)]
    with pytest.raises(MemoryBudgetError, match="PYHCCL_VERIFY_MEMORY=<GiB>") as e:
        simulate(plans, call)
    assert isinstance(e.value, MemoryError) and e.value.need > e.value.budget
    monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", "0")      # 0: no check
    assert simulate(plans, call).nranks == 384


def test_the_guard_stays_quiet_on_ordinary_runs(monkeypatch):
    monkeypatch.delenv("PYHCCL_VERIFY_MEMORY", raising=False)
    for op, topo in (("AllReduce", "1x2x4"), ("AllGather", "1x1x64"), ("AllToAll", "2x2x2")):
        assert verify(op, topo, count=1000).ok
    monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", repr(memory.resident() / _GIB + 2))
    assert verify("ReduceScatter", "1x1x64", count=10_000_000_019).ok


def test_building_the_plans_stops_early_when_they_would_not_fit(monkeypatch):
    monkeypatch.setattr(memory, "BUILD_CHECK_RANKS", 4)
    monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", "0.001")
    r = verify("AllReduce", "1x1x16", algo="Ring", count=8)
    assert r.status == "failed"
    assert r.error.startswith("building and simulating allreduce over 16 ranks (count 8) (the plans of 8 ranks hold ")


def test_a_refused_call_leaves_no_plans_behind(monkeypatch):
    from pyhccl.plan.api import _build
    monkeypatch.delenv("PYHCCL_VERIFY_MEMORY", raising=False)
    assert verify("AllReduce", "1x1x16", algo="NHR", count=8).ok and _build.cache_info().currsize and api._PASSED
    monkeypatch.setattr(memory, "BUILD_CHECK_RANKS", 4)
    monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", "0.001")
    assert verify("AllReduce", "1x1x16", algo="Ring", count=8).status == "failed"
    assert _build.cache_info().currsize == 0 and not api._PASSED      # the next call does not start on top of them


def test_the_build_projection(monkeypatch):
    # 1 GiB after 1024 ranks, 2 GiB after 2048: 1 MiB a rank, 126 GiB for the 129 024 ranks left
    held = iter([1 * _GIB, 2 * _GIB])
    monkeypatch.setattr(memory, "resident", lambda: next(held))
    monkeypatch.setattr(memory, "budget", lambda: (130 * _GIB, "available"))
    empty = SimpleNamespace(steps=())
    guard = memory.BuildGuard("building and simulating allreduce over 131072 ranks", 131072)
    for ranks in range(1, 2049):
        guard.built(ranks, empty)            # one look at 1024 (no rate yet), 128 GiB at 2048: fits in 130
    # with 16 actions a rank, the simulator's rows would take 131072 x 16 x BYTES_PER_ACTION (under 1 GiB) more
    need = 128 + 131072 * 16 * memory.BYTES_PER_ACTION / _GIB
    acts = SimpleNamespace(steps=[SimpleNamespace(transfers=(None,) * 12, local=(None,) * 4)])
    guard = memory.BuildGuard("building and simulating allreduce over 131072 ranks", 131072)
    held = iter([1 * _GIB, 2 * _GIB])
    monkeypatch.setattr(memory, "budget", lambda: (128.5 * _GIB, "available"))
    for ranks in range(1, 2048):
        guard.built(ranks, acts)
    with pytest.raises(MemoryBudgetError, match=rf"^building .* needs about {need:.1f} GiB of memory, 128\.5 GiB"):
        guard.built(2048, acts)


def _plan(actions: int):
    return SimpleNamespace(steps=[SimpleNamespace(transfers=(None,) * actions, local=())])


def test_the_first_ranks_plans_are_looked_at_before_the_first_look(monkeypatch):
    # a Mesh AllReduce over 131 072 ranks builds 393 214 actions a rank in half a second: refused 4 ranks in, not
    # after the 1024 ranks (minutes) of the first look
    monkeypatch.setattr(memory, "budget", lambda: (20 * _GIB, "available"))
    monkeypatch.setattr(memory, "resident", lambda: pytest.fail("the early look reads no /proc"))
    guard = memory.BuildGuard("building and simulating allreduce over 131072 ranks", 131072)
    for ranks in range(1, 4):
        guard.built(ranks, _plan(393_214))
    with pytest.raises(MemoryBudgetError, match=r"\(the first 4 ranks' plans hold 393214 actions each, the median; "
                                                r"the simulator's rows of every rank's, about 18431\.9 GiB\) needs "
                                                r"about 18431\.9 GiB of memory, 20\.0 GiB available"):
        guard.built(4, _plan(393_214))
    # a root's many actions are not taken for every rank's: rank 0 receives from all, the others send once
    guard = memory.BuildGuard("building and simulating gather over 131072 ranks", 131072)
    for ranks in range(1, 1024):
        guard.built(ranks, _plan(131_071 if ranks == 1 else 1))
    # every rank alike, the rows just past the budget: refused at the first power of two they are seen
    need = 20 * _GIB // (131072 * memory.BYTES_PER_ACTION) + 1
    guard = memory.BuildGuard("building and simulating allreduce over 131072 ranks", 131072)
    for ranks in range(1, 4):
        guard.built(ranks, _plan(need))
    with pytest.raises(MemoryBudgetError, match=r"the first 4 ranks' plans hold \d+ actions each"):
        guard.built(4, _plan(need))


def test_a_builder_out_of_memory_is_a_failure_with_its_reason(monkeypatch):
    def short(*_):
        raise MemoryError("Unable to allocate 128. GiB for an array with shape (131072, 131071)")
    monkeypatch.setattr(api, "build_plan", short)
    r = verify("AllReduce", "1x1x16", algo="Ring", count=8)
    assert r.status == "failed" and "Traceback" not in r.error
    assert r.error == ("building and simulating allreduce over 16 ranks (count 8): building rank 0's plan ran out of "
                       "memory (Unable to allocate 128. GiB for an array with shape (131072, 131071)): use fewer "
                       "ranks or another algorithm")


def test_alltoallv_matrices_too_large_are_refused_before_they_are_made(monkeypatch, capsys):
    from pyhccl.verify.cli import main
    monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", "0.1")       # 2048 x 2048 entries at 120 bytes: 480 MiB
    r = verify("AllToAllV", "1x1x2048")
    assert r.status == "failed" and r.call is None
    # (the need counts what the process holds too)
    assert re.match(r"making alltoallv's send-count matrix of 2048 x 2048 needs about \d+ MiB of memory, 102 MiB "
                    r"allowed by PYHCCL_VERIFY_MEMORY", r.error)
    assert main(["alltoallv", "--ranks", "2048", "--topo", "none", "--algo", "Pairwise", "-j", "1"]) == 1
    out = capsys.readouterr().out       # the sweep's four matrices (three counts and an uneven one), one failure
    assert "# FAIL alltoallv Pairwise: 1 of 1 calls failed, on 1x1xN (N=2048)" in out
    assert re.search(r"first: Pairwise on 1x1x2048 \(2048 ranks\), no call made\nmaking alltoallv's 4 send-count "
                     r"matrices of 2048 x 2048 needs about \d\.\d GiB of memory", out)


def test_a_step_that_would_outgrow_the_budget(monkeypatch):
    keys = np.arange(1 << 22, dtype=np.int64)           # 4 M atoms of one key each
    one = np.ones(1, np.int64)
    whole = Moves(np.zeros(1, np.int64), one << 22, one, 0 * one)      # one move over all of them
    few = Moves(np.zeros(1, np.int64), one << 10, one, 0 * one)        # 1024 atoms: below the step threshold
    monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", "0.001")
    memory.require_moves("a step", keys, few, few)
    # (the need counts the process's resident memory: after a long test session it reads in GiB)
    need = r"^a step needs about (\d+ MiB|\d+\.\d GiB) of memory, 1 MiB allowed by "
    with pytest.raises(MemoryBudgetError, match=need):
        memory.require_moves("a step", keys, whole, whole)
    monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", "64")
    memory.require_moves("a step", keys, whole, whole)


def test_bad_budget_names_the_variable(monkeypatch):
    for bad in ("lots", "-1", "nan"):
        monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", bad)
        with pytest.raises(ValueError, match="expecting PYHCCL_VERIFY_MEMORY to be a number of GiB >= 0"):
            verify("AllReduce", "1x1x4", count=8)


def test_the_scale_benchmark_prints_the_reason(monkeypatch, capsys):
    path = Path(__file__).parents[1] / "benchmarks" / "verify_scale.py"
    spec = importlib.util.spec_from_file_location("verify_scale", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv("PYHCCL_VERIFY_MEMORY", "0.01")       # its child process: 10 MiB
    bench.show("AllGather 1x1x384", "-", bench.run_case({"op": "AllGather", "topo": "1x1x384", "count": 8,
                                                         "algo": "Ring"}, 60))
    line = capsys.readouterr().out
    assert " failed (peak " in line
    assert "GiB): building and simulating all_gather over 384 ranks (count 8) (the first 4 ranks' plans hold " in line
    assert "MiB allowed by PYHCCL_VERIFY_MEMORY: use a smaller count (--count) or fewer ranks" in line
