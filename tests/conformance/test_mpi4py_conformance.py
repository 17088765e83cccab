"""CI's share of the conformance run: a few of mpi4py's own collective tests on pyhccl.Communicator and on plain
mpi4py, outcome for outcome (mpi4py_conformance.py beside this file; the full run is in docs/communicator.md).

Skips, saying why, when mpi4py's source distribution is not cached and the package index cannot be reached.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("mpi4py_conformance", Path(__file__).with_name("mpi4py_conformance.py"))
conformance = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = conformance
_spec.loader.exec_module(conformance)

#: ``(module, ranks, tests)``: the world communicator's blocking collectives (in place too) at 3 ranks, a
#: non-power of two, and the vector forms at 2; each runs in a few seconds on each communicator.
FAST = [
    ("test_cco_buf", 3, ("TestCCOBufWorld.testAllreduce", "TestCCOBufWorld.testReduceScatterBlock",
                         "TestCCOBufInplaceWorld.testReduceScatterBlock", "TestCCOBufInplaceWorld.testAllgather")),
    ("test_cco_vec", 2, ("TestCCOVecWorld.testAllgatherv", "TestCCOVecInplaceWorld.testAlltoallv")),
]


@pytest.fixture(scope="module")
def mpi4py_tests():
    try:
        return conformance.mpi4py_tests(timeout=60)
    except conformance.FetchError as e:
        pytest.skip(f"mpi4py's source distribution is not cached and cannot be fetched: {e}")


@pytest.mark.parametrize("module,n,select", FAST, ids=[f"{m}-{n}" for m, n, _ in FAST])
def test_same_outcomes_as_mpi4py(mpi4py_tests, module, n, select):
    mine = conformance.run_module(module, n, "pyhccl", mpi4py_tests, 60, select)
    ref = conformance.run_module(module, n, "mpi4py", mpi4py_tests, 60, select)
    assert len(ref) >= len(select) and all(v[0] == "passed" for v in ref.values()), ref
    diffs = conformance.differences(mine, ref)
    assert not diffs, "\n".join(f"{t}: pyhccl {a}, mpi4py {b}\n{d}" for t, a, b, d in diffs)


FAKE = """
import os, time, unittest
from mpi4py import MPI

class TestFake(unittest.TestCase):
    COMM = MPI.COMM_WORLD

    def test_a_passes(self):
        self.COMM.Barrier()

    def test_b_hangs(self):
        if self.COMM.Get_rank() == 0:
            time.sleep(600)
        self.COMM.Barrier()

    def test_c_crashes(self):
        if self.COMM.Get_rank() == self.COMM.Get_size() - 1:
            os.abort()

    def test_d_fails_on_rank_1(self):
        self.assertEqual(self.COMM.Get_rank(), 0)

    @unittest.skip("because")
    def test_e_skipped(self):
        pass

    def test_f_sees_pyhccl(self):
        self.assertEqual(type(self.COMM).__name__, "Communicator")
        self.assertEqual(type(MPI.COMM_WORLD.Dup()).__name__, "Communicator")
"""


def test_runner_names_hangs_and_crashes_and_goes_on(tmp_path):
    (tmp_path / "test_fake.py").write_text(FAKE)
    got = conformance.run_module("test_fake", 2, "pyhccl", tmp_path, 5)
    outcomes = {t.rsplit(".", 1)[1]: v[0] for t, v in got.items()}
    assert outcomes == {"test_a_passes": "passed", "test_b_hangs": "hang", "test_c_crashes": "crash",
                        "test_d_fails_on_rank_1": "failed", "test_e_skipped": "skipped",
                        "test_f_sees_pyhccl": "passed"}, got
    assert "ran past 5 s on rank(s) [0, 1]" in got["test_fake.TestFake.test_b_hangs"][1]
    assert "during the test on rank(s) [1]" in got["test_fake.TestFake.test_c_crashes"][1]
    assert got["test_fake.TestFake.test_d_fails_on_rank_1"][1].startswith("rank 1: fail: AssertionError: 1 != 0")


def test_differences_name_each_test_that_differs():
    mine = {"a": ("passed", ""), "b": ("hang", "ran past 60 s"), "c": ("failed", "rank 1: fail")}
    ref = {"a": ("passed", ""), "b": ("passed", ""), "c": ("failed", "x"), "d": ("skipped", "")}
    assert conformance.differences(mine, ref) == [("b", "hang", "passed", "ran past 60 s"), ("d", "absent", "skipped", "")]
    assert conformance.counts(mine) == {"passed": 1, "failed": 1, "skipped": 0, "crash": 0, "hang": 1}
