"""The machine profile as data (pyhccl.tune.auto): prices from measured points, the cache file, its errors."""

import json
import re

import pytest

from pyhccl.algo.predicates import op_call
from pyhccl.topo.calc import calc_topo_info
from pyhccl.tune.auto import AutoProfile, Candidate, ProfileError, load_profile, profile_key, profile_path, \
    save_profile

ONE = Candidate("AllReduce", "MeshOneShot@shm", 1 << 20, ((1024, 2e-6), (65536, 8e-6), (1 << 20, 4e-4)))
TWO = Candidate("AllReduce", "MeshTwoShot@shm", 0, ((1024, 5e-6), (65536, 1e-5), (1 << 20, 2e-4)))
AG = Candidate("AllGather", "Mesh@shm")
PROF = AutoProfile("k", "test layout", (ONE, TWO, AG), 0.5)


def topo():
    return calc_topo_info("1x1x4")


def test_prices_measured_interpolated_held_and_scaled():
    assert ONE.price(1024) == (2e-6, "measured at 1 KiB")
    t, how = ONE.price(8192)                     # log-log between 1 KiB and 64 KiB
    assert 2e-6 < t < 8e-6 and how == "interpolated 1 KiB-64 KiB"
    assert ONE.price(8) == (2e-6, "measured at 1 KiB (the smallest size measured)")
    t, how = TWO.price(4 << 20)
    assert t == pytest.approx(8e-4) and how == "scaled from 1 MiB by size"
    assert AG.price(100) is None


@pytest.mark.parametrize("nbytes, winner", [(8, "MeshOneShot@shm"), (65536, "MeshOneShot@shm"),
                                            (1 << 20, "MeshTwoShot@shm"), (16 << 20, "MeshTwoShot@shm")])
def test_the_cheapest_candidate_that_takes_the_size_wins(nbytes, winner):
    res, source = PROF.costs("AllReduce", topo(), op_call("AllReduce", nbytes))
    assert res.winner.name == winner
    if nbytes > 1 << 20:
        assert next(r for r in res.rows if r.name == "MeshOneShot@shm").filtered == "runs calls of up to 1 MiB"


def test_a_lone_candidate_wins_unpriced_and_an_op_without_one_runs_native():
    res, source = PROF.costs("AllGather", topo(), op_call("AllGather", 1 << 20))
    assert res.winner.name == "Mesh@shm" and "only fast path" in source["Mesh@shm"]
    assert {"AllReduce", "AllGather", "AllToAllV", "AllGatherV", "Scatter", "Barrier"} <= PROF.ops()
    res, source = PROF.costs("AllToAllV", topo(), op_call("AllToAllV", 1024))
    assert res.winner.name == "NativeMPI" and "no fast path for AllToAllV on one node" in source["NativeMPI"]
    assert "no AllToAllV fast path: the wrapped MPI's own collective" in PROF.describe("AllToAllV")[0]
    assert "machine profile: (in memory) (test layout; 2 AllReduce fast paths, 6 measured points" \
        in PROF.describe("AllReduce")[0]


def test_the_cache_file_round_trips_and_is_keyed(tmp_path):
    key = profile_key("host, MPICH 5, 4 ranks, 2 cores")
    assert key != profile_key("host, MPICH 5, 8 ranks, 2 cores")
    path = profile_path(str(tmp_path), key)
    prof = AutoProfile(key, "layout", (ONE, TWO, AG), 0.5, one_shot=(("AllGather", 131072),))
    saved = save_profile(prof, path)
    assert saved.one_shot_max("AllGather") == 131072 and saved.one_shot_max("AllReduce") is None
    assert saved.path == path and saved == load_profile(path, key)
    assert load_profile(path, "another key") is None              # measured for another layout
    assert load_profile(str(tmp_path / "none.json"), key) is None


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(schema="other"), "schema/version"),
    (lambda d: d["candidates"][0].update(points=[[1024, -1.0]]), "not positive"),
    (lambda d: d["candidates"][0].pop("name"), "KeyError"),
    (lambda d: d.update(one_shot={"AllGather": -1}), "negative"),
    (lambda d: d.update(one_shot=[1]), "AttributeError"),
])
def test_a_malformed_cache_file_names_the_fix(tmp_path, edit, match):
    path = profile_path(str(tmp_path), "k")
    save_profile(PROF, path)
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    edit(data)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    with pytest.raises(ProfileError, match=match) as e:
        load_profile(path, "k")
    assert "python -m pyhccl.tune --refresh" in str(e.value)


def test_an_unreadable_cache_file(tmp_path):
    path = tmp_path / "p.json"
    path.write_text("{not json")
    with pytest.raises(ProfileError, match="not a readable machine profile"):
        load_profile(str(path), "k")


