"""Benchmark pieces that need no MPI job: flags, sizes, exact inputs, table, CSV."""

import csv
import io

import numpy as np
import pytest

from pyhccl.bench.driver import Row, UsageError, fill, parse_args, sizes, write_csv, write_rows
from pyhccl.core.units import format_size, parse_size


def test_sizes_units():
    assert [parse_size(s) for s in ("8", "4K", "64M", "1G", "2kb")] == [8, 4096, 64 << 20, 1 << 30, 2048]
    assert format_size(64 << 20) == "64M" and format_size(12) == "12"
    with pytest.raises(ValueError, match="expecting a size like 8, 4K"):
        parse_size("lots")


def test_flags():
    a = parse_args("allreduce", ["-b", "8", "-e", "1M", "-f", "4", "-n", "3", "-w", "1", "-o", "all",
                                 "-d", "double", "--algo", "NHR"], "help")
    assert (a.minbytes, a.maxbytes, a.stepfactor, a.iters, a.warmup) == (8, 1 << 20, 4, 3, 1)
    assert a.redops == ("sum", "prod", "max", "min") and a.dtypes == ("float64",)
    assert sizes(a, 8)[:3] == [8, 32, 128] and sizes(a, 8)[-1] == 512 << 10   # as nccl-tests: -e caps the ladder
    assert sizes(a, 4, granularity=3)[:2] == [0, 24]      # whole blocks of N elements (AllGather's ladder)
    b = parse_args("gather", ["-r", "2", "--topo", "1x2x2", "--csv", "out.csv"], "help")
    assert (b.root, b.topo, b.csv) == (2, "1x2x2", "out.csv")


@pytest.mark.parametrize("argv, match", [
    (["-b", "1M", "-e", "8"], "expecting -e >= -b"),
    (["-o", "xor"], "unknown op 'xor'"),
    (["-d", "complex"], "unknown or unsupported dtype"),
    (["-c", "2"], "expecting -c 0 or 1"),
    (["-n", "0"], "expecting -n >= 1"),
    (["--bogus"], "unrecognized arguments"),
    (["--topo", "1x2"], "--topo: expecting PxSxD"),
])
def test_bad_flags(argv, match):
    with pytest.raises(UsageError, match=match):
        parse_args("allreduce", argv, "help")


@pytest.mark.parametrize("redop", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "float16", "float32", "uint64"])
def test_fill_is_exact_in_any_order(redop, dtype):
    uf = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[redop]
    xs = []
    for r in range(16):
        x = np.empty(1000, dtype)
        fill(x, 3, r, redop)
        xs.append(x)
    fwd, bwd = xs[0].copy(), xs[-1].copy()
    for x in xs[1:]:
        uf(fwd, x, out=fwd)
    for x in reversed(xs[:-1]):
        uf(bwd, x, out=bwd)
    assert np.array_equal(fwd, bwd)
    if dtype.startswith("float") and redop == "sum":
        assert np.array_equal(fwd.astype(np.float64), np.sum([x.astype(np.float64) for x in xs], axis=0))


def test_fill_without_a_reduce_op_tells_ranks_apart():
    for dtype in ("int8", "float16", "float32"):
        xs = []
        for r in range(8):
            x = np.empty(50, dtype)
            fill(x, 0, r, None)
            xs.append(x)
        assert all(not np.array_equal(xs[i], xs[j]) for i in range(8) for j in range(i))
        assert all(np.array_equal(x, x.astype(np.float64).astype(dtype)) for x in xs)    # exact values


def test_table_has_nccl_tests_columns():
    out = io.StringIO()
    write_rows([Row(1024, 256, "float32", "sum", -1, 10.0, 0.1, 0.15, 0, 9.0, 0.11, 0.17, 0, "NHR", 5.0, 0.5)], out)
    text = out.getvalue()
    for col in ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "algo", "ratio"):
        assert col in text
    assert "NHR" in text.splitlines()[-1]


def test_missing_forms_print_dashes_and_csv_round_trips(tmp_path):
    row = Row(96, 24, "float32", "none", 0, 12.5, 0.01, 0.005, 0, None, None, None, None, "auto:X", None, None)
    out = io.StringIO()
    write_rows([row], out)
    line = out.getvalue().splitlines()[-1].split()
    assert line[5:10] == ["12.50", "0.010", "0.005", "-", "0"] and line[10:14] == ["-", "-", "-", "-"]
    row.bound = 41.6                                    # % of the roofline's bound, beside busbw
    write_rows([row], out)
    assert out.getvalue().splitlines()[-1].split()[8] == "42"
    write_csv([row], tmp_path / "rows.csv")
    got = list(csv.DictReader(open(tmp_path / "rows.csv")))
    assert got[0]["size"] == "96" and got[0]["algo"] == "auto:X" and got[0]["ip_time_us"] == ""


def test_time_call_blocks_and_budget_run_the_same_calls():
    from mpi4py import MPI

    from pyhccl.bench.driver import time_call
    calls = []
    t = time_call(MPI.COMM_SELF, lambda: calls.append(1), 7, 2, blocks=3)
    assert t >= 0 and len(calls) == 9
    calls.clear()
    time_call(MPI.COMM_SELF, lambda: calls.append(1), 1000, 0, budget=1e-9)
    assert len(calls) == 2                        # one warm-up to judge the budget, then one timed call
