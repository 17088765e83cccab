"""Runtimes for plans: MPI point-to-point, and the simulator."""

from .sim import Mismatch, SimReport, SimulationError, simulate

__all__ = ["Mismatch", "SimReport", "SimulationError", "simulate"]
