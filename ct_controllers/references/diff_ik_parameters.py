"""The parameters of the differential-IK generators (DLS and QP), validated on construction: a
parameter set is a value (read-only arrays), staged and applied at a tick boundary by
:class:`~ct_controllers.references.diff_ik_base.DifferentialIkBase`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ct_controllers.errors import GainError
from ct_controllers.types import FloatArray

MANIPULABILITY = "manipulability"
CONDITION_NUMBER = "condition_number"
SINGULARITY_MEASURES = (MANIPULABILITY, CONDITION_NUMBER)
ZERO = "zero"
FINITE_DIFFERENCE = "finite_difference"
ACCELERATIONS = (ZERO, FINITE_DIFFERENCE)


# [rad | m] what the QP keeps q* from each joint limit unless configured otherwise
DEFAULT_POSITION_MARGIN = 0.05


@dataclass(frozen=True)
class DiffIkParameters:
    """Parameters of the differential-IK generators; validated on construction
    (:class:`GainError` naming the parameter). Per-joint values are in the generator's
    ``joint_names`` order (or name → value maps, through
    :meth:`DifferentialIkBase.parameters_for`).

    damping               λ_min [m | -]  DLS damping far from singularities (> 0)
    max_damping           λ_max [m | -]  damping at a singularity (≥ λ_min)
    singularity_measure   "manipulability" (∏σᵢ) or "condition_number" (σ_max/σ_min), of the
                          active rows of J (unweighted)
    singularity_threshold s₀: manipulability below which damping rises [m³ for the full 6-row
                          task with 1 m ≡ 1 rad], or the condition number above which it does [-]
    task_weights          (6,) [-] weights of (x, y, z, rx, ry, rz) in base axes; 0 removes the
                          axis; at least one > 0
    bandwidth             B (n,) [1/s] per-joint gain of the task correction, > 0
    posture               (n,) [rad | m] preferred configuration; None: the measured one at the
                          first tick (or reset)
    posture_weight        w_p [-] ≥ 0: the posture displacement q_post − q*, projected on the
                          nullspace of J_w, is added to the task correction with this weight
                          (before B); the QP uses it as the target of a nullspace-only
                          regularization (see the QP module)
    max_linear_velocity   [m/s]   bound on the commanded TCP speed
    max_angular_velocity  [rad/s] bound on the commanded TCP angular speed
    velocity_scale        (0, 1]  fraction of the URDF joint velocity limits that v* may use
    position_margin       [rad | m] ≥ 0: the QP keeps q* in [lower + margin, upper − margin];
                          the DLS does not enforce position limits (use the QP where they matter)
    position_tolerance    [m]   status: converged when ‖p* − p(q*)‖ ≤ this ...
    orientation_tolerance [rad] ... and ‖log3(R* R(q*)ᵀ)‖ ≤ this
    resync_threshold      [rad | m] q* is reset to the measured q when they differ by more on
                          some controlled joint (None: never)
    acceleration          "zero" or "finite_difference" for a*
    """

    bandwidth: FloatArray
    damping: float = 1e-3
    max_damping: float = 0.05
    singularity_measure: str = MANIPULABILITY
    singularity_threshold: float = 0.01
    task_weights: FloatArray = field(default_factory=lambda: np.ones(6))
    posture: FloatArray | None = None
    posture_weight: float = 0.05
    max_linear_velocity: float = 0.25
    max_angular_velocity: float = 1.0
    velocity_scale: float = 1.0
    position_margin: float = DEFAULT_POSITION_MARGIN
    position_tolerance: float = 1e-4
    orientation_tolerance: float = 1e-3
    resync_threshold: float | None = 0.2
    acceleration: str = ZERO

    def __post_init__(self) -> None:
        def positive(name: str, value: float, allow_zero: bool = False) -> float:
            number = float(value)
            if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
                bound = "≥ 0" if allow_zero else "> 0"
                raise GainError(f"{name}: must be finite and {bound}, got {value!r}")
            return number

        positive("damping", self.damping)
        if positive("max_damping", self.max_damping) < self.damping:
            raise GainError(
                f"max_damping: must be ≥ damping ({self.damping}), got {self.max_damping}"
            )
        if self.singularity_measure not in SINGULARITY_MEASURES:
            raise GainError(
                f"singularity_measure: '{self.singularity_measure}' is not one of "
                f"{', '.join(SINGULARITY_MEASURES)}"
            )
        threshold = positive("singularity_threshold", self.singularity_threshold)
        if self.singularity_measure == CONDITION_NUMBER and threshold < 1:
            raise GainError(f"singularity_threshold: a condition number is ≥ 1, got {threshold}")
        weights = np.array(self.task_weights, dtype=np.float64).reshape(-1)
        if weights.size != 6 or not np.isfinite(weights).all() or (weights < 0).any():
            raise GainError(f"task_weights: expected 6 finite values ≥ 0, got {weights.tolist()}")
        if not (weights > 0).any():
            raise GainError("task_weights: at least one axis must have a weight > 0")
        object.__setattr__(self, "task_weights", weights)
        bandwidth = np.array(self.bandwidth, dtype=np.float64).reshape(-1)
        if not np.isfinite(bandwidth).all() or (bandwidth <= 0).any():
            raise GainError(f"bandwidth: values must be finite and > 0, got {bandwidth.tolist()}")
        object.__setattr__(self, "bandwidth", bandwidth)
        if self.posture is not None:
            posture = np.array(self.posture, dtype=np.float64).reshape(-1)
            if posture.size != bandwidth.size or not np.isfinite(posture).all():
                raise GainError(
                    f"posture: expected {bandwidth.size} finite values, got {posture.tolist()}"
                )
            object.__setattr__(self, "posture", posture)
        # Read-only arrays: a parameter set is a value (caches rely on it).
        for array in (self.task_weights, self.bandwidth, self.posture):
            if array is not None:
                array.setflags(write=False)
        positive("posture_weight", self.posture_weight, allow_zero=True)
        positive("max_linear_velocity", self.max_linear_velocity)
        positive("max_angular_velocity", self.max_angular_velocity)
        if not (0 < self.velocity_scale <= 1):
            raise GainError(f"velocity_scale: must be in (0, 1], got {self.velocity_scale}")
        positive("position_margin", self.position_margin, allow_zero=True)
        positive("position_tolerance", self.position_tolerance)
        positive("orientation_tolerance", self.orientation_tolerance)
        if self.resync_threshold is not None:
            positive("resync_threshold", self.resync_threshold)
        if self.acceleration not in ACCELERATIONS:
            raise GainError(
                f"acceleration: '{self.acceleration}' is not one of {', '.join(ACCELERATIONS)}"
            )
