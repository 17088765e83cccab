"""pyhccl.verify: verify() on ops and machines, its statuses and argument errors, and the CLI."""

import time
from dataclasses import replace

import numpy as np
import pytest

import pyhccl.verify.api as api
from pyhccl.plan import Step
from pyhccl.plan.api import NotRunnableError
from pyhccl.verify import STATUSES, default_counts, main, parse_ranks, verify
from pyhccl.verify.cases import LARGE_COUNT, calls, uneven_counts


def test_parse_ranks_and_counts():
    assert parse_ranks("1-4") == [1, 2, 3, 4]
    assert parse_ranks("1,2,8-10") == [1, 2, 8, 9, 10]
    assert parse_ranks("none") == []
    for bad in ("0-3", "5-2", "x"):
        with pytest.raises(ValueError, match="expecting"):
            parse_ranks(bad)
    assert default_counts(8) == [0, 1, 7, 8, 9, 7919, LARGE_COUNT]
    assert uneven_counts(6, "x") == uneven_counts(6, "x") != uneven_counts(6, "y")   # deterministic


@pytest.mark.parametrize("op, topo, kw", [
    ("AllReduce", "1x2x4", {}),                                     # HCCL's selection, two levels
    ("AllReduce", "2x2x2", {"count": LARGE_COUNT}),                 # three levels, ten billion elements
    ("AllGather", "[[[0,1,2,3],[0,1]]]", {"algo": "Ring"}),         # asymmetric, a pyhccl template
    ("ReduceScatter", "1x1x5", {"algo": "AicpuReduceScatterSoleNHR", "count": 7}),
    ("Broadcast", "1x2x4", {"root": 7, "count": 9}),
    ("Reduce", "1x1x6", {"algo": "Ring", "root": 3, "in_place": True}),
    ("gather", "1x1x5", {"algo": "NHR", "root": 2, "count": 3}),
    ("Scatter", "1x1x4", {"count": 5, "dtype": "HIF8"}),
    ("AllToAll", "1x1x3", {"count": 4}),
    ("AllToAllV", "1x1x3", {"send_count_matrix": [[1, 0, 2], [3, 4, 0], [0, 5, 6]]}),
    ("AllGatherV", "1x1x4", {"counts": [3, 1, 5, 2], "displs": [9, 0, 1, 6]}),
    ("ReduceScatterV", "1x1x3", {}),                                 # uneven default counts
    ("Barrier", [[[0, 1, 2]]], {}),                                  # TopoMeta lists
])
def test_verify_ok(op, topo, kw):
    res = verify(op, topo, **kw)
    assert res.ok and res.status == "ok", res.error
    assert res.algorithm and res.rounds is not None and res.bytes is not None and res.seconds >= 0
    assert res.selected == ("algo" not in kw)


def test_verify_reports_bytes_in_the_dtype_size():
    fp32 = verify("AllReduce", "1x1x4", algo="NHR", count=1000)
    fp8 = verify("AllReduce", "1x1x4", algo="NHR", count=1000, dtype="FP8E4M3")
    assert fp32.bytes == 4 * fp8.bytes > 0 and fp32.rounds == fp8.rounds


def test_not_eligible_is_not_a_failure():
    res = verify("AllReduce", "2x2x2", algo="CcuSchedAllReduceSoleMesh")
    assert res.status == "not-eligible" and not res.ok
    assert "topoLevelNums 3 > maxTopoLevelNum 2" in res.error
    res = verify("AllReduce", "1x1x4", algo="CcuMSAllReduceSoleMesh", in_place=True)
    assert res.status == "not-eligible" and "in-place" in res.error
    res = verify("Gather", "1x1x4")
    assert res.status == "not-eligible" and "HCCL has no Gather algorithms to select" in res.error


def test_broadcast_and_reduce_scatter_v_are_checked_as_the_communicator_selects_them():
    # pyhccl's Call marks Broadcast in place (one buffer), but HCCL's in-place flag does not apply to it:
    # the CCU names (no in-place support) were all "not-eligible" here while the Communicator ran them
    res = verify("Broadcast", "1x1x4", algo="CcuSchedBroadcastSoleMesh", count=9, root=2)
    assert res.ok, res.error
    # ReduceScatterV's data size is the total (12 + 12 + 12 + 4 MiB >= 32 MiB), not the largest count
    res = verify("ReduceScatterV", "1x1x4", counts=[3 << 20] * 3 + [1 << 20])
    assert res.ok and res.algorithm == "AicpuReduceScatterVSoleMesh", (res.algorithm, res.error)


