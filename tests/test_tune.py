"""Tuning files: schema checks, features, the fit, interpolation, the measured profile in selection."""

import json
import math

import numpy as np
import pytest

from pyhccl.bench.driver import Row, parse_args
from pyhccl.bench.tuning import _label, plot, regret, regret_lines, tuning_from_rows
from pyhccl.core import settings
from pyhccl.select import select, select_for
from pyhccl.select.tuner import Tuner
from pyhccl.topo import Topology, calc_topo_info, parse_topo
from pyhccl.tune import NATIVE, Point, Tuning, TuningError, load_tuning
from pyhccl.tune.features import FEATURES, features
from pyhccl.tune.fit import fit_op, nnls, predict
from pyhccl.tune.profile import MeasuredTuner, measured_profile

UB = 512 * 1024
ALGOS = ("NHR", "Ring", "MeshOneShot", "AicpuAllReduceParallelMeshNHR", "AicpuAllReduceSoleNHR")
SIZES = (8, 512, 32768, 2 << 20, 64 << 20)
#: latency per step L0, L1; per byte moved L0, L1; per byte reduced L0; launch per task; per call
TRUE = dict(steps_L0=20e-6, steps_L1=30e-6, moved_L0=1e-9, moved_L1=2e-9, reduced_L0=0.5e-9, tasks=3e-6, calls=50e-6)


def synthetic(topo="1x2x4", algos=ALGOS, native=((8, 20.0), (512, 25.0))):
    """Points whose times follow TRUE exactly, plus native MPI points."""
    c = np.array([TRUE.get(f, 0.0) for f in FEATURES])
    pts = [Point("AllReduce", a, nb, float(features("AllReduce", a, topo, nb, 4, UB) @ c) * 1e6)
           for a in algos for nb in SIZES]
    pts += [Point("AllReduce", NATIVE, nb, t) for nb, t in native]
    return pts


def tuning(topo="1x2x4", nranks=8, **kw):
    pts = synthetic(topo, **kw)
    fit = fit_op("AllReduce", pts, topo, UB)
    return Tuning(topo, nranks, UB, tuple(pts), {"AllReduce": fit})


# -- the file -------------------------------------------------------------------------------------
def test_round_trip(tmp_path):
    t = tuning()
    t.save(tmp_path / "t.json")
    back = load_tuning(tmp_path / "t.json")
    assert back.points == t.points and back.fits == t.fits and back.topo == "1x2x4" and back.nranks == 8
    assert json.loads((tmp_path / "t.json").read_text())["schema"] == "pyhccl-tuning"


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(schema="x"), "'schema'"),
    (lambda d: d.update(version=99), "'version'"),
    (lambda d: d.pop("topology"), "'topology'"),
    (lambda d: d["topology"].update(nranks=0), "'topology.nranks'"),
    (lambda d: d["points"][3].update(time_us=-1), "'points[3].time_us'"),
    (lambda d: d["points"][0].update(op="Nope"), "'points[0].op'"),
    (lambda d: d["points"][1].update(nbytes="8"), "'points[1].nbytes'"),
    (lambda d: d["points"][2].pop("algorithm"), "'points[2].algorithm'"),
    (lambda d: d["fits"]["AllReduce"]["levels"].pop(), "'fits.AllReduce.levels'"),
    (lambda d: d["fits"]["AllReduce"]["levels"][1].update(per_byte_moved=-1e-9), "'fits.AllReduce.levels[1].per_byte_moved'"),
    (lambda d: d["fits"]["AllReduce"].update(launch_per_task=True), "'fits.AllReduce.launch_per_task'"),
    (lambda d: d["fits"].update(Bogus={}), "'fits.Bogus'"),
])
def test_bad_field_is_named(tmp_path, edit, field):
    d = tuning().to_dict()
    edit(d)
    with pytest.raises(TuningError, match=field.replace("[", r"\[").replace("]", r"\]")):
        load_tuning(d)
    (tmp_path / "t.json").write_text(json.dumps(d))
    with pytest.raises(TuningError, match="t.json"):
        load_tuning(tmp_path / "t.json")


def test_not_json_nan_and_missing_file(tmp_path):
    p = tmp_path / "t.json"
    p.write_text("{'schema': 1}")
    with pytest.raises(TuningError, match="not valid JSON"):
        load_tuning(p)
    d = json.dumps(tuning().to_dict()).replace('"time_us": 20.0', '"time_us": NaN', 1)
    p.write_text(d)
    with pytest.raises(TuningError, match="NaN"):
        load_tuning(p)
    with pytest.raises(TuningError, match="cannot read"):
        load_tuning(tmp_path / "missing.json")


