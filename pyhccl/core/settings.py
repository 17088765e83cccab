"""Every ``PYHCCL_*`` setting, read in one place.

The layers below ``comm`` and the command-line tools read no environment: the Communicator
and the CLIs call these functions and pass the values down as arguments. Each function takes
the explicit value (an argument of ``Communicator``, a CLI option) first and falls back to the
variable; a bad value raises ValueError naming the variable (or argument) and what is valid.

| variable | read by |
|---|---|
| PYHCCL_ALGO | :func:`algo` |
| PYHCCL_UB_TRANSFER_BYTES | :func:`ub_transfer_bytes` |
| PYHCCL_TOPO, PYHCCL_RANK_TABLE | :func:`topo_source` |
| PYHCCL_SUPER_POD_SERVERS | :func:`super_pod_servers` |
| PYHCCL_TUNING_FILE | :func:`tuning_file` |
| PYHCCL_CHECK, PYHCCL_TIMEOUT_ABORT | :func:`flag` |
| PYHCCL_TIMEOUT | :func:`timeout_seconds` |
| PYHCCL_SELECTOR | :func:`selector_mode` |
| PYHCCL_OP_EXPANSION_MODE | :func:`expansion_mode` |
| PYHCCL_TUNER_PLUGIN | :func:`tuner_plugin` |
| PYHCCL_CUDA_AWARE | :func:`cuda_aware` |
| PYHCCL_MPIEXEC | :func:`mpiexec` |
| PYHCCL_CMA | :func:`cma` |
| PYHCCL_PROFILE | :func:`profile_mode` |
| PYHCCL_CACHE_DIR (XDG_CACHE_HOME) | :func:`cache_dir` |
| PYHCCL_VERIFY_MEMORY | :func:`verify_memory` |
"""

from __future__ import annotations

import os
from typing import Any, Mapping

__all__ = ["UB_TRANSFER_BYTES", "env", "algo", "ub_transfer_bytes", "ub_transfer_bytes_set", "timeout_seconds",
           "flag", "tuning_file", "selector_mode", "expansion_mode", "tuner_plugin", "topo_source", "super_pod_servers",
           "cuda_aware", "mpiexec", "cma", "selector", "selection", "PROFILES", "profile_mode", "cache_dir",
           "verify_memory"]

#: SMALL_COUNT_512KB (src/ops/op_common/selector/auto_selector_base.h), commented there as
#: the UB protocol's largest single transfer; pyhccl uses it as its message size.
UB_TRANSFER_BYTES = 512 * 1024


