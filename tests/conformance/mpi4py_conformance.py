"""mpi4py's own collective test modules on pyhccl.Communicator, compared with plain mpi4py test for test.

Fetches the source distribution of the installed mpi4py (``pip download --no-deps --no-binary mpi4py
mpi4py==<version>``, cached under the user's cache directory), runs its collective test modules under
mpiexec at each rank count, once with every communicator the tests use swapped for a
``pyhccl.Communicator`` and once on plain mpi4py, and prints passed/failed/skipped/crash/hang per module
and rank count, then every test whose outcome differs. The test files are not edited: the worker imports
a module, replaces the class attributes holding ``MPI.COMM_WORLD``/``MPI.COMM_SELF`` (``COMM``,
``BASECOMM``) with pyhccl communicators over them, and gives the module an ``MPI`` whose
``COMM_WORLD``/``COMM_SELF`` are those communicators, so the tests' own ``MPI.COMM_WORLD.Dup()`` returns
a pyhccl communicator too. Run from the repository root::

    python tests/conformance/mpi4py_conformance.py                 # every module, 1-5 ranks, both communicators
    python tests/conformance/mpi4py_conformance.py -n 2 -m test_cco_buf -k TestCCOBufWorld.testAllreduce

A hang is a test that runs past ``--test-timeout`` seconds on some rank; a crash is a test some rank was
in when mpiexec died. Either is recorded and the module goes on from the next test in a fresh job.
Exit status 0 when pyhccl's outcome equals plain mpi4py's for every test, 1 otherwise, 2 when the
source distribution cannot be had (the reason printed).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import types
import unittest
from pathlib import Path

#: The collective modules run by default (``--modules`` changes the list).
MODULES = ("test_cco_buf", "test_cco_buf_inter", "test_cco_nb_buf", "test_cco_vec", "test_cco_nb_vec",
           "test_cco_obj", "test_cco_pr_buf", "test_cco_pr_vec")
OUTCOMES = ("passed", "failed", "skipped", "crash", "hang")
#: MPICH busy-polls while a rank waits; with more ranks than cores heavy yield makes the wait sleep.
#: pyhccl's communicators are the default ones users get (PYHCCL_PROFILE=auto: the fast paths on one node),
#: whatever the calling test session set; ``PYHCCL_CONFORMANCE_PROFILE=hccl`` checks HCCL's selection instead.
YIELD = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": os.environ.get("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1"),
         "PYHCCL_PROFILE": os.environ.get("PYHCCL_CONFORMANCE_PROFILE", "auto")}


class FetchError(RuntimeError):
    """The mpi4py source distribution could not be fetched (the message says why)."""


# -- the source distribution ------------------------------------------------------------------------

def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/pyhccl/conformance`` (``~/.cache/pyhccl/conformance`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pyhccl" / "conformance"


def mpi4py_tests(version: str | None = None, cache: Path | None = None, sdist: str | None = None,
                 timeout: float = 120) -> Path:
    """The ``test`` directory of mpi4py's source distribution ``version`` (default: the installed one).

    Unpacked once into ``cache``; the tarball is ``sdist`` when given, else the cached one, else downloaded
    with pip. Raises :class:`FetchError` naming pip's last words when the package index cannot be reached.
    """
    if version is None:
        import mpi4py
        version = mpi4py.__version__
    cache = cache or cache_dir()
    tests = cache / f"mpi4py-{version}" / "test"
    if (tests / "test_cco_buf.py").is_file():
        return tests
    tarball = Path(sdist) if sdist else cache / f"mpi4py-{version}.tar.gz"
    if not tarball.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "mpi4py",
               f"mpi4py=={version}", "-d", str(cache), "--quiet", "--disable-pip-version-check", "--retries", "1", "--timeout", "15"]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise FetchError(f"{' '.join(cmd)} did not finish in {timeout:.0f} s (no package index?)") from None
        if out.returncode or not tarball.is_file():
            last = (out.stderr.strip() or out.stdout.strip() or "no output").splitlines()[-1]
            raise FetchError(f"{' '.join(cmd)} failed: {last}")
    with tempfile.TemporaryDirectory(dir=cache) as tmp, tarfile.open(tarball) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(f"mpi4py-{version}/test/")]
        tar.extractall(tmp, members=members, filter="data")
        (cache / f"mpi4py-{version}").mkdir(exist_ok=True)
        os.replace(Path(tmp) / f"mpi4py-{version}" / "test", tests)
    return tests


# -- the worker: one module under mpiexec, every test's outcome as a JSON line per rank ---------------

class _Recorder(unittest.TestResult):
    """Writes ``{"test", "event"}`` lines: start, then pass / fail / error / skip (a failed subtest is fail)."""

    def __init__(self, out) -> None:
        super().__init__()
        self.out = out

    def _line(self, test, event: str, detail: str = "") -> None:
        self.out.write(json.dumps({"test": test.id(), "event": event, "detail": detail}) + "\n")
        self.out.flush()

    def startTest(self, test) -> None:
        super().startTest(test)
        self._line(test, "start")

    def addSuccess(self, test) -> None:
        self._line(test, "pass")

    def addExpectedFailure(self, test, err) -> None:
        self._line(test, "pass")

    def addUnexpectedSuccess(self, test) -> None:
        self._line(test, "fail", "unexpected success")

    def addFailure(self, test, err) -> None:
        self._line(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err) -> None:
        self._line(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason) -> None:
        self._line(test, "skip", reason)

    def addSubTest(self, test, subtest, err) -> None:
        if err is not None:
            self._line(test, "fail" if issubclass(err[0], test.failureException) else "error",
                       self._exc_info_to_string(err, test))


def _swap_communicators(module, MPI) -> list:
    """Put pyhccl communicators where ``module`` has ``MPI.COMM_WORLD``/``MPI.COMM_SELF``; returns them."""
    import pyhccl
    world, self_ = pyhccl.Communicator(MPI.COMM_WORLD), pyhccl.Communicator(MPI.COMM_SELF)
    swap = {id(MPI.COMM_WORLD): world, id(MPI.COMM_SELF): self_}
    for cls in vars(module).values():
        if isinstance(cls, type):
            for attr in ("COMM", "BASECOMM"):
                value = cls.__dict__.get(attr)
                if value is not None and id(value) in swap:
                    setattr(cls, attr, swap[id(value)])
    proxy = types.ModuleType(MPI.__name__)
    proxy.__dict__.update(COMM_WORLD=world, COMM_SELF=self_, __getattr__=lambda name: getattr(MPI, name))
    module.MPI = proxy
    return [world, self_]


def worker(args) -> None:
    sys.path.insert(0, args.tests)
    from mpi4py import MPI
    module = importlib.import_module(args.module)
    made = _swap_communicators(module, MPI) if args.comm == "pyhccl" else []
    skip = set(Path(args.exclude).read_text().split()) if args.exclude else set()
    suite = unittest.TestSuite()
    for test in _flatten(unittest.defaultTestLoader.loadTestsFromModule(module)):
        if test.id() not in skip and (not args.select or any(k in test.id() for k in args.select)):
            suite.addTest(test)
    rank = MPI.COMM_WORLD.Get_rank()
    with open(Path(args.out) / f"rank{rank}.jsonl", "a", buffering=1) as out:
        if rank == 0:
            out.write(json.dumps({"tests": [t.id() for t in suite]}) + "\n")
        suite.run(_Recorder(out))
        out.write(json.dumps({"done": True}) + "\n")
    for comm in made:
        comm.release()


def _flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _flatten(item)
        else:
            yield item


# -- the driver: jobs, hangs and crashes, the table -------------------------------------------------

def _read(path: Path, seen: dict) -> list[dict]:
    """New complete lines of ``path`` since the last read."""
    pos = seen.get(path, 0)
    try:
        with open(path) as f:
            f.seek(pos)
            text = f.read()
    except FileNotFoundError:
        return []
    end = text.rfind("\n") + 1
    seen[path] = pos + end
    return [json.loads(line) for line in text[:end].splitlines() if line]


def run_module(module: str, n: int, comm: str, tests: Path, limit: float, select=(), log=print) -> dict:
    """``{test id: (outcome, detail)}`` of one module at ``n`` ranks on ``comm`` ("pyhccl" or "mpi4py")."""
    from pyhccl.launch import launch_env, mpiexec_command
    results: dict[str, tuple[str, str]] = {}
    order: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        exclude = Path(tmp) / "exclude"
        for attempt in range(1000):
            exclude.write_text("\n".join(results))
            out = Path(tmp) / f"job{attempt}"
            out.mkdir()
            cmd = [*mpiexec_command(), "-n", str(n), sys.executable, __file__, "--worker", "--module", module,
                   "--comm", comm, "--tests", str(tests), "--out", str(out), "--exclude", str(exclude),
                   *(["-k", *select] if select else [])]
            with open(out / "output", "w") as output:     # a file, not a pipe: a chatty job never blocks
                proc = subprocess.Popen(cmd, stdout=output, stderr=subprocess.STDOUT, env=launch_env(YIELD),
                                        start_new_session=True)
                listed, outcomes, running, hung = _watch(proc, out, n, limit)
            order = order or listed
            tail = (out / "output").read_text(errors="replace")[-3000:]
            for test, per_rank in outcomes.items():
                if len(per_rank) == n:
                    results[test] = _combine(per_rank)
            if not running:
                break
            culprit = min(running, key=lambda t: order.index(t) if t in order else len(order))
            others = "".join(f"\nrank {r} finished it: {e}: {d.strip()}" for r, (e, d) in
                             sorted(outcomes.get(culprit, {}).items()))
            if hung:
                results[culprit] = ("hang", f"ran past {limit:.0f} s on rank(s) {sorted(running[culprit])}{others}")
            else:
                why = _signal_of(proc.returncode)
                results[culprit] = ("crash", f"mpiexec {why} during the test on rank(s) "
                                             f"{sorted(running[culprit])}{others}\n{tail}")
            log(f"  {module} n={n} {comm}: {results[culprit][0]} in {culprit}")
            if all(t in results for t in order):
                break
    for test in order:
        results.setdefault(test, ("crash", "not run: a job ended without reaching it"))
    return {t: results[t] for t in [*order, *(t for t in results if t not in order)]}


def _watch(proc, out: Path, n: int, limit: float):
    """Follows a job's rank files until it ends or a test runs past ``limit`` (then kills it).

    Returns the tests the job lists, each test's outcome per rank, the tests some rank is still in
    (with those ranks), and whether the job was killed for a hang.
    """
    listed: list[str] = []
    outcomes: dict[str, dict[int, tuple[str, str]]] = {}
    running: dict[str, set[int]] = {}
    started: dict[int, float] = {}
    seen: dict = {}
    hung = False
    while True:
        done = proc.poll() is not None
        for r in range(n):
            for line in _read(out / f"rank{r}.jsonl", seen):
                if "tests" in line:
                    listed = line["tests"]
                elif "event" in line:
                    test, event = line["test"], line["event"]
                    if event == "start":
                        running.setdefault(test, set()).add(r)
                        started[r] = time.monotonic()
                    else:
                        prev = outcomes.setdefault(test, {}).get(r)
                        if prev is None or prev[0] in ("pass", "skip"):
                            outcomes[test][r] = (event, line["detail"])
                        if r in running.get(test, ()):
                            running[test].discard(r)
                            started.pop(r, None)
                            if not running[test]:
                                del running[test]
        if done:
            return listed, outcomes, running, hung
        if started and time.monotonic() - min(started.values()) > limit:
            hung = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return listed, outcomes, running, hung
        time.sleep(0.2)


def _signal_of(rc: int) -> str:
    if rc < 0:
        return f"killed by {signal.Signals(-rc).name}"
    return f"exited with status {rc}"


def _combine(per_rank: dict[int, tuple[str, str]]) -> tuple[str, str]:
    """One outcome from every rank's: failed if any rank failed, skipped if all skipped, else passed."""
    bad = [(r, e, d) for r, (e, d) in sorted(per_rank.items()) if e in ("fail", "error")]
    if bad:
        r, e, d = bad[0]
        return "failed", f"rank {r}: {e}: {d.strip().splitlines()[-1] if d.strip() else ''}\n{d}"
    if all(e == "skip" for e, _ in per_rank.values()):
        return "skipped", next(iter(per_rank.values()))[1]
    return "passed", ""


