"""Shared, cached building blocks for the plain-Python tests (not a conftest: imported by name).

Everything here is expensive enough to build once per session (xacro expansion, the Pinocchio
model) and is read-only for the tests that use it.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from ct_controllers.config import StackConfig, load_config
from ct_controllers.controllers.controller import Controller, JointReference, JointState
from ct_controllers.model.description import RobotDescription, load_description
from ct_controllers.model.robot import FloatArray, RobotModel

ARM = tuple(f"joint{i}" for i in range(1, 8))  # the bundled arm's joints


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
    """A fresh RobotModel of the bundled arm (each owns its scratch ``pin.Data``), with the
    bundled configuration's TCP and base frames."""
    config = bundled_config()
    return RobotModel(bundled_description().urdf, config.tcp_frame, config.base_frame)


def home_by_name(config: StackConfig | None = None) -> dict[str, float]:
    """The home pose of controllers.yaml, joint name -> position [rad | m]."""
    config = config or bundled_config()
    return dict(zip(config.joint_names, config.home_positions, strict=True))


def home_configuration(model: RobotModel) -> FloatArray:
    """The bundled home_positions as a configuration of ``model`` (model order)."""
    q = model.neutral()
    for name, value in home_by_name().items():
        q[model.q_index(name)] = value
    return q


def random_configuration(model: RobotModel, rng: np.random.Generator) -> FloatArray:
    """A uniformly random q within the URDF position limits (model order)."""
    return rng.uniform(model.limits.lower, model.limits.upper)


def reference_sensitivity(
    controller: Controller, state: JointState, dt: float = 1e-3, step: float = 1e-6
) -> tuple[FloatArray, FloatArray]:
    """(∂τ/∂q*, ∂τ/∂v*) of ``controller.compute`` at ``state``, by central differences about the
    reference q* = state.q, v* = 0, a* = 0: the controller's feedback gains as the plant sees
    them, computed from its output only."""
    n = state.q.size
    zero = np.zeros(n)
    by_q, by_v = np.empty((n, n)), np.empty((n, n))
    for j in range(n):
        delta = np.zeros(n)
        delta[j] = step
        for out, (plus, minus) in (
            (by_q, ((delta, zero), (-delta, zero))),
            (by_v, ((zero, delta), (zero, -delta))),
        ):
            upper = controller.compute(
                state, JointReference(q=state.q + plus[0], v=plus[1], a=zero), dt
            )
            lower = controller.compute(
                state, JointReference(q=state.q + minus[0], v=minus[1], a=zero), dt
            )
            out[:, j] = (upper - lower) / (2 * step)
    return by_q, by_v


def cube_distances(
    config: StackConfig,
    description: RobotDescription,
    configurations: list[dict[str, float]],
) -> list[tuple[float, str]]:
    """MuJoCo's own distance [m] (``mj_geomDistance``, signed: negative inside) from the robot
    to the cube, and the robot body nearest it, for each of ``configurations`` (joint name →
    position; the joints not named at home) in the scene the MuJoCo backend builds for
    ``config`` (``MujocoSystem.from_config``), the cube where it starts: computed here, not by
    the stack's clearance check."""
    import mujoco

    from ct_controllers.hardware.mujoco_scene import CUBE_BODY
    from ct_controllers.hardware.mujoco_system import MujocoSystem

    model = MujocoSystem.from_config(description, config).scene_spec().compile()
    data = mujoco.MjData(model)
    cube = model.body(CUBE_BODY).id
    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == cube]
    robot = [g for g in range(model.ngeom) if model.geom_bodyid[g] not in (0, cube)]
    found = []
    for positions in configurations:
        mujoco.mj_resetData(model, data)
        for name, value in {**home_by_name(config), **positions}.items():
            data.qpos[model.joint(name).qposadr[0]] = value
        mujoco.mj_forward(model, data)
        distance, nearest = min(
            (mujoco.mj_geomDistance(model, data, r, c, 1.0, None), r) for r in robot for c in geoms
        )
        found.append((distance, model.body(model.geom_bodyid[nearest]).name))
    return found


def continuous_wrist(urdf: str) -> str:
    """The UR5's URDF text with wrist_3_joint made continuous (its position limits dropped, its
    effort and velocity limits kept)."""
    pattern = re.compile(
        r'(<joint name="wrist_3_joint" type=")revolute(">.*?<limit[^>]*?)'
        r' lower="[^"]*" upper="[^"]*"',
        re.S,
    )
    edited, count = pattern.subn(r"\1continuous\2", urdf)
    assert count == 1
    return edited