def test_the_cli_measures_caches_and_prints_the_picks(tmp_path, monkeypatch, capsys):
    from mpi4py import MPI

    from pyhccl.tune.__main__ import main
    monkeypatch.setenv("PYHCCL_CACHE_DIR", str(tmp_path))
    assert main([], MPI.COMM_SELF) == 0
    out = capsys.readouterr().out
    assert f"machine profile {tmp_path}" in out and "1 ranks, topology" in out
    # the picks are measured (at 1 rank every candidate is a local copy: any may win a size)
    assert re.search(r"AllReduce +8: (MeshOneShot|MeshTwoShot|Ring)@shm, .*128M: (MeshTwoShot|Ring)@shm", out), out
    files = list((tmp_path / "profiles").iterdir())
    assert len(files) == 1
    stamp = files[0].stat().st_mtime_ns
    assert main([], MPI.COMM_SELF) == 0                      # cached: read, not measured
    assert files[0].stat().st_mtime_ns == stamp
    assert main(["--refresh"], MPI.COMM_SELF) == 0
    assert files[0].stat().st_mtime_ns != stamp


@pytest.mark.parametrize("wins, cap", [
    ([True, True, True, True], 1 << 20),            # the slots win at every size: they take all they can
    ([True, False, False, False], 131072),          # half-way (geometrically) from 64 KiB to 256 KiB
    ([True, True, False, False], 370688),           # from 256 KiB to 512 KiB
    ([True, True, True, False], 741440),
    ([False, True, True, True], 32768),             # lost at the first size: half-way from 16 KiB
])
def test_the_one_shot_crossover_from_the_measured_wins(wins, cap):
    from pyhccl.comm.probe import ONE_SHOT_SIZES, _crossover
    assert ONE_SHOT_SIZES == (65536, 262144, 524288, 1 << 20)
    assert _crossover(wins) == cap


def test_the_explanation_names_a_measured_one_shot_crossover():
    prof = AutoProfile("k", "layout", (ONE, TWO), 0.5, one_shot=(("AllReduce", 131072),))
    assert prof.describe("AllReduce")[1] == ("  one-step Mesh on shared slots for inputs up to 128 KiB, above: "
                                             "peers' arrays read in place (measured)")
    assert len(PROF.describe("AllReduce")) == 1


def test_a_later_fast_path_must_measure_clearly_faster():
    """The second candidate that runs a size is priced x 1.15: 10 % faster is noise, 20 % faster wins."""
    first = Candidate("Broadcast", "Mesh@shm", 0, ((1 << 20, 1.0e-4),))
    for later, winner in ((0.9e-4, "Mesh@shm"), (0.8e-4, "MeshTwoShot@shm")):
        prof = AutoProfile("k", "layout", (first, Candidate("Broadcast", "MeshTwoShot@shm", 0, ((1 << 20, later),))))
        res, source = prof.costs("Broadcast", topo(), op_call("Broadcast", 1 << 20))
        assert res.winner.name == winner
        two = next(r for r in res.rows if r.name == "MeshTwoShot@shm")
        assert two.body == later and two.cost == pytest.approx(later * 1.15)
        assert source["MeshTwoShot@shm"] == ("measured at 1 MiB, x 1.15 (listed after 1 that run the size: it must "
                                             "measure 15% faster)")
        assert source["Mesh@shm"] == "measured at 1 MiB"


def test_a_disturbed_op_is_timed_again_and_keeps_each_points_faster(monkeypatch, caplog):
    import logging

    from mpi4py import MPI

    import pyhccl
    import pyhccl.comm.probe as probe
    assert probe._disturbed([(1024, 9e-4), (8192, 1e-4)]) and not probe._disturbed([(1024, 2e-6), (8192, 1.1e-6)])
    pc = pyhccl.Communicator(MPI.COMM_SELF, profile="hccl")
    spoilt = [(1024, 2e-4), (8192, 9e-4), (65536, 1e-4)]             # a slow spell under 8 KiB
    clean = [(1024, 2e-6), (8192, 4e-6), (65536, 1.2e-4)]
    calls = []

    def points(pcomm, planner, op, paths):
        calls.append(op)
        first = calls.count(op) == 1
        return {name: list(spoilt if first and op == "AllReduce" else clean) for name, _ in paths}

    monkeypatch.setattr(probe, "_points", points)
    monkeypatch.setattr(probe, "one_shot_caps", lambda pcomm, planner: ())
    prof = probe.measure(pc.dispatcher.pcomm, pc.dispatcher.planner, "k", "layout")
    assert calls.count("AllReduce") == 2 and all(calls.count(op) == 1 for op in set(calls) - {"AllReduce"})
    ar = [c for c in prof.candidates if c.op == "AllReduce"]
    assert all(c.points == ((1024, 2e-6), (8192, 4e-6), (65536, 1e-4)) for c in ar)
    calls.clear()
    monkeypatch.setattr(probe, "_points", lambda pcomm, planner, op, paths: {n: list(spoilt) for n, _ in paths})
    with caplog.at_level(logging.WARNING, logger="pyhccl"):
        probe.measure(pc.dispatcher.pcomm, pc.dispatcher.planner, "k", "layout")
    assert "python -m pyhccl.tune --refresh" in caplog.text
    pc.release()