def test_interpolation_is_log_log_and_only_inside():
    t = Tuning("1x1x2", 2, UB, (Point("AllReduce", "NHR", 8, 10.0), Point("AllReduce", "NHR", 8, 30.0),
                                Point("AllReduce", "NHR", 512, 80.0)))
    got, how = t.measured("AllReduce", "NHR", 8)                                      # repeats averaged
    assert math.isclose(got, 20e-6) and how == "measured at 8 B"
    got, how = t.measured("AllReduce", "NHR", 64)                                      # halfway in log size
    assert math.isclose(got, math.sqrt(20e-6 * 80e-6)) and how == "interpolated 8..512 B"
    assert t.measured("AllReduce", "NHR", 4) is None and t.measured("AllReduce", "NHR", 1024) is None
    assert t.measured("AllReduce", "Ring", 8) is None


def test_machine_checks():
    t = tuning()
    t.check_machine("1x2x4", 8)
    with pytest.raises(TuningError, match="measured on 8 ranks, this communicator has 4"):
        t.check_machine("1x2x2", 4)
    with pytest.raises(TuningError, match="topology '1x2x4', this communicator is '2x2x2'"):
        t.check_machine("2x2x2", 8)
    with pytest.raises(TuningError, match="1 servers"):
        t.check_info(calc_topo_info("1x1x8", 0))


# -- features and fit -----------------------------------------------------------------------------
def test_features_split_levels_and_scale_with_size():
    one = dict(zip(FEATURES, features("AllReduce", "MeshOneShot", "1x1x8", 4096, 4, UB)))
    assert one["steps_L0"] > 0 and one["moved_L1"] == one["steps_L1"] == 0 and one["calls"] == 1
    two = dict(zip(FEATURES, features("AllReduce", "AicpuAllReduceParallelMeshNHR", "1x2x4", 1 << 20, 4, UB)))
    assert two["moved_L0"] > 0 and two["moved_L1"] > 0 and two["reduced_L0"] + two["reduced_L1"] > 0
    small = features("AllReduce", "Ring", "1x2x4", 8 << 20, 4, UB)
    big = features("AllReduce", "Ring", "1x2x4", 16 << 20, 4, UB)
    moved = [FEATURES.index(f"moved_L{i}") for i in range(2)]
    assert np.allclose(big[moved], 2 * small[moved]) and big[FEATURES.index("tasks")] > small[FEATURES.index("tasks")]


def test_nnls_clips_at_zero():
    a = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    b = np.array([3.0, 2.0, 1.0])                  # unconstrained: slope -1
    x = nnls(a, b)
    assert (x >= 0).all() and math.isclose(x[0], 2.0) and x[1] == 0


def test_fit_recovers_the_coefficients():
    f = tuning().fits["AllReduce"]
    assert f.points == len(ALGOS) * len(SIZES) and f.rms_rel_error < 1e-9
    assert math.isclose(f.levels[0].latency_per_step, 20e-6, rel_tol=1e-6)
    assert math.isclose(f.levels[1].per_byte_moved, 2e-9, rel_tol=1e-6)
    assert math.isclose(f.launch_per_task, 3e-6, rel_tol=1e-6) and math.isclose(f.per_call, 50e-6, rel_tol=1e-6)
    x = features("AllReduce", "RHD", "1x2x4", 4096, 4, UB)          # not measured: priced by the fit
    assert math.isclose(predict(f, x), x @ np.array([TRUE.get(k, 0.0) for k in FEATURES]), rel_tol=1e-6)


# -- selection ------------------------------------------------------------------------------------
INFO = calc_topo_info("1x2x4", 0)


def best(t, nbytes):
    times = {a: t.measured("AllReduce", a, nbytes) for a in t.algorithms("AllReduce")}
    return min((v[0], a) for a, v in times.items() if v)[1]


@pytest.mark.parametrize("nbytes", SIZES)
def test_measured_profile_picks_the_measured_best(nbytes):
    t = tuning()
    sel = select("allreduce", INFO, nbytes, profile=measured_profile(t))
    assert sel.source == "measured" and sel.algorithm == best(t, nbytes)
    text = str(sel)
    assert "measured profile" in text and "tuning file" in text and f"measured at {nbytes} B" in text


