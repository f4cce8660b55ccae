"""Are a controller's gains stable at the loop's rate? Gains are rate-dependent: each
controller's feedback linearized at a configuration (:meth:`Controller.linear_feedback`) and the
plant's M(q) make a sampled loop whose spectral radius
(:func:`~ct_controllers.controllers.controller.sampled_loop_radius`) says whether motions there
decay (< 1) or grow (> 1; against the torque rate limit: a chattering joint).

Checked at ``home_positions`` and ``SAMPLES`` random configurations within the joint limits,
one joint at zero in each (where joint axes line up and a mode can have almost no inertia). A
loop over a bus or ROS topics has a period of delay between a measurement and the torque it
produces; MuJoCo, which steps after the write, none. The plant is the model (URDF inertia,
armature and the joints' viscous damping, ``<dynamics damping>``, which acts continuously, not
through the sampled torque): real drives with more rotor inertia than the URDF says are safer
than this; drives with less damping than the URDF declares are less safe (the URDF's word is
taken: it is what MuJoCo simulates). Dry friction (``<dynamics friction>``) is left out: it
only removes energy.

A :class:`GainStability` owns copies of the models it evaluates, so it can run on any thread
beside the control loop (Pinocchio's scratch data is not shared). How a live gain set is judged
with it (the whole resulting state, joints without feedback, the way back to the configured
gains, gains far above them) is :mod:`ct_controllers.runtime.gain_checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ct_controllers.controllers.controller import (
    Controller,
    FloatArray,
    sampled_loop_radius,
    sampled_plant,
)
from ct_controllers.model.robot import RobotModel

SAMPLES = 24  # random configurations checked besides home


@dataclass(frozen=True)
class Stability:
    """The largest spectral radius found and the configuration q [rad | m] (model order)
    where it was found; ``stable`` when it does not exceed 1 (+1e-6: a joint without stiffness
    leaves an integrator at exactly 1)."""

    radius: float
    at: FloatArray

    @property
    def stable(self) -> bool:
        return self.radius <= 1.0 + 1e-6

    def describe(self) -> str:
        values = ", ".join(f"{value:.2f}" for value in self.at)
        return f"spectral radius {self.radius:.3f} at q = [{values}] [rad | m]"


class GainStability:
    """The stability of one controller's gains (or of a fixed (K, D) pair such as the safe
    hold's damping) at ``period`` [s] with ``delay`` periods of delay, over ``configurations``
    (model order)."""

    def __init__(
        self,
        plant: RobotModel,
        feedback: Controller | tuple[FloatArray, FloatArray],
        configurations: list[FloatArray],
        period: float,
        delay: int,
    ) -> None:
        # Own scratch data (the models, read-only, shared; their frames kept): any thread may
        # evaluate.
        self.plant = plant.with_own_data()
        self.feedback = feedback
        own_model = getattr(feedback, "model", None)  # a controller's own (it may differ)
        self.controller_model = own_model.with_own_data() if own_model is not None else None
        self.configurations = [np.array(q, dtype=np.float64) for q in configurations]
        self.masses = [self.plant.mass_matrix(q) for q in self.configurations]
        self.period = period
        self.delay = delay
        # The plant over a period at each configuration (the same for every gain checked).
        self.plants = [sampled_plant(m, period, self.plant.joint_damping) for m in self.masses]

    def feedback_at(
        self, q: FloatArray, gains: Mapping[str, FloatArray] | None = None
    ) -> tuple[FloatArray, FloatArray] | None:
        """(K, D), nv × nv, of the feedback at ``q`` [rad | m] with ``gains`` (model order)
        replacing the controller's current ones where given; None without joint feedback."""
        if isinstance(self.feedback, Controller):
            return self.feedback.linear_feedback(q, gains, self.controller_model)
        return self.feedback

    def _radius(
        self,
        q: FloatArray,
        mass: FloatArray,
        gains: Mapping[str, FloatArray] | None,
        plant: tuple[FloatArray, FloatArray] | None = None,
    ) -> float | None:
        matrices = self.feedback_at(q, gains)
        if matrices is None:
            return None
        return sampled_loop_radius(
            mass,
            matrices[0],
            matrices[1],
            self.period,
            self.delay,
            self.plant.joint_damping,
            plant,
        )

    def worst(self, gains: Mapping[str, FloatArray] | None = None) -> Stability | None:
        """Over the configurations, with ``gains`` (model order) replacing the controller's
        current ones where given; None for a controller without joint feedback."""
        found: Stability | None = None
        for q, mass, plant in zip(self.configurations, self.masses, self.plants, strict=True):
            radius = self._radius(q, mass, gains, plant)
            if radius is None:
                return None
            if found is None or radius > found.radius:
                found = Stability(radius, q)
        return found

    def at(self, q: FloatArray, gains: Mapping[str, FloatArray] | None = None) -> Stability | None:
        """At one configuration ``q`` [rad | m] (model order), e.g. the measured one."""
        for i, checked in enumerate(self.configurations):
            if checked is q:  # one of the checked ones (a Stability's): its plant is known
                radius = self._radius(q, self.masses[i], gains, self.plants[i])
                return None if radius is None else Stability(radius, checked)
        q = np.array(q, dtype=np.float64)
        radius = self._radius(q, self.plant.mass_matrix(q), gains)
        return None if radius is None else Stability(radius, q)


def check_configurations(model: RobotModel, home: FloatArray) -> list[FloatArray]:
    """``home`` and ``SAMPLES`` random configurations (seeded: the same every start) within the
    joint limits (a continuous joint, which has none: within one turn, [−π, π]), joint
    ``i mod nv`` of the i-th at zero (or its nearest limit)."""
    rng = np.random.default_rng(0)
    limits = model.limits
    lower = np.where(np.isfinite(limits.lower), limits.lower, -np.pi)
    upper = np.where(np.isfinite(limits.upper), limits.upper, np.pi)
    configurations = [np.array(home, dtype=np.float64)]
    for i in range(SAMPLES):
        q = rng.uniform(lower, upper)
        joint = i % model.nv
        q[joint] = min(max(0.0, lower[joint]), upper[joint])
        configurations.append(q)
    return configurations
