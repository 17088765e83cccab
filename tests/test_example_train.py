"""examples/train_mlp.py: the data-parallel training script gives the same loss curve on pyhccl and mpi4py.

Its gradients are reduced in fixed point (int64 sums, exact in any order), so equal curves mean both
communicators computed the exact sums at every step; a wrong sum anywhere changes every later loss.
"""

import json
from pathlib import Path

import pytest

from test_mpi_launch import mpirun

SCRIPT = Path(__file__).parents[1] / "examples" / "train_mlp.py"
ARGS = ("--epochs", "2", "--samples", "512", "--batch", "64", "--hidden", "32", "--reps", "5")


def train(tmp_path, comm, *extra):
    log = tmp_path / f"{comm}.json"
    out = mpirun(2, str(SCRIPT), "--comm", comm, *ARGS, "--log", str(log), *extra, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "of the communication hidden behind compute" in out.stdout
    assert out.stdout.count("persistent (Start+Wait)") == 4       # 8 B, 64 B, 512 B, 4 KiB
    return json.loads(log.read_text())


def test_loss_curves_are_identical_and_fall(tmp_path):
    mine, theirs = train(tmp_path, "pyhccl"), train(tmp_path, "mpi4py")
    assert mine["losses"] == theirs["losses"]       # bit for bit: JSON floats round-trip exactly
    assert len(mine["losses"]) == 2 and mine["losses"][1] < mine["losses"][0]
    assert 0.0 <= mine["hidden"] <= 1.0 and [r[0] for r in mine["per_call_us"]] == [8, 64, 512, 4096]


def test_torch_buckets_give_the_same_curve(tmp_path):
    pytest.importorskip("torch")
    plain = train(tmp_path, "pyhccl")
    assert train(tmp_path, "pyhccl", "--torch")["losses"] == plain["losses"]
