"""Tuning: measured times and a fitted cost model that make selection fit the machine it runs on.

``python -m pyhccl.bench <op> --algo all --tune FILE`` writes a tuning file; ``PYHCCL_TUNING_FILE``
or ``Communicator(..., tuning=FILE)`` makes selection use it (docs/tuning.md).
"""

from .file import NATIVE, Fit, LevelCoeff, Point, Tuning, TuningError, load_tuning

__all__ = ["NATIVE", "Fit", "LevelCoeff", "Point", "Tuning", "TuningError", "load_tuning"]