def test_not_runnable_and_failed(monkeypatch):
    real = api.build_plan

    def not_runnable(call, algo, rank, machine=None):
        raise NotRunnableError(f"algorithm {algo!r} does not run in pyhccl yet")

    monkeypatch.setattr(api, "build_plan", not_runnable)
    res = verify("AllReduce", "1x1x4", algo="AicpuAllReduceSoleNHR")
    assert res.status == "not-runnable" and "does not run in pyhccl yet" in res.error

    monkeypatch.setattr(api, "build_plan", losing_a_local_op(real, rank=1, step=2))
    res = verify("AllReduce", "1x1x8", algo="NHR", count=100)
    assert res.status == "failed" and "rank" in res.error and "ERROR HERE" in res.error
    assert set(STATUSES) == {"ok", "failed", "not-eligible", "not-runnable"}


def losing_a_local_op(build, rank, step):
    """``build`` (build_plan's signature) whose plan of ``rank`` loses its last local op of ``step``."""
    def broken(call, algo, r, machine=None):
        p = build(call, algo, r, machine)
        if r == rank:
            steps = list(p.steps)
            steps[step] = Step(steps[step].transfers, steps[step].local[:-1])
            p = replace(p, steps=tuple(steps))
        return p
    return broken


def test_timeout_counts_as_failed(monkeypatch):
    monkeypatch.setattr(api, "simulate", lambda plans, call, **kw: time.sleep(5))
    res = verify("AllReduce", "1x1x2", algo="NHR", timeout=0.2)
    assert res.status == "failed" and "no result in 0.2 s" in res.error and res.seconds < 4


def test_equal_plan_sets_are_simulated_once_and_faults_never_reuse_a_pass(monkeypatch):
    real, ran = api.simulate, []

    def counting(plans, call, **kw):
        ran.append(plans[0].info("algo"))
        return real(plans, call, **kw)

    monkeypatch.setattr(api, "simulate", counting)
    monkeypatch.setattr(api, "_PASSED", {})
    a = verify("AllReduce", "1x1x7", count=1000, algo="MeshChunkTwoShot")
    b = verify("AllReduce", "1x1x7", count=1000, algo="AicpuAllReduceSoleMeshChunkTwoShot")   # the same plans
    c = verify("AllReduce", "1x1x7", count=1000, algo="MeshChunkTwoShot", in_place=True)      # another call
    assert a.ok and b.ok and c.ok and (a.rounds, a.bytes) == (b.rounds, b.bytes)
    assert ran == ["MeshChunkTwoShot", "MeshChunkTwoShot"]
    monkeypatch.setattr(api, "build_plan", losing_a_local_op(api.build_plan, rank=3, step=1))   # but for one reduce
    d = verify("AllReduce", "1x1x7", count=1000, algo="AicpuAllReduceSoleMeshChunkTwoShot")
    assert d.status == "failed" and "ERROR HERE" in d.error and len(ran) == 3


def test_verify_leaves_the_cycle_collector_as_it_found_it():
    """Enabled stays enabled, disabled stays disabled, and what the caller froze stays frozen (verify moves
    what it built past the young generations with freeze/unfreeze only when nothing else is frozen)."""
    import gc
    was = gc.isenabled()
    try:
        gc.disable()
        assert verify("AllReduce", "1x1x5", count=13, algo="Ring").ok and not gc.isenabled()
        gc.enable()
        assert verify("AllReduce", "1x1x5", count=14, algo="Ring").ok and gc.isenabled()
        held = [[i] for i in range(100)]
        gc.freeze()
        assert verify("AllReduce", "1x1x5", count=15, algo="Ring").ok and gc.get_freeze_count()
        assert not any(o is held[0] for o in gc.get_objects(generation=2))     # still frozen, not unfrozen
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("kw, err, match", [
    ({"op": "AllReduc"}, ValueError, "unknown collective 'AllReduc'"),
    ({"algo": "NHRR"}, ValueError, "did you mean NHR"),
    ({"root": 1}, ValueError, "expecting root only for a rooted op"),
    ({"counts": [1, 2]}, ValueError, "expecting counts/displs only for AllGatherV"),
    ({"topo": "1x2"}, ValueError, "expecting PxSxD"),
    ({"dtype": "FP33"}, ValueError, "unknown dtype 'FP33'"),
    ({"op": "Broadcast", "root": 9}, ValueError, r"expecting root in range\(4\)"),
    ({"count": "10"}, TypeError, "expecting count as an int, got str"),
    ({"count": 10.5}, TypeError, "expecting count as an int, got float"),
    ({"count": True}, TypeError, "expecting count as an int, got bool"),
    ({"op": "Reduce", "root": 1.0}, TypeError, "expecting root as an int, got float"),
    ({"in_place": "yes"}, TypeError, "expecting in_place as a bool, got str"),
])
def test_argument_errors_raise(kw, err, match):
    args = {"op": "AllReduce", "topo": "1x1x4", **kw}
    with pytest.raises(err, match=match):
        verify(args.pop("op"), args.pop("topo"), **args)


def test_numpy_ints_and_bools_are_taken():
    assert verify("AllReduce", "1x1x4", count=np.int64(10), in_place=np.True_, algo="NHR").status == "ok"


