"""cupy arrays through every Communicator op under mpiexec, where a GPU exists (else a visible skip).

Run by benchmarks/gpu_check.sh as ``mpiexec -n 2 python -m pytest --with-mpi tests/mpi/test_gpu_cupy.py``
and by tests/test_mpi_launch.py with the rest of tests/mpi. The op bodies are those of
tests/mpi/test_device_path.py (``exercise``) on cupy arrays: staged through pinned host memory
always (``PYHCCL_CUDA_AWARE=0``), direct when the MPI library says it is CUDA-aware.
"""

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl import gpu

from test_device_path import UB, exercise, forbid_host_runner

pytestmark = pytest.mark.mpi

cp = pytest.importorskip("cupy", reason="cupy not installed: GPU path untested here")
try:
    NGPU = cp.cuda.runtime.getDeviceCount()
    WHY = "no GPU visible (cupy.cuda.runtime.getDeviceCount() == 0): GPU path untested here"
except Exception as e:      # noqa: BLE001 - no driver: CUDARuntimeError
    NGPU, WHY = 0, f"no usable GPU (cupy: {type(e).__name__}: {str(e)[:80]}): GPU path untested here"
if not NGPU:
    pytest.skip(WHY, allow_module_level=True)

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
GPU = RANK % NGPU           # ranks share the GPUs round robin


def wrap(a):
    with cp.cuda.Device(GPU):
        return cp.asarray(a)


def unwrap(d):
    assert isinstance(d, cp.ndarray) and d.device.id == GPU, f"result left GPU {GPU}: {type(d).__name__}"
    return d.get()


@pytest.fixture
def no_host_runner(monkeypatch):
    forbid_host_runner(monkeypatch, gpu.cuda_aware, "cupy buffers")


def test_every_op_staged(monkeypatch, no_host_runner):
    monkeypatch.setenv("PYHCCL_CUDA_AWARE", "0")
    backend = gpu.backend_of(wrap(np.zeros(1)))
    before = backend.staged_pieces
    c = pyhccl.Communicator(COMM, ub_transfer_bytes=UB)
    bad = exercise(c, wrap, unwrap, dtypes=("float32", "float64", "int32"))
    c.release()
    assert COMM.allreduce(not bad, op=MPI.LAND), bad[:4]
    assert c.fallbacks == 0
    assert (backend.staged_pieces > before) == (SIZE > 1)


def test_every_op_direct(monkeypatch, no_host_runner):
    if not gpu._library_cuda_support():
        pytest.skip("the MPI library is not CUDA-aware (MPIX_Query_cuda_support): direct transfers untested")
    monkeypatch.setenv("PYHCCL_CUDA_AWARE", "1")
    backend = gpu.backend_of(wrap(np.zeros(1)))
    before = backend.staged_pieces
    c = pyhccl.Communicator(COMM, ub_transfer_bytes=UB)
    bad = exercise(c, wrap, unwrap)
    c.release()
    assert COMM.allreduce(not bad, op=MPI.LAND), bad[:4]
    assert backend.staged_pieces == before


def test_large_allreduce_default_ub(monkeypatch):
    """16 MiB of float32 in the default 512 KiB pieces; the reference is the sum on the host."""
    monkeypatch.setenv("PYHCCL_CUDA_AWARE", "0")
    c = pyhccl.Communicator(COMM)
    k = 4 << 20
    with cp.cuda.Device(GPU):
        x = cp.full(k, RANK + 1, cp.float32)
        out = cp.empty_like(x)
    c.Allreduce(x, out)
    c.Allreduce(MPI.IN_PLACE, x, MPI.MAX)
    c.release()
    assert float(out[0]) == float(out[-1]) == SIZE * (SIZE + 1) / 2 and out.device.id == GPU
    assert float(x.min()) == SIZE