def test_native_mpi_wins_where_measured_fastest_and_the_fit_prices_the_rest():
    t = tuning()
    assert select("allreduce", INFO, 8, profile=measured_profile(t)).algorithm == NATIVE
    sel = select("allreduce", INFO, 64, profile=measured_profile(t))          # interpolated
    assert sel.algorithm == NATIVE and "interpolated 8..512 B" in str(sel)
    sel = select("allreduce", INFO, 1 << 30, profile=measured_profile(t))    # beyond the points: the fit
    assert sel.cost.winner.priced_by == "fit"
    native = next(r for r in sel.cost.rows if r.name == NATIVE)
    assert native.filtered == "no measured point around this size"


def test_hccl_profile_never_picks_native():
    assert select("allreduce", INFO, 8, profile=None).algorithm != NATIVE


def test_foreign_file_is_rejected():
    with pytest.raises(TuningError, match="1x2x4"):
        select("allreduce", calc_topo_info("2x2x2", 0), 8, profile=measured_profile(tuning()))


def test_op_without_points_uses_hccl_selection():
    sel = select("allgather", INFO, 1024, profile=measured_profile(tuning()))
    assert sel.source != "measured" and any("no AllGather measurements" in n for n in sel.notes)


def test_override_beats_tuning():
    sel = select("allreduce", INFO, 8, profile=measured_profile(tuning()), algo="AicpuAllReduceSoleNHR")
    assert sel.source == "override"


def test_environment_variable_and_cache(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    tuning().save(path)
    monkeypatch.setenv("PYHCCL_TUNING_FILE", str(path))
    assert select_for("allreduce", INFO, 8, profile=measured_profile(settings.tuning_file())).algorithm == NATIVE
    monkeypatch.setenv("PYHCCL_TUNING_FILE", "")
    assert select_for("allreduce", INFO, 8, profile=measured_profile(settings.tuning_file())).algorithm != NATIVE
    monkeypatch.setenv("PYHCCL_TUNING_FILE", str(tmp_path / "missing.json"))
    with pytest.raises(TuningError, match="PYHCCL_TUNING_FILE"):
        select_for("allreduce", INFO, 8, profile=measured_profile(settings.tuning_file()))


def test_measured_tuner_reprices_hccl_cost_model():
    t = tuning()
    sel = select("allreduce", INFO, 512, mode="cost", profile=None, tuner=Tuner(MeasuredTuner(t), "measured"))
    nhr = next(r for r in sel.cost.rows if r.name == "AicpuAllReduceSoleNHR")
    assert math.isclose(nhr.cost, t.measured("AllReduce", "AicpuAllReduceSoleNHR", 512)[0])
    assert any("AicpuAllReduceSoleNHR" in c for c in sel.cost.tuner_changes)


# -- the bench's report ---------------------------------------------------------------------------
def rows_from(t, nranks=8):
    out = []
    for nb in SIZES:
        times = {a: t.measured("AllReduce", a, nb)[0] for a in t.algorithms("AllReduce") if a != NATIVE}
        nat = t.measured("AllReduce", NATIVE, nb)
        for a, s in times.items():
            out.append(Row(nb, nb // 4, "float32", "sum", -1, s * 1e6, nb / s / 1e9, nb / s / 1e9 * 1.75, 0,
                           None, None, None, None, a, nat and nat[0] * 1e6, nat and nat[0] / s, nb))
    return out


def test_tuning_from_rows_regret_and_plot(tmp_path):
    t = tuning()
    rows = rows_from(t)
    args = parse_args("allreduce", ["--algo", "all", "--tune", "x", "--topo", "1x2x4"], "")
    made = tuning_from_rows(args, rows, "1x2x4", 8, UB, "MPI x")
    assert {p.algorithm for p in made.points} == set(t.algorithms("AllReduce"))
    assert made.fits["AllReduce"].rms_rel_error < 1e-6
    topology = Topology.from_spec(parse_topo("1x2x4"), 0, "test")
    report = regret(args, rows, topology, made)
    assert [g.tuned_ratio for g in report] == [1.0] * len(SIZES)
    assert all(g.hccl_ratio is None or g.hccl_ratio >= 1.0 for g in report)
    lines = regret_lines(report)
    assert lines[-1].startswith("# geomean regret: HCCL profile") and "tuned 1.00" in lines[-1]
    pytest.importorskip("matplotlib", reason="--plot needs the plot extra")
    plot(args, rows, 8, str(tmp_path / "p.png"), report)
    assert (tmp_path / "p.png").stat().st_size > 10000


def test_size_labels():
    assert [_label(s) for s in (8, 4096, 64 << 20, 1000)] == ["8B", "4KiB", "64MiB", "1000B"]
