"""Shared, cached building blocks for the plain-Python tests (not a conftest: imported by name).

Everything here is expensive enough to build once per session (xacro expansion, the Pinocchio
model) and is read-only for the tests that use it.
"""

from __future__ import annotations

import functools

import numpy as np

from ct_controllers.config import StackConfig, load_config
from ct_controllers.model.description import RobotDescription, load_description
from ct_controllers.model.robot import FloatArray, RobotModel


@functools.cache
def bundled_description(backend: str = "mujoco") -> RobotDescription:
    """The bundled ``urdf/ct_arm.urdf.xacro``, expanded once per backend."""
    return load_description(mappings={"backend": backend})


@functools.cache
def bundled_config() -> StackConfig:
    """The bundled ``config/controllers.yaml`` as it is (its MuJoCo mode may be paced)."""
    return load_config()


@functools.cache
def lockstep_config() -> StackConfig:
    """The bundled configuration with MuJoCo in lockstep: deterministic and faster than real
    time, so loop tests can run thousands of ticks in well under a second."""
    return load_config(overrides={"mujoco.mode": "lockstep"})


def new_robot_model() -> RobotModel:
    """A fresh RobotModel of the bundled arm (each owns its scratch ``pin.Data``)."""
    return RobotModel(bundled_description().urdf)


def home_by_name(config: StackConfig | None = None) -> dict[str, float]:
    """The home pose of controllers.yaml, joint name -> position [rad | m]."""
    config = config or bundled_config()
    return dict(zip(config.joint_names, config.home_positions, strict=True))


def random_configuration(model: RobotModel, rng: np.random.Generator) -> FloatArray:
    """A uniformly random q within the URDF position limits (model order)."""
    return rng.uniform(model.limits.lower, model.limits.upper)
