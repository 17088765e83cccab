"""The median over several runs of ``collectives_shm.py``: per op, size and rank count, each algorithm's ratio.

    python benchmarks/collectives_summary.py benchmarks/results/collectives/run1 run2 ... [--out FILE]

Each folder holds ``collectives_<N>.json`` of one run (``collectives_shm.py --out``). On a shared
machine one run's ranking is noise; the median of a few runs interleaved with native MPI is the
figure to read. Printed per op and size: for each rank count, the algorithm with the best median
ratio (native time / pyhccl time), that median, the runs' lowest and highest ratio of it, and its
median % of the roofline bound; below, per op, the one algorithm with the best lowest median over
the sizes from 1 MiB (the one to make the default); between them every algorithm's medians.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
from collections import defaultdict


def load(folders):
    """``{(op, nranks, size): {algo: [(ratio, bound share), ...]}}`` over every run."""
    cells = defaultdict(lambda: defaultdict(list))
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, "collectives_*.json"))):
            with open(path) as f:
                for row in json.load(f)["rows"]:
                    for algo, ratio in row["ratios"].items():
                        share = row["bound_s"] / row["times_s"][algo]
                        cells[(row["op"], row["nranks"], row["size"])][algo].append((ratio, share))
    return cells


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+")
    p.add_argument("--out", default=None, help="also write the table to this file")
    a = p.parse_args(argv)
    cells = load(a.folders)
    if not cells:
        raise SystemExit(f"no collectives_<N>.json in {', '.join(a.folders)}; run benchmarks/collectives_shm.py --out")
    ops = list(dict.fromkeys(k[0] for k in cells))
    ns = sorted({k[1] for k in cells})
    sizes = sorted({k[2] for k in cells})
    runs = max(len(v) for c in cells.values() for v in c.values())
    lines = [f"# median over {runs} runs of collectives_shm.py ({', '.join(a.folders)}); ratio = native / pyhccl time",
             f"# per rank count: best algorithm by median ratio, median [lowest-highest run], median % of bound",
             f"{'op':<14}{'size':>9}" + "".join(f"  {f'{n} ranks':<36}" for n in ns)]
    worst = defaultdict(lambda: defaultdict(lambda: float("inf")))     # (op, n) -> algo -> lowest median
    for op in ops:
        for size in sizes:
            row = f"{op:<14}{size:>9}"
            for n in ns:
                c = cells.get((op, n, size))
                if not c:
                    row += f"  {'-':<36}"
                    continue
                med = {algo: statistics.median(r for r, _ in v) for algo, v in c.items()}
                for algo, m in med.items():
                    worst[(op, n)][algo] = min(worst[(op, n)][algo], m)
                top = max(med, key=med.get)
                rs = [r for r, _ in c[top]]
                share = statistics.median(s for _, s in c[top])
                row += f"  {top:<15}{med[top]:>5.2f} [{min(rs):.2f}-{max(rs):.2f}]{100 * share:>5.0f}%"
            lines.append(row)
    lines.append("# every algorithm's median ratio per size (" + ", ".join(str(x) for x in sizes) + "), by rank count")
    for op in ops:
        for algo in sorted({x for k, c in cells.items() if k[0] == op for x in c}):
            per = []
            for n in ns:
                med = [statistics.median(r for r, _ in cells[(op, n, s)][algo]) if algo in cells.get((op, n, s), {})
                       else None for s in sizes]
                per.append(" ".join("  -  " if m is None else f"{m:.2f}" for m in med))
            lines.append(f"{op:<14}{algo:<16}" + " | ".join(per))
    lines.append("# per op and rank count: the algorithm whose lowest median ratio over the sizes is highest")
    for op in ops:
        picks = []
        for n in ns:
            w = worst.get((op, n))
            if w:
                best = max(w, key=w.get)
                picks.append(f"{n}: {best} (worst cell {w[best]:.2f})")
        lines.append(f"{op:<14} " + "; ".join(picks))
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
