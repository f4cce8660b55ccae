"""Our arm in MuJoCo carrying a known payload: the independent truth of payload identification.

The scene is the backend's (:func:`~ct_controllers.hardware.mujoco_scene.build_scene`, no table
or cube, every joint on a torque motor) plus one body fixed to the body that carries the TCP
site, of the payload's mass, at its centre of mass c (TCP frame) — MuJoCo's own composition of
the loaded link, not Pinocchio's. Measured effort is the generalized actuator force
(``qfrc_actuator``), as the MuJoCo backend measures it.

:func:`static_holds` holds the arm still at each of a list of configurations with PD + the
*unloaded* model's gravity (so the payload makes it sag a little: the holds are measured where the
arm settles, not where it was sent) and averages what the joints measured over the end of each
hold: what a hold in the grasp's HOLD phase gives the identification.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from ct_controllers.hardware.mujoco_scene import build_scene, compile_scene, compose_payload
from ct_controllers.model.description import RobotDescription
from ct_controllers.model.payload import Payload
from ct_controllers.model.robot import RobotModel
from ct_controllers.sim.plants import Plant
from ct_controllers.types import FloatArray

PAYLOAD_BODY = "payload"
# [kg·m²] a point payload's rotational inertia in MuJoCo (it needs one > 0).
POINT_INERTIA = 1e-7


def attach_payload(spec: mujoco.MjSpec, tcp_frame: str, payload: Payload) -> None:
    """A body :data:`PAYLOAD_BODY` fixed to the TCP site's body, its centre of mass at the
    payload's c (TCP frame), its mass and inertia the payload's (about c, in TCP axes)."""
    site = spec.site(tcp_frame)
    if site is None:
        raise ValueError(f"the scene has no TCP site '{tcp_frame}'")
    flat = np.zeros(9)
    mujoco.mju_quat2Mat(flat, np.array(site.quat, dtype=np.float64))
    rotation = flat.reshape(3, 3)
    body = site.parent.add_body(name=PAYLOAD_BODY)
    body.pos = np.array(site.pos) + rotation @ payload.com
    body.quat = np.array(site.quat)  # body axes = TCP axes
    body.ipos = np.zeros(3)  # the centre of mass at the body's origin (set, not defaulted)
    body.mass = payload.mass
    inertia = np.eye(3) * POINT_INERTIA if payload.inertia is None else payload.inertia
    body.fullinertia = [
        inertia[0, 0],
        inertia[1, 1],
        inertia[2, 2],
        inertia[0, 1],
        inertia[0, 2],
        inertia[1, 2],
    ]
    body.explicitinertial = True
    # Kept a body of its own (MuJoCo never fuses a body an exclude names; the pair is rigidly
    # joined, so the exclude changes no contact): its pose and mass stay readable by name.
    spec.add_exclude(bodyname1=site.parent.name, bodyname2=PAYLOAD_BODY)


class PayloadPlant(Plant):
    """The arm with ``payload`` at the TCP (None: none) in MuJoCo, torque on every joint,
    vectors in ``robot``'s joint order (addressed by name), timestep ``dt`` [s]."""

    def __init__(
        self,
        description: RobotDescription,
        robot: RobotModel,
        payload: Payload | None,
        dt: float = 0.001,
    ) -> None:
        if robot.tcp_frame is None:
            raise ValueError("the payload plant needs a robot model with a TCP frame")
        source = Path(description.source)
        spec = build_scene(
            description.urdf,
            timestep=dt,
            tcp_frame=robot.tcp_frame,
            with_objects=False,
            urdf_directory=source.parent if source.is_file() else None,
        )
        if payload is not None:
            attach_payload(spec, robot.tcp_frame, payload)
        self.model = compile_scene(spec)
        self.data = mujoco.MjData(self.model)
        self.robot, self.dt, self.payload = robot, dt, payload
        names = robot.joint_names
        joints = [self.model.joint(name) for name in names]
        self._qpos = np.array([int(j.qposadr[0]) for j in joints])
        self._dof = np.array([int(j.dofadr[0]) for j in joints])
        self._ctrl = np.array([self.model.actuator(name).id for name in names])

    def reset(self, q: FloatArray, v: FloatArray) -> None:
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self._qpos] = q
        self.data.qvel[self._dof] = v
        mujoco.mj_forward(self.model, self.data)

    def state(self) -> tuple[FloatArray, FloatArray]:
        return self.data.qpos[self._qpos].copy(), self.data.qvel[self._dof].copy()

    def effort(self) -> FloatArray:
        """What the joints measure [N·m | N]: the generalized actuator force."""
        return self.data.qfrc_actuator[self._dof].copy()

    def step(self, tau: FloatArray) -> None:
        self.data.ctrl[self._ctrl] = tau
        mujoco.mj_step(self.model, self.data)

    def unstable(self) -> bool:
        return not (np.all(np.isfinite(self.data.qpos)) and np.all(np.isfinite(self.data.qvel)))


@dataclass(frozen=True)
class Holds:
    """Measured at the end of each hold (averaged over its last ``average`` seconds): q [rad |
    m], v [rad/s | m/s], effort [N·m | N], one row per configuration, model order."""

    q: FloatArray
    v: FloatArray
    effort: FloatArray


def static_holds(
    plant: PayloadPlant,
    configurations: Sequence[FloatArray],
    stiffness: FloatArray,
    damping: FloatArray,
    settle: float = 1.0,
    average: float = 0.2,
) -> Holds:
    """Hold at each configuration (started there at rest) for ``settle`` + ``average`` [s] with
    τ = K (q* − q) − D q̇ + g₀(q) (K [N·m/rad | N/m], D [N·m·s/rad | N·s/m] per joint, g₀ the
    plant robot's unloaded model), and average q, v and the measured effort over the last
    ``average`` seconds."""
    robot = plant.robot.with_payload(None)
    settle_steps = round(settle / plant.dt)
    average_steps = max(1, round(average / plant.dt))
    rows: list[tuple[FloatArray, FloatArray, FloatArray]] = []
    for target in configurations:
        target = np.asarray(target, dtype=np.float64)
        plant.reset(target, np.zeros_like(target))
        sums = [np.zeros_like(target) for _ in range(3)]
        for k in range(settle_steps + average_steps):
            q, v = plant.state()
            plant.step(stiffness * (target - q) - damping * v + robot.gravity(q))
            if k >= settle_steps:
                q, v = plant.state()
                for total, value in zip(sums, (q, v, plant.effort()), strict=True):
                    total += value
        rows.append(tuple(total / average_steps for total in sums))  # type: ignore[arg-type]
    q, v, effort = (np.array(column) for column in zip(*rows, strict=True))
    return Holds(q, v, effort)


def load_mujoco_scene(model: mujoco.MjModel, tcp_frame: str, payload: Payload) -> None:
    """Add ``payload`` to a compiled scene: :func:`~ct_controllers.hardware.mujoco_scene.
    compose_payload` (kept under this name for the benches and tests that use it)."""
    compose_payload(model, tcp_frame, payload)
