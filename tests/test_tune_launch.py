"""``python -m pyhccl.bench ... --tune / --tuning / --report regret / --plot`` under mpiexec."""

import json

import pytest

from pyhccl.tune import load_tuning

from test_mpi_launch import mpirun

SWEEP = ["-m", "pyhccl.bench", "allreduce", "--topo", "1x1x3", "--algo", "all", "--sizes", "8,4K,64K",
         "-n", "2", "-w", "1", "--no-inplace"]


def test_tune_then_report_with_the_file(tmp_path):
    tuning, png = tmp_path / "t.json", tmp_path / "p.png"
    out = mpirun(3, *SWEEP, "--tune", str(tuning), "--report", "regret")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "# tuning file" in out.stdout and "# geomean regret: HCCL profile" in out.stdout
    t = load_tuning(tuning)
    assert t.topo == "1x1x3" and t.nranks == 3 and t.fits["AllReduce"].points > 0
    assert {"NativeMPI", "NHR", "Ring"} <= set(t.algorithms("AllReduce"))
    out = mpirun(3, *SWEEP, "--tuning", str(tuning), "--report", "regret", "--plot", str(png),
                 "--json", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = json.loads((tmp_path / "r.json").read_text())
    assert any(r["algo"].startswith("tuned:") for r in rows["rows"])
    assert rows["meta"]["regret"]["tuned"] is not None
    if "matplotlib" in out.stderr:
        pytest.skip("matplotlib missing")
    assert png.stat().st_size > 10000


def test_bench_reads_the_tuning_file_variable(tmp_path, monkeypatch):
    tuning = tmp_path / "t.json"
    out = mpirun(3, *SWEEP, "--sizes", "8", "--tune", str(tuning))
    assert out.returncode == 0, out.stderr[-3000:]
    monkeypatch.setenv("PYHCCL_TUNING_FILE", str(tuning))       # as the Communicator reads it: no --tuning
    out = mpirun(3, *SWEEP, "--sizes", "8", "--report", "regret", "--json", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = json.loads((tmp_path / "r.json").read_text())
    assert any(r["algo"].startswith("tuned:") for r in rows["rows"])
    assert rows["meta"]["regret"]["tuned"] is not None


def test_foreign_tuning_file_is_a_usage_error(tmp_path):
    tuning = tmp_path / "t.json"
    out = mpirun(3, *SWEEP, "--sizes", "8", "--tune", str(tuning))
    assert out.returncode == 0, out.stderr[-3000:]
    out = mpirun(2, "-m", "pyhccl.bench", "allreduce", "--topo", "1x1x2", "--algo", "all", "--sizes", "8",
                 "--tuning", str(tuning))
    assert out.returncode == 2
    assert out.stderr.count("measured on 3 ranks") == 1


@pytest.mark.parametrize("topo, says", [("1x3", "expecting PxSxD"), ("1x1x4", "topo 1x1x4 has 4 devices")])
def test_tune_with_a_bad_topo_is_a_usage_error(topo, says):
    out = mpirun(2, "-m", "pyhccl.tune", "--topo", topo)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert out.stderr.count(f"python -m pyhccl.tune: error: --topo: {says}") == 1
