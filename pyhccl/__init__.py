"""pyhccl: HCCL's topology-aware collective algorithms over MPI."""
