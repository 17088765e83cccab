"""Find the MPI launcher: the one pip installed beside this Python, or the system's.

``PYHCCL_MPIEXEC`` overrides it (for example ``"mpirun --oversubscribe"`` or ``"srun"``).
Open MPI refuses more ranks than cores unless told ``--oversubscribe``; it is added for it.
:func:`emulated_hosts` makes one machine look like several hosts to MPICH (docs/hosts.md).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from .core import settings

__all__ = ["mpiexec_command", "launch_env", "emulated_hosts", "PLACEMENTS"]

#: How :func:`emulated_hosts` places ranks on the hosts.
PLACEMENTS = ("block", "round-robin")

# Set in a process that initialised MPI (even as a singleton); a launcher started from it
# must not inherit them, or its ranks try to join the parent's job.
_MPI_ENV_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "HYDRA_", "MPIR_CVAR_CH4_", "OPAL_", "PRTE_")


@lru_cache(maxsize=1)
def mpiexec_command() -> tuple[str, ...]:
    """The launcher as an argument list, ready for ``-n N``.

    Raises:
        FileNotFoundError: no launcher beside ``sys.executable``, on ``PATH`` or in ``PYHCCL_MPIEXEC``.
    """
    env = settings.mpiexec()
    if env:
        return tuple(shlex.split(env))
    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError(f"no mpiexec beside {sys.executable} or on PATH; install the MPI runtime "
                                f"with 'pip install mpich' or set PYHCCL_MPIEXEC")
    try:
        version = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    if "Open MPI" in version or "OpenRTE" in version:
        return (found, "--oversubscribe")
    return (found,)


def launch_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the variables of its own MPI job, plus ``extra``.

    Open MPI's root guard variables (``OMPI_ALLOW_RUN_AS_ROOT*``) and ``OMPI_MCA_*`` settings are kept.
    """
    keep = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_MCA_")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(_MPI_ENV_PREFIXES) or k.startswith(keep)}
    env.update(extra or {})
    return env


def emulated_hosts(hosts: int, nranks: int, placement: str = "block") -> tuple[list[str], dict[str, str]]:
    """MPICH (hydra) arguments and environment that run ``nranks`` local ranks as if on ``hosts`` hosts.

    ``Split_type(COMM_TYPE_SHARED)`` then sees ``hosts`` nodes, and traffic between them goes through
    MPICH's network module. ``block``: hydra's fork launcher with ``-hosts host0:k,host1:k,...`` (consecutive
    ranks per host, the first ``nranks % hosts`` hosts one more); ``round-robin``: ``MPIR_CVAR_NUM_CLIQUES``
    (rank ``r`` on host ``r % hosts``). Put the arguments after ``mpiexec -n N``.

    Raises:
        ValueError: fewer than 1 host, more hosts than ranks, or an unknown placement.
    """
    if not 1 <= hosts <= nranks:
        raise ValueError(f"expecting 1 <= hosts <= {nranks} (the ranks), got {hosts}")
    if placement == "round-robin":
        return [], {"MPIR_CVAR_NUM_CLIQUES": str(hosts)}
    if placement != "block":
        raise ValueError(f"expecting placement in {PLACEMENTS}, got {placement!r}")
    per, extra = divmod(nranks, hosts)
    return ["-launcher", "fork", "-hosts", ",".join(f"host{i}:{per + (i < extra)}" for i in range(hosts))], {}
