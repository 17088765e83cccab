"""The Communicator in one process: settings, DLPack buffers, fallbacks, the bench's exit status."""

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl.bench import main as bench_main


class DLPackOnly:
    """An object that offers its memory only through DLPack."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_algo_from_argument_env_and_rule(monkeypatch):
    monkeypatch.delenv("PYHCCL_ALGO", raising=False)
    assert pyhccl.Communicator(MPI.COMM_SELF).algo is None
    assert pyhccl.Communicator(MPI.COMM_SELF, algo="AicpuAllReduceSoleNHR").algo == "AicpuAllReduceSoleNHR"
    monkeypatch.setenv("PYHCCL_ALGO", "ring")
    assert pyhccl.Communicator(MPI.COMM_SELF).algo == "Ring"
    monkeypatch.setenv("PYHCCL_ALGO", "Rign")
    with pytest.raises(ValueError, match="unknown template 'Rign' in PYHCCL_ALGO.*or one of pyhccl's templates: "
                                         "MeshOneShot"):
        pyhccl.Communicator(MPI.COMM_SELF)


def test_selection_runs_and_explains():
    c = pyhccl.Communicator(MPI.COMM_SELF, topo="1x1x1")
    out = np.zeros(4, np.float32)
    c.Allreduce(np.ones(4, np.float32), out)
    sel = c.last_selection
    assert np.array_equal(out, np.ones(4)) and sel is not None and sel.algorithm != "NOT_MATCH"
    assert "winner:" in str(sel)
    forced = pyhccl.Communicator(MPI.COMM_SELF, algo="AicpuAllReduceSoleNHR")
    forced.Allreduce(np.ones(4, np.float32), out)
    assert forced.last_selection.algorithm == "AicpuAllReduceSoleNHR"
    plain = pyhccl.Communicator(MPI.COMM_SELF, algo="NHR")
    plain.Allreduce(np.ones(4, np.float32), out)
    assert plain.last_selection is None


def test_ub_bytes_from_env(monkeypatch):
    monkeypatch.setenv("PYHCCL_UB_TRANSFER_BYTES", "lots")
    with pytest.raises(ValueError, match="expecting PYHCCL_UB_TRANSFER_BYTES to be a positive number of bytes"):
        pyhccl.Communicator(MPI.COMM_SELF)


def test_dlpack_buffers():
    c = pyhccl.Communicator(MPI.COMM_SELF)
    src, dst = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    c.Allreduce(DLPackOnly(src), DLPackOnly(dst))
    assert np.array_equal(dst, src) and c.fallbacks == 0


def test_fallback_is_counted_and_logged(caplog):
    c = pyhccl.Communicator(MPI.COMM_SELF)
    out = np.zeros(3, np.int32)
    with caplog.at_level("DEBUG", logger="pyhccl"):
        c.Allreduce(np.ones(3, np.int32), out, MPI.BOR)
    assert c.fallbacks == 1 and np.array_equal(out, [1, 1, 1])
    assert "Allreduce goes to the wrapped communicator: reduce op not one of SUM, PROD, MAX, MIN" in caplog.text


def test_bench_exits_nonzero_on_wrong_data(monkeypatch, capsys):
    assert bench_main(["allreduce", "-b", "64", "-e", "64", "-n", "1", "-w", "0"], MPI.COMM_SELF) == 0

    real = pyhccl.Communicator.Allreduce

    def corrupt(self, sendbuf, recvbuf, op=MPI.SUM):
        real(self, sendbuf, recvbuf, op)
        np.asarray(recvbuf).reshape(-1)[0] += 1

    monkeypatch.setattr(pyhccl.Communicator, "Allreduce", corrupt)
    assert bench_main(["allreduce", "-b", "64", "-e", "64", "-n", "1", "-w", "0"], MPI.COMM_SELF) == 1
    assert "# Out of bounds values : 2 FAILED" in capsys.readouterr().out


def test_bench_usage(capsys):
    assert bench_main(["allgather"], MPI.COMM_SELF) == 2
    assert "unknown benchmark 'allgather'; valid: allreduce" in capsys.readouterr().err
