"""The layer rules, read from the source (ast): what each package may import, module sizes, private names.

LAYERS is the one declared table (docs/layout.md and README's Layout section describe it): a
module may import pyhccl modules of its own layer and of the layers listed for it, nothing
else; "up" and "sideways" imports fail here, whether at module level or inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "pyhccl"

#: layer -> the layers it may import (besides itself). Lowest first.
LAYERS: dict[str, set[str]] = {
    "core": set(),
    "topo": {"core"},
    "algo": {"core", "topo"},
    "select": {"core", "topo", "algo"},                       # never plan, never tune
    "plan": {"core", "topo", "algo"},                         # never select
    "run": {"core", "topo", "algo", "plan"},
    "verify": {"core", "topo", "algo", "select", "plan"},     # no runtime
    "tune": {"core", "topo", "algo", "select", "plan"},       # no verify, no runtime
    "comm": {"core", "topo", "algo", "select", "plan", "run", "tune"},
    "cli": {"core", "topo", "algo", "select", "plan", "run", "verify", "tune", "comm"},
    "top": {"core", "topo", "algo", "select", "plan", "run", "verify", "tune", "comm", "cli"},
}

#: Modules whose layer is not their package's: the command-line entry points sit above everything
#: they wire together; pyhccl.gpu is the runtime's device backend.
SPECIAL = {
    "pyhccl": "top",
    "pyhccl.gpu": "run",
    "pyhccl.launch": "cli",
    "pyhccl.bench": "cli",
    "pyhccl.select.__main__": "cli",
    "pyhccl.topo.__main__": "cli",
    "pyhccl.verify.__main__": "cli",
    "pyhccl.tune.__main__": "cli",
}

#: Imports inside functions that cross packages, allowed only here, each with its reason.
LAZY_OK = {
    ("pyhccl", "pyhccl.comm"): "the package imports without initialising MPI",
    ("pyhccl", "pyhccl.run.timeout"): "the package imports without initialising MPI",
}

MAX_LINES = 420


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(mod: str) -> str:
    for name in sorted(SPECIAL, key=len, reverse=True):
        if mod == name or (name != "pyhccl" and mod.startswith(name + ".")):
            return SPECIAL[name]
    parts = mod.split(".")
    if len(parts) == 1:
        return "top"
    if parts[1] not in LAYERS:
        raise AssertionError(f"{mod}: package {parts[1]!r} has no layer in tests/test_layers.py LAYERS")
    return parts[1]


def imports(path: Path) -> list[tuple[str, list[str], bool, int]]:
    """``(module, names, at module level, line)`` for every pyhccl import of ``path``."""
    mod = module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    top |= {id(n) for b in tree.body if isinstance(b, (ast.If, ast.Try)) for n in ast.walk(b)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "pyhccl":
                names = [a.name for a in node.names]
                # "from . import x" imports the module pkg.x
                if not node.module:
                    for a in node.names:
                        out.append((f"{target}.{a.name}", [], id(node) in top, node.lineno))
                else:
                    out.append((target, names, id(node) in top, node.lineno))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "pyhccl":
                    out.append((a.name, [], id(node) in top, node.lineno))
    return out


SOURCES = sorted(PKG.rglob("*.py"))


def _resolve(target: str) -> str:
    """``pyhccl.x.y.name`` may name an object; trim to a module or package that exists."""
    parts = target.split(".")
    while len(parts) > 1:
        p = ROOT.joinpath(*parts)
        if p.with_suffix(".py").exists() or (p / "__init__.py").exists():
            break
        parts.pop()
    return ".".join(parts)


def edges():
    """``(where, module, target module, names, at module level)`` for every pyhccl import in the package."""
    for path in SOURCES:
        mod = module_name(path)
        for target, names, at_top, line in imports(path):
            yield f"{path.relative_to(ROOT)}:{line}", mod, _resolve(target), names, at_top


def goes_down(mod: str, target: str) -> bool:
    """Whether ``mod`` may import ``target``: the same layer, or one of the layers LAYERS lists for it."""
    src, dst = layer_of(mod), layer_of(target)
    return dst == src or dst in LAYERS[src]


def test_the_scan_sees_imports_and_judges_them():
    found = {(mod, target) for _, mod, target, _, _ in edges()}
    assert ("pyhccl.comm.agree", "pyhccl.select") in found and len(found) > 200
    assert goes_down("pyhccl.comm.agree", "pyhccl.select.selection")
    assert not goes_down("pyhccl.select.selection", "pyhccl.tune.file")     # the cycle this layering removed
    assert not goes_down("pyhccl.plan.api", "pyhccl.select")                # side by side
    assert not goes_down("pyhccl.verify.api", "pyhccl.run.mpi")


def test_every_import_goes_down():
    bad = [f"{where}: {mod} ({layer_of(mod)}) imports {target} ({layer_of(target)})"
           for where, mod, target, _, _ in edges() if not goes_down(mod, target)]
    assert not bad, "imports that go up or sideways between layers:\n" + "\n".join(bad)


def test_no_function_level_imports_across_packages():
    bad = [f"{where}: {mod} imports {target} inside a function" for where, mod, target, _, at_top in edges()
           if not at_top and layer_of(target) != layer_of(mod) and (mod, target) not in LAZY_OK]
    assert not bad, "function-level imports across layers (move them to the top, or fix the layering):\n" + "\n".join(bad)


def test_no_private_names_across_packages():
    bad = []
    for where, mod, target, names, _ in edges():
        if target.split(".")[:2] == mod.split(".")[:2]:
            continue                    # within one package
        bad += [f"{where}: {mod} imports {n} from {target}" for n in names if n.startswith("_")]
        if any(p.startswith("_") and not p.startswith("__") for p in target.split(".")):
            bad.append(f"{where}: {mod} imports private module {target}")
    assert not bad, "private names imported across packages:\n" + "\n".join(bad)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_module_size(path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(ROOT)} has {n} lines (limit about 400): split it by job"


def _communicator_privates() -> set[str]:
    """Private attributes a Communicator sets on itself (``self._x = ...`` in pyhccl/comm)."""
    names = set()
    for path in (PKG / "comm").rglob("*.py") if (PKG / "comm").is_dir() else [PKG / "comm.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                    isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                names.add(node.attr)
    return names


def test_outside_code_touches_no_private_communicator_attribute():
    privates = _communicator_privates()
    assert privates, "found no private Communicator attributes: the scan is broken"
    paths = [*(PKG / "bench").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    bad = []
    for path in paths:
        if path.name == "test_layers.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in privates:
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert not bad, "private Communicator attributes used outside pyhccl.comm:\n" + "\n".join(bad)
