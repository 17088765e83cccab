#!/bin/bash
# before (the commit before the redesign, /tmp/baseline) vs after (/work/main), interleaved
PY=/work/main/.venv/bin/python; MX=/work/main/.venv/bin/mpiexec
run() { v=$1; shift; if [ $v = old ]; then R=/tmp/baseline; else R=/work/main; fi; (cd $R && PYTHONPATH=$R "$@"); }
for i in 1 2 3 4; do for v in old new; do echo "== overhead n=1 $v #$i"; run $v env MPIR_CVAR_ENABLE_HEAVY_YIELD=0 $MX -n 1 $PY benchmarks/overhead.py --rounds 9 2>&1 | grep -E "^ +(comm|plan|native|tuned) "; done; done
for i in 1 2 3; do for v in old new; do echo "== overhead n=2 $v #$i"; run $v env MPIR_CVAR_ENABLE_HEAVY_YIELD=0 $MX -n 2 $PY benchmarks/overhead.py --rounds 9 --iters 3000 2>&1 | grep -E "^ +(comm|plan|native|tuned) "; done; done
for i in 1 2; do for v in old new; do echo "== bench n=4 $v #$i"; run $v env MPIR_CVAR_ENABLE_HEAVY_YIELD=1 $MX -n 4 $PY -m pyhccl.bench allreduce --algo all -b 1K -e 16M -f 16 2>&1 > /tmp/bench_${v}_$i.txt; tail -3 /tmp/bench_${v}_$i.txt; done; done