def counts(results: dict) -> dict[str, int]:
    return {o: sum(1 for v in results.values() if v[0] == o) for o in OUTCOMES}


def differences(mine: dict, ref: dict) -> list[tuple[str, str, str, str]]:
    """``(test, pyhccl outcome, mpi4py outcome, pyhccl detail)`` for every test whose outcome differs."""
    return [(t, mine.get(t, ("absent", ""))[0], ref.get(t, ("absent", ""))[0], mine.get(t, ("", ""))[1])
            for t in dict.fromkeys([*ref, *mine]) if mine.get(t, ("absent",))[0] != ref.get(t, ("absent",))[0]]


def _cell(c: dict[str, int]) -> str:
    return "/".join(str(c[o]) for o in OUTCOMES)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", "--ranks", default="1-5", help="rank counts: 2, 1-5 or 1,3 (default 1-5)")
    p.add_argument("-m", "--modules", nargs="+", default=list(MODULES), help="mpi4py test modules")
    p.add_argument("-k", dest="select", nargs="+", default=[], help="run only tests whose id contains one of these")
    p.add_argument("--comm", choices=("both", "pyhccl", "mpi4py"), default="both")
    p.add_argument("--test-timeout", type=float, default=120, help="seconds a test may run (default 120)")
    p.add_argument("--sdist", help="an mpi4py source tarball to use instead of downloading one")
    p.add_argument("--json", help="write every test's outcome here")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:                    # one rank of a job the driver started
        w = argparse.ArgumentParser()
        for name in ("--module", "--comm", "--tests", "--out", "--exclude"):
            w.add_argument(name)
        w.add_argument("-k", dest="select", nargs="+", default=[])
        worker(w.parse_args(argv[1:]))
        return 0
    args = p.parse_args(argv)
    try:
        tests = mpi4py_tests(sdist=args.sdist)
    except FetchError as e:
        print(f"cannot fetch mpi4py's tests: {e}", file=sys.stderr)
        return 2
    ranks = _ranks(args.ranks)
    comms = ("pyhccl", "mpi4py") if args.comm == "both" else (args.comm,)
    every: dict = {}
    print(f"# mpi4py tests from {tests}; cells passed/failed/skipped/crash/hang", flush=True)
    print(f"{'module':<20} {'n':>2}  " + "  ".join(f"{c:<16}" for c in comms) + ("  same" if len(comms) == 2 else ""))
    diffs = []
    for module in args.modules:
        for n in ranks:
            t0 = time.monotonic()
            res = {c: run_module(module, n, c, tests, args.test_timeout, args.select,
                                 log=lambda s: print(s, file=sys.stderr, flush=True)) for c in comms}
            every[f"{module} {n}"] = res
            cells = "  ".join(f"{_cell(counts(res[c])):<16}" for c in comms)
            same = ""
            if len(comms) == 2:
                d = differences(res["pyhccl"], res["mpi4py"])
                diffs += [(module, n, *x) for x in d]
                same = "  yes" if not d else f"  NO ({len(d)})"
            print(f"{module:<20} {n:>2}  {cells}{same}   [{time.monotonic() - t0:.0f} s]", flush=True)
    for module, n, test, mine, ref, detail in diffs:
        print(f"\nDIFF n={n} {test}: pyhccl {mine}, mpi4py {ref}\n  " + "\n  ".join(detail.splitlines()[-12:]))
    if args.json:
        Path(args.json).write_text(json.dumps({k: {c: v for c, v in r.items()} for k, r in every.items()}, indent=1))
    return 1 if diffs else 0


def _ranks(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


if __name__ == "__main__":
    sys.exit(main())
