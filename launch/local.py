#!/usr/bin/env python3
"""Run a command on local ranks that emulate a machine: ``launch/local.py --topo 2x4 -- CMD``.

``--hosts H`` (MPICH) makes the local ranks look like H hosts to MPI itself, placed ``--placement
block`` (consecutive ranks per host, the default) or ``round-robin`` (rank r on host r % H); with
``--hosts`` and no ``--topo`` pyhccl detects the hosts as servers, as on a real cluster (docs/hosts.md).

``--topo`` takes a preset of launch/presets/ by name (``2x4``, ``single-server-mesh``,
``ubx-mesh-clos``, ``asym-4+2``, ``3-level``) or any spec (``1x2x4``, ``'[[[0,1,2,3],[0,1]]]'``,
``'1x1x8;level0=mesh+clos'``); every rank gets it as ``PYHCCL_TOPO``. ``-n`` defaults to the
spec's device count. The launcher is pyhccl's (``pyhccl.launch.mpiexec_command``: the mpiexec
beside this Python, else ``PYHCCL_MPIEXEC``, else the one on PATH); Open MPI gets
``--oversubscribe``, MPICH oversubscribes by itself. A leading ``python`` in CMD becomes this
Python. Without CMD it prints the layout (``python -m pyhccl.topo``).

Examples::

    launch/local.py --list
    launch/local.py --topo 2x4 -- python -m pyhccl.bench allreduce
    launch/local.py -n 8 --hosts 2 --placement round-robin -- python -m pyhccl.topo
    launch/local.py -n 6 --topo '[[[0,1,2,3],[0,1]]]' -- python -m pyhccl.topo --json
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

from pyhccl.launch import PLACEMENTS, emulated_hosts, launch_env, mpiexec_command
from pyhccl.topo import parse_topo

PRESETS = Path(__file__).resolve().parent / "presets"


def presets() -> dict[str, dict]:
    """The presets by name (file name without .json)."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(PRESETS.glob("*.json"))}


def main(argv: list[str] | None = None) -> int:
    """Launch; returns the launcher's exit status (2 for a usage error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="launch/local.py", description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, help="number of ranks (default: the spec's device count)")
    p.add_argument("--topo", help="a preset name or a topology spec")
    p.add_argument("--hosts", type=int, help="emulate this many hosts to MPI (MPICH); with no --topo pyhccl "
                                            "detects them")
    p.add_argument("--placement", choices=PLACEMENTS, default="block", help="ranks on the --hosts (default block)")
    p.add_argument("--list", action="store_true", help="list the presets and exit")
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    args = p.parse_args(argv)
    if args.list:
        for name, preset in presets().items():
            print(f"{name:<20} {parse_topo(preset).to_text():<24} {preset.get('description', '')}")
        return 0
    if args.topo is None and args.hosts is None:
        p.error("expecting --topo PRESET|SPEC (see --list) or --hosts H")
    env: dict[str, str] = {}
    if args.topo is not None:
        try:
            spec = parse_topo(presets().get(args.topo, args.topo))
        except (TypeError, ValueError) as e:
            p.error(f"--topo is neither a preset ({', '.join(presets())}) nor a valid spec: {e}")
        n = spec.nranks if args.n is None else args.n
        if n != spec.nranks:
            p.error(f"expecting -n {spec.nranks} for topo {spec.to_text()} ({spec.nranks} devices), got {n}")
        env["PYHCCL_TOPO"] = spec.to_text()
    elif args.n is None:
        p.error("expecting -n N with --hosts and no --topo")
    else:
        n = args.n
    hosts: list[str] = []
    if args.hosts is not None:
        try:
            hosts, more = emulated_hosts(args.hosts, n, args.placement)
        except ValueError as e:
            p.error(f"--hosts: {e}")
        env.update(more)
    cmd = cmd or ["python", "-m", "pyhccl.topo"]
    if cmd[0] in ("python", "python3"):
        cmd = [sys.executable, *cmd[1:]]
    full = [*mpiexec_command(), "-n", str(n), *hosts, *cmd]
    if args.dry_run:
        print(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + (" " if env else "") + shlex.join(full))
        return 0
    return subprocess.run(full, env=launch_env(env)).returncode

if __name__ == "__main__":
    sys.exit(main())
