"""Selection: HCCL's rule selectors, A+B+C+D cost model, PYHCCL_ALGO override, tuner hook, measured profile."""

from .cost.model import CostResult, CostRow
from .override import Override, parse_override
from .profile import Profile
from .rules import NOT_MATCH
from .selection import MODES, Selection, SelectionError, check_settings, normalize_op, select, select_for
from .tuner import Tuner, TunerCommInfo, TunerEntry, load_tuner

__all__ = ["select", "select_for", "check_settings", "Selection", "SelectionError", "MODES", "NOT_MATCH",
           "normalize_op", "CostResult", "CostRow", "Override", "parse_override", "Tuner", "TunerCommInfo",
           "TunerEntry", "load_tuner", "Profile"]