def test_sweep_calls_cover_roots_in_place_and_uneven_counts():
    cs = calls("reduce", 5)
    assert {c.root for c in cs} == {0, 2, 4} and {c.in_place for c in cs} == {False, True}
    assert {c.count for c in cs} == set(default_counts(5))
    v = calls("all_gather_v", 5)
    assert any(LARGE_COUNT in c.counts for c in v) and any(0 in c.counts for c in v)
    assert any(c.displs != tuple(sorted(c.displs)) for c in v)                # blocks out of rank order
    assert len(calls("barrier", 3)) == 1
    assert all(not c.in_place for c in calls("alltoall", 3))


def test_cli_single_op_prints_one_line_per_rank_count(capsys):
    assert main(["allreduce", "--algo", "NHR", "--ranks", "1-6", "-j", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("allreduce NHR")]
    assert len(lines) == 6 and all(": ok" in line for line in lines)
    assert "rounds=6" in lines[4]                       # N = 5


def test_cli_single_op_with_hccl_names_and_topo(capsys):
    assert main(["reduce_scatter", "--algo", "Mesh,AicpuReduceScatterSoleNHR", "--ranks", "3",
                 "--count", "5", "-j", "1"]) == 0
    assert main(["AllReduce", "--algo", "AicpuAllReduceSoleNHR", "--ranks", "none", "--topo", "1x2x2",
                 "--in-place", "-j", "1"]) == 0
    out = capsys.readouterr().out
    assert "reduce_scatter Mesh n=3: ok  calls=2" in out and "reduce_scatter AicpuReduceScatterSoleNHR n=3: ok" in out
    assert "allreduce AicpuAllReduceSoleNHR 1x2x2: ok" in out


def test_cli_all_prints_the_summary_table(capsys):
    assert main(["all", "--ranks", "2-3", "--topo", "1x2x2", "--op", "allreduce,Broadcast,alltoallv",
                 "--algo", "NHR,Mesh,auto", "-j", "2"]) == 0
    out = capsys.readouterr().out
    head = out.splitlines()[0].split()
    assert head == ["op", "algorithm", "topologies", "ranks", "calls", "result", "time"]
    rows = {tuple(line.split()[:2]) for line in out.splitlines()[1:] if line and not line.startswith("#")}
    assert {("allreduce", "NHR"), ("broadcast", "NHR"), ("alltoallv", "Mesh"), ("allreduce", "auto")} <= rows
    assert "1x1xN 1x2x2" in out and "2-4" in out and "# all" in out and "passed" in out


def test_cli_all_lists_not_runnable_names_and_fails_on_a_failure(monkeypatch, capsys):
    real = api.build_plan

    def patched(call, algo, rank, machine=None):
        if algo == "Ring":
            raise NotRunnableError("algorithm 'Ring' needs a working ring today")
        p = real(call, algo, rank, machine)
        if algo == "NHR" and rank == 1 and len(p.steps) > 2:
            steps = list(p.steps)
            steps[2] = Step(steps[2].transfers, steps[2].local[:-1])
            p = replace(p, steps=tuple(steps))
        return p

    monkeypatch.setattr(api, "build_plan", patched)
    assert main(["all", "--ranks", "4", "--topo", "none", "--op", "allreduce", "--algo", "templates",
                 "-j", "1"]) == 1
    out = capsys.readouterr().out
    assert "# not runnable (1 algorithms)" in out and "needs a working ring today" in out
    assert "# FAIL allreduce NHR: 4 of 14 calls failed, on 1x1xN (N=4)" in out
    assert "first: NHR on 1x1x4 (4 ranks), count=" in out and "ERROR HERE" in out and "# FAILED: 4 of" in out


@pytest.mark.parametrize("argv, match", [
    (["allreduc"], "unknown collective"),
    (["allreduce", "--algo", "NHRR"], "did you mean NHR"),
    (["allreduce", "--ranks", "0"], "expecting rank counts >= 1"),
    (["alltoall", "--in-place"], "has no in-place form"),
    (["allreduce", "--op", "allgather"], "--op applies to all"),
    (["all", "--topo", "1x2"], "expecting"),
    (["allreduce", "--dtype", "FP99"], "--dtype: unknown dtype 'FP99'"),     # checked here, not in a worker
    (["allreduce", "--expansion-mode", "AICPU"], "invalid choice: 'AICPU'"),
])
def test_usage_errors(argv, match, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and match in capsys.readouterr().err


def test_a_bad_expansion_mode_in_the_environment_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setenv("PYHCCL_OP_EXPANSION_MODE", "AICPU")
    with pytest.raises(SystemExit) as e:
        main(["allreduce", "--ranks", "2"])
    assert e.value.code == 2 and "expecting PYHCCL_OP_EXPANSION_MODE one of" in capsys.readouterr().err
