"""Entry point: abort COMM_WORLD on an unhandled exception so that no rank hangs."""

import sys
import traceback

from mpi4py import MPI

from . import main

if __name__ == "__main__":
    try:
        status = main()
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
    sys.exit(status)
