"""Device buffers in one process: detection everywhere; cupy arrays through the Communicator where a GPU exists.

The cupy tests skip with the reason shown by ``pytest -rs`` when cupy is missing or no GPU is
visible; benchmarks/gpu_check.sh runs them (and tests/mpi/test_gpu_cupy.py under mpiexec) on a
GPU machine. The device runner itself is covered everywhere by tests/mpi/test_device_path.py.
"""

import subprocess
import sys

import numpy as np
import pytest
from mpi4py import MPI

import pyhccl
from pyhccl import gpu
from pyhccl.comm.buffers import as_array
from pyhccl.comm.job import Env
from pyhccl.comm.parsers import allreduce


def test_import_does_not_import_cupy():
    code = "import sys, pyhccl, pyhccl.comm, pyhccl.gpu; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


@pytest.mark.parametrize("value, want", [("0", False), ("1", True), (" 1 ", True)])
def test_cuda_aware_override(monkeypatch, value, want):
    monkeypatch.setenv("PYHCCL_CUDA_AWARE", value)
    assert gpu.cuda_aware() is want


def test_cuda_aware_asks_the_library(monkeypatch):
    monkeypatch.setenv("PYHCCL_CUDA_AWARE", "")
    assert gpu.cuda_aware() is gpu._library_cuda_support()
    assert isinstance(gpu.cuda_aware(), bool)


def test_cuda_aware_rejects_other_values(monkeypatch):
    monkeypatch.setenv("PYHCCL_CUDA_AWARE", "yes")
    with pytest.raises(ValueError, match="expecting PYHCCL_CUDA_AWARE to be 0, 1 or empty .* got 'yes'"):
        gpu.cuda_aware()


def test_host_dlpack_is_host_memory():
    x = np.arange(4.0)

    class HostDL:
        def __dlpack__(self, **kw):
            return x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    assert gpu.backend_of(HostDL()) is None and np.array_equal(as_array(HostDL()).array, x)


# -- cupy, on a GPU ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cp():
    cupy = pytest.importorskip("cupy", reason="cupy not installed: GPU path untested here")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:       # noqa: BLE001 - no driver: CUDARuntimeError
        pytest.skip(f"no usable GPU (cupy: {type(e).__name__}: {str(e)[:80]}): GPU path untested here")
    if count == 0:
        pytest.skip("no GPU visible (cupy.cuda.runtime.getDeviceCount() == 0): GPU path untested here")
    return cupy


@pytest.fixture
def last_gpu(cp):
    """The highest-numbered GPU: results must stay on the device they came from, not device 0."""
    return cp.cuda.runtime.getDeviceCount() - 1


def test_cupy_forms_parse_to_device_views(cp, last_gpu):
    with cp.cuda.Device(last_gpu):
        x = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    b = as_array([x, (4, 2), MPI.INT])
    assert b.device.name == "cupy" and isinstance(b.array, cp.ndarray) and b.array.device.id == last_gpu
    assert b.array.data.ptr == x.data.ptr + 8                    # a view, no copy

    class CAI:                                                    # only __cuda_array_interface__
        __cuda_array_interface__ = x.__cuda_array_interface__

    class DL:                                                     # only DLPack
        def __dlpack__(self, **kw):
            return x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    for obj in (CAI(), DL()):
        b = as_array(obj)
        assert b.device is gpu.backend_of(x) and b.array.data.ptr == x.data.ptr and b.array.size == 12
    e = Env(0, 1, lambda d, n: np.zeros(n, d), lambda m: [m])
    assert allreduce(e, x[:, ::2], cp.zeros(6, cp.float32)) == \
        "sendbuf has device memory that is not contiguous, which pyhccl does not run"
    with pytest.raises(ValueError, match="got sendbuf on the host and recvbuf on GPU"):
        allreduce(e, np.zeros(12, np.float32), x)


def test_cupy_allreduce_stays_on_its_device(cp, last_gpu, monkeypatch):
    monkeypatch.setenv("PYHCCL_CUDA_AWARE", "0")
    c = pyhccl.Communicator(MPI.COMM_SELF)
    with cp.cuda.Device(last_gpu):
        x = cp.arange(1000, dtype=cp.float32)
        out = cp.zeros((10, 100), cp.float32)
    c.Allreduce(x, out, MPI.MAX)
    c.Allreduce(MPI.IN_PLACE, x, MPI.SUM)
    assert c.fallbacks == 0
    assert isinstance(out, cp.ndarray) and out.device.id == last_gpu
    assert np.array_equal(out.get().ravel(), np.arange(1000, dtype=np.float32))
    assert np.array_equal(x.get(), np.arange(1000, dtype=np.float32))
    c.release()


def test_cupy_backend_pieces(cp, last_gpu):
    """The backend's primitives on a real device: pinned round trip, strided views, device ufuncs."""
    dev = gpu.backend_of(cp.zeros(1))
    with cp.cuda.Device(last_gpu):
        a = cp.arange(64, dtype=cp.int32)
        s = dev.scratch(np.dtype(np.int32), 16, a)
        assert s.device.id == last_gpu and s.size == 16
        pinned = dev.pinned(256)
        dev.to_host(pinned[:256], dev.bytes(a))
        dev.synchronize()
        assert np.array_equal(pinned[:256].view(np.int32), np.arange(64))
        b = cp.zeros(64, cp.int32)
        dev.from_host(dev.bytes(b), pinned[:256])
        dev.synchronize()
        assert cp.array_equal(a, b)
        v = dev.as_strided(a[1:], (4, 2), (16 * 4, 4))            # 4 rows of 2, stride 16 elements
        assert v.get().tolist() == [[1, 2], [17, 18], [33, 34], [49, 50]]
        dev.ufunc(np.add)(b, a, out=b)
        assert cp.array_equal(b, 2 * a) and dev.may_share_memory(a[:10], a[5:]) and not dev.may_share_memory(a, b)


def test_torch_cuda_tensors_through_dlpack(cp, last_gpu, monkeypatch):
    """torch CUDA tensors (what a training script passes): read through ``__dlpack__``, written in place."""
    torch = pytest.importorskip("torch", reason="torch not installed: torch CUDA tensors untested here")
    monkeypatch.setenv("PYHCCL_CUDA_AWARE", "0")
    c = pyhccl.Communicator(MPI.COMM_SELF)
    x = torch.arange(1000, dtype=torch.float32, device=f"cuda:{last_gpu}")
    out = torch.zeros((10, 100), dtype=torch.float32, device=f"cuda:{last_gpu}")
    c.Allreduce(x, out, MPI.SUM)
    c.Allreduce(MPI.IN_PLACE, x, MPI.MAX)
    c.Bcast(out, root=0)
    assert c.fallbacks == 0
    assert out.device.index == last_gpu
    assert torch.equal(out.reshape(-1).cpu(), torch.arange(1000, dtype=torch.float32))
    assert torch.equal(x.cpu(), torch.arange(1000, dtype=torch.float32))
    c.release()