def env(var: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable's text, stripped; "" when unset."""
    return (os.environ if environ is None else environ).get(var, "").strip()


def algo(value: str | None = None) -> str | None:
    """The forced algorithm text: ``value``, else ``PYHCCL_ALGO``; None when neither is given ("" disables)."""
    if value is not None:
        return value or None
    return env("PYHCCL_ALGO") or None


def ub_transfer_bytes_set() -> bool:
    """Whether ``PYHCCL_UB_TRANSFER_BYTES`` is set (it then wins over a tuning file's size)."""
    return bool(env("PYHCCL_UB_TRANSFER_BYTES"))


def ub_transfer_bytes(value: int | str | None = None) -> int:
    """The message size: ``value``, else ``PYHCCL_UB_TRANSFER_BYTES``, else 512 KiB.

    Raises:
        ValueError: a value that is not a positive integer number of bytes.
    """
    src = "ub_transfer_bytes"
    if value is None:
        value = os.environ.get("PYHCCL_UB_TRANSFER_BYTES")
        src = "PYHCCL_UB_TRANSFER_BYTES"
        if value is None or value == "":
            return UB_TRANSFER_BYTES
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if n <= 0:
        raise ValueError(f"expecting {src} to be a positive number of bytes, got {value!r}")
    return n


def timeout_seconds(value: float | str | None = None) -> float | None:
    """The per-step timeout: ``value``, else ``PYHCCL_TIMEOUT``; None (no timeout) for unset, "" or 0.

    Raises:
        ValueError: a value that is not a non-negative number of seconds.
    """
    src = "timeout"
    if value is None:
        value = os.environ.get("PYHCCL_TIMEOUT", "")
        src = "PYHCCL_TIMEOUT"
    if isinstance(value, str) and not value.strip():
        return None
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = float("nan")
    if not t >= 0 or t == float("inf"):
        raise ValueError(f"expecting {src} to be a number of seconds (0 or empty: no timeout), got {value!r}")
    return t or None


def flag(value: Any, name: str, var: str, default: bool) -> bool:
    """A boolean setting: ``value``, else the variable (1/0, true/false, yes/no, on/off), else ``default``.

    Raises:
        TypeError: ``value`` that is not a bool.
        ValueError: a variable that is not one of the accepted words.
    """
    if value is not None:
        if not isinstance(value, (bool, int)):
            raise TypeError(f"expecting {name} as a bool, got {type(value).__name__}")
        return bool(value)
    text = env(var).lower()
    if not text:
        return default
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expecting {var} to be 1 or 0 (true/false, yes/no, on/off), got {text!r}")


def tuning_file(value: Any = None) -> Any:
    """The tuning file: ``value`` (a path or a Tuning object), else ``PYHCCL_TUNING_FILE``; "" for none."""
    return os.environ.get("PYHCCL_TUNING_FILE", "") if value is None else value


def selector_mode(value: str | None = None) -> str:
    """The selection mode: ``value``, else ``PYHCCL_SELECTOR``, else "auto" (checked by the selector)."""
    return value if value is not None else env("PYHCCL_SELECTOR") or "auto"


def expansion_mode(value: str | None = None) -> str | None:
    """HCCL_OP_EXPANSION_MODE: ``value``, else ``PYHCCL_OP_EXPANSION_MODE``; None for the device's default."""
    return value if value is not None else env("PYHCCL_OP_EXPANSION_MODE") or None


def tuner_plugin(value: str | None = None) -> str:
    """The tuner plugin spec ``module:attr``: ``value``, else ``PYHCCL_TUNER_PLUGIN``; "" for none."""
    spec = env("PYHCCL_TUNER_PLUGIN") if value is None else value
    return "" if not spec or spec.lower() == "none" else spec


def topo_source(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``("PYHCCL_TOPO", spec text)``, ``("PYHCCL_RANK_TABLE", path)`` or ``("", "")``: the layout the environment gives."""
    text = env("PYHCCL_TOPO", environ)
    if text:
        return "PYHCCL_TOPO", text
    path = env("PYHCCL_RANK_TABLE", environ)
    if path:
        return "PYHCCL_RANK_TABLE", path
    return "", ""


def super_pod_servers() -> int:
    """``PYHCCL_SUPER_POD_SERVERS``: servers (detected nodes) per super pod, in node order; 0 (unset): one super pod.

    Raises:
        ValueError: a value that is not a positive integer.
    """
    value = env("PYHCCL_SUPER_POD_SERVERS")
    if not value:
        return 0
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"expecting PYHCCL_SUPER_POD_SERVERS to be a positive integer (servers per super pod) "
                         f"or empty (one super pod), got {value!r}")
    return int(value)


def cuda_aware() -> bool | None:
    """``PYHCCL_CUDA_AWARE``: True for 1, False for 0, None when unset (ask the MPI library).

    Raises:
        ValueError: a value other than 0, 1 or empty.
    """
    value = env("PYHCCL_CUDA_AWARE")
    if not value:
        return None
    if value not in ("0", "1"):
        raise ValueError(f"expecting PYHCCL_CUDA_AWARE to be 0, 1 or empty (ask the MPI library), got {value!r}")
    return value == "1"


def verify_memory() -> float | None:
    """``PYHCCL_VERIFY_MEMORY``: the GiB the simulator may assume its process can use (0: no limit); None when
    unset (the simulator then asks the operating system what is available).

    Raises:
        ValueError: a value that is not a number >= 0.
    """
    value = env("PYHCCL_VERIFY_MEMORY")
    if not value:
        return None
    try:
        gib = float(value)
    except ValueError:
        gib = -1.0
    if not gib >= 0 or gib == float("inf"):
        raise ValueError(f"expecting PYHCCL_VERIFY_MEMORY to be a number of GiB >= 0 (0: no limit; empty: what the "
                         f"system has available), got {value!r}")
    return gib


def mpiexec() -> str:
    """``PYHCCL_MPIEXEC``: the launcher command line to use; "" to look for one."""
    return env("PYHCCL_MPIEXEC")


def cma(value: bool | None = None) -> bool:
    """Whether the ``@shm`` engine may read peers' arrays with cross-memory attach: ``value``, else
    ``PYHCCL_CMA`` (1/0), else True (it is used only where it works on every rank).

    Raises:
        ValueError: a variable that is not one of the accepted words.
    """
    return flag(value, "cma", "PYHCCL_CMA", True)


#: PYHCCL_PROFILE's values: ``auto`` prices pyhccl's fast paths with a machine profile measured once per
#: layout (docs/performance.md); ``hccl`` keeps HCCL's own selection and pricing (for studies of HCCL's choices).
PROFILES = ("auto", "hccl")


def profile_mode(value: str | None = None) -> str:
    """How a Communicator with no tuning file selects: ``value``, else ``PYHCCL_PROFILE``, else ``"auto"``.

    Raises:
        ValueError: not one of :data:`PROFILES`.
    """
    src = "profile" if value is not None else "PYHCCL_PROFILE"
    mode = (value if value is not None else env("PYHCCL_PROFILE") or "auto").strip().lower()
    if mode not in PROFILES:
        raise ValueError(f"expecting {src} to be one of {', '.join(PROFILES)} (auto: pyhccl's fast paths priced by "
                         f"a machine profile; hccl: HCCL's own selection), got {mode!r}")
    return mode


def cache_dir() -> str:
    """Where pyhccl keeps what it measured: ``PYHCCL_CACHE_DIR``, else ``$XDG_CACHE_HOME/pyhccl``, else
    ``~/.cache/pyhccl``."""
    return env("PYHCCL_CACHE_DIR") or os.path.join(
        env("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "pyhccl")


def selector(mode: str | None = None, expansion: str | None = None, tuner: str | None = None) -> dict[str, Any]:
    """The selector's own settings from the environment (explicit values win): ``mode``, ``expansion_mode``,
    ``tuner`` (a plugin spec, "" for none), as :func:`pyhccl.select.select` takes them."""
    return {"mode": selector_mode(mode), "expansion_mode": expansion_mode(expansion), "tuner": tuner_plugin(tuner)}


def selection(algo_text: str | None = None, mode: str | None = None, expansion: str | None = None,
              tuner: str | None = None) -> dict[str, Any]:
    """:func:`selector` and the override ``algo`` (PYHCCL_ALGO): every keyword :func:`pyhccl.select.select` reads."""
    return {"algo": algo(algo_text) or "", **selector(mode, expansion, tuner)}
