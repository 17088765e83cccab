#!/usr/bin/env bash
# GPU check: the cupy tests (one process, then 2 ranks) and a short cupy AllReduce benchmark.
#
#   benchmarks/gpu_check.sh            # from anywhere; uses .venv/bin/python and its mpiexec
#   benchmarks/gpu_check.sh --install  # first pip-installs cupy-cuda12x into that Python, unless a cupy is there
#
# PYTHON / MPIEXEC override the interpreter and launcher. Every step has a time limit (under 5
# minutes in all); the script exits non-zero at once, saying why, when cupy or a GPU is missing,
# and non-zero at the end when a step failed. Skips inside the test steps are listed (-rs).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
MPIEXEC=${MPIEXEC:-$(dirname "$PY")/mpiexec}
command -v "$MPIEXEC" >/dev/null 2>&1 || MPIEXEC=mpiexec
# Yielding waits only where the 2 ranks outnumber the cores: on a 16-core H200 machine it made a 4 KiB host
# Allreduce take 178 us instead of 6 (benchmarks/results/gpu/h200-2026-12-04.txt).
if [[ $(nproc) -le 2 ]]; then export MPIR_CVAR_ENABLE_HEAVY_YIELD=${MPIR_CVAR_ENABLE_HEAVY_YIELD:-1}; fi
start=$SECONDS

if [[ "${1:-}" == "--install" ]]; then
    # A machine with cupy already (any cupy-cudaNNx build) needs nothing; one without a network cannot install.
    if "$PY" -c "import cupy" 2>/dev/null; then
        echo "gpu_check: cupy $("$PY" -c 'import cupy; print(cupy.__version__)') already installed; nothing to install"
    else
        timeout 240 "$PY" -m pip install -q cupy-cuda12x || { echo "gpu_check: FAIL: pip install cupy-cuda12x failed"; exit 2; }
    fi
fi

probe='
import sys
try:
    import cupy
except ImportError:
    sys.exit("cupy is not installed (benchmarks/gpu_check.sh --install, or pip install cupy-cuda12x)")
try:
    n = cupy.cuda.runtime.getDeviceCount()
except Exception as e:
    sys.exit(f"no usable GPU: {type(e).__name__}: {e}")
if not n:
    sys.exit("no GPU visible (getDeviceCount() == 0)")
import pyhccl.gpu as g
name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
print(f"{n} GPU(s): {name}; cupy {cupy.__version__}; MPI CUDA-aware: {g.cuda_aware()}")
'
if ! info=$(timeout 60 "$PY" -c "$probe" 2>&1); then
    echo "gpu_check: FAIL: ${info:-the GPU probe timed out}"
    exit 3
fi
echo "gpu_check: $info"

declare -a names results
step() {          # step NAME LIMIT_S COMMAND...
    local name=$1 limit=$2; shift 2
    echo "== $name"
    timeout "$limit" "$@"
    local rc=$?
    [[ $rc == 124 ]] && echo "gpu_check: $name ran past ${limit} s"
    names+=("$name"); results+=("$rc")
}
step "pytest tests/test_gpu.py (1 process)" 90 \
    "$PY" -m pytest -q -rs -p no:cacheprovider tests/test_gpu.py
step "pytest --with-mpi GPU + device-path tests (2 ranks)" 120 \
    "$MPIEXEC" -n 2 "$PY" -m pytest -q -rs -p no:cacheprovider --with-mpi tests/mpi/test_gpu_cupy.py tests/mpi/test_device_path.py
step "benchmark: cupy AllReduce, pyhccl vs native (2 ranks)" 60 \
    "$MPIEXEC" -n 2 "$PY" benchmarks/gpu_bench.py --iters 10

echo "== summary ($((SECONDS - start)) s)"
fail=0
for i in "${!names[@]}"; do
    if [[ ${results[$i]} == 0 ]]; then echo "  ok    ${names[$i]}"; else echo "  FAIL  ${names[$i]} (exit ${results[$i]})"; fail=1; fi
done
exit $fail
