"""Runtimes that execute plans: MPI point-to-point (:mod:`.mpi`) and the shared-memory engine (:mod:`.shm`).

Both compile a plan into a :class:`~pyhccl.run.base.Runner`; :mod:`.timeout` holds the error
and the deadline waits they share, :mod:`.transport` the MPI runtime's host and device
transports. Importing this package does not initialise MPI; its modules do.
"""
