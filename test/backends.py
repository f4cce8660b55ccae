"""The three backends as test rigs: :mod:`ct_controllers.sim.rigs`, the one rig builder the
tests and ``ct-bench backends`` share (imported here by the names the tests use)."""

from __future__ import annotations

from ct_controllers.sim.gains import SLOW_LOOP_GAINS
from ct_controllers.sim.rigs import BACKENDS, MODES, REAL_RATE, Rig, make_rig
from ct_controllers.sim.ros2_control_plant import PlantProcess

__all__ = ["BACKENDS", "MODES", "REAL_RATE", "SLOW_LOOP_GAINS", "PlantProcess", "Rig", "make_rig"]
