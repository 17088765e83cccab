"""Runtimes that execute plans: MPI point-to-point (:mod:`.mpi`) and the shared-memory engine (:mod:`.shm`).

Importing this package does not initialise MPI; its modules do.
"""
