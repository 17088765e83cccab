"""``python -m pyhccl.verify``: rank ranges, the per-N lines, failures and usage errors."""

import pytest

from pyhccl.verify import main, parse_ranks


def test_parse_ranks():
    assert parse_ranks("1-4") == [1, 2, 3, 4]
    assert parse_ranks("1,2,8-10") == [1, 2, 8, 9, 10]
    for bad in ("0-3", "5-2", "x"):
        with pytest.raises(ValueError, match="expecting"):
            parse_ranks(bad)


def test_prints_one_line_per_rank_count(capsys):
    assert main(["allreduce", "--algo", "NHR", "--ranks", "1-6"]) == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("allreduce NHR")]
    assert len(lines) == 6 and all(": ok" in l for l in lines)
    assert "rounds=6" in lines[4]                       # N = 5


def test_other_ops_and_hccl_names(capsys):
    assert main(["reduce_scatter", "--algo", "Mesh", "--ranks", "3", "--count", "5"]) == 0
    assert main(["allgather", "--ranks", "2-3"]) == 0
    assert main(["allreduce", "--algo", "AicpuAllReduceSoleNHR", "--ranks", "7", "--in-place"]) == 0


@pytest.mark.parametrize("argv, match", [
    (["broadcast"], "unknown collective"),
    (["allreduce", "--algo", "NHRR"], "did you mean NHR"),
    (["allreduce", "--ranks", "0"], "expecting rank counts >= 1"),
    (["allgather", "--in-place"], "--in-place applies to allreduce only"),
])
def test_usage_errors(argv, match, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and match in capsys.readouterr().err


def test_failure_exits_nonzero_naming_rank_step_region(monkeypatch, capsys):
    from dataclasses import replace

    import pyhccl.verify as v
    from pyhccl.plan import Step

    real = v._OPS["allreduce"][1]

    def broken(algo, rank, n, c, ip):
        p = real(algo, rank, n, c, ip)
        if rank == 1 and len(p.steps) > 2:
            steps = list(p.steps)
            steps[2] = Step(steps[2].transfers, steps[2].local[:-1])
            p = replace(p, steps=tuple(steps))
        return p

    monkeypatch.setitem(v._OPS, "allreduce", (v._OPS["allreduce"][0], broken))
    assert main(["allreduce", "--algo", "NHR", "--ranks", "1-8"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "rank" in out and "step" in out and "out[" in out
