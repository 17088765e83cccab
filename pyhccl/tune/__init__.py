"""Tuning: measured times and a fitted cost model that make selection fit the machine it runs on.

``python -m pyhccl.bench <op> --algo all --tune FILE`` writes a tuning file; ``PYHCCL_TUNING_FILE``
or ``Communicator(..., tuning=FILE)`` makes selection use it (docs/tuning.md): the caller hands
``measured_profile(file)`` to ``pyhccl.select.select(..., profile=)``.
"""

from .file import NATIVE, Fit, LevelCoeff, Point, Tuning, TuningError, load_tuning
from .profile import MeasuredProfile, MeasuredTuner, measured_profile

__all__ = ["NATIVE", "Fit", "LevelCoeff", "Point", "Tuning", "TuningError", "load_tuning", "MeasuredProfile",
           "MeasuredTuner", "measured_profile"]
