"""The rigs' gains: what the stack runs with on the plants that close their loop at 100 Hz (the
ros2_control bridge's plant process, the simulated CiA 402 drives), for tests and benches.

The bundled arm keeps :data:`SLOW_LOOP_GAINS`. A user's configuration gets its gains designed
again, by ct-setup's own design (:func:`~ct_controllers.setup_assistant.gains.design_gains`), at
the rig's rate: a fixed scale of gains designed for 1 kHz is not stable on every arm at 100 Hz
with a period of delay (a one-jaw gripper variant of the bundled arm: joint impedance ×0.25 at
radius 1.12, the safe hold ×0.5 at 1.53), a design at the rate is, with a gain margin of 2.

The design is of the arm the plant rigs simulate: the URDF with their drives' reflected rotor
inertia as armature (:func:`with_drive_armature`), as a user gives a real arm's drives in
``<dynamics armature>``; the rigs' stack models that arm too (:func:`ct_controllers.sim.rigs.
make_rig`), so its own gain check at bring-up agrees. Designed on the bare URDF, a robot of
gram-light links (the SO-101: rotors 40× its links) got gains its drives' friction overwhelmed:
joint motions ended 0.107 rad short on both plant rigs.

The finger servo's gains (``gripper.stiffness``, ``gripper.damping``) are designed at the rig's
rate for every arm, the bundled one included (:func:`~ct_controllers.controllers.gripper.
sampled_finger_gains` on the finger's mass with the drive's rotor, and the drive's viscous
friction): the configured ones are
for 1 kHz, and at 100 Hz with a period of delay they rang — the bundled fingers (1.05 kg with
the rotor) swung ±2 cm at ±40 N on the simulated drives, the SO-101's jaw (133 g at its tip)
at 50-60 rad/s between its end stop and the object.
"""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from ct_controllers.config import StackConfig
from ct_controllers.controllers.gripper import GripperController, sampled_finger_gains
from ct_controllers.model.description import load_description
from ct_controllers.model.grip_geometry import gripper_geometry
from ct_controllers.model.robot import RobotModel
from ct_controllers.setup_assistant.chain import discover_chain
from ct_controllers.setup_assistant.design_model import design_model
from ct_controllers.setup_assistant.gains import COMPUTED_TORQUE, JOINT_IMPEDANCE, design_gains
from ct_controllers.setup_assistant.urdf_tree import parse_robot
from ct_controllers.sim.drives import drive_friction, rotor_inertia

# Gains for the 100 Hz backends. The bundled ones are tuned for 1 kHz; at 100 Hz with a period
# of delay from measurement to applied effort (a bus cycle, a DDS round trip) the impedance's
# and the safe hold's sampled loops grow (spectral radius 1.94 and 1.19: start-up warns). A
# quarter of the impedance gains and half the hold damping keep both at or below 1.
SLOW_LOOP_GAINS = {
    "joint_impedance.stiffness": [150.0, 150.0, 75.0, 75.0, 25.0, 25.0, 12.5, 25.0, 25.0],
    "joint_impedance.damping": [12.5, 12.5, 6.25, 6.25, 1.5, 1.5, 0.75, 1.0, 1.0],
    "safe_hold.damping": [10.0, 10.0, 5.0, 5.0, 2.0, 2.0, 1.0, 2.0, 2.0],
}

# Cartesian impedance's for the same rigs (its constructor's keywords): stable there by the
# sampled-loop check with a period of delay (radius 0.993 at worst), where its 1 kHz defaults
# are not (1.038).
SLOW_LOOP_CARTESIAN_IMPEDANCE = {
    "stiffness": (200.0, 200.0, 200.0, 10.0, 10.0, 10.0),  # [N/m ×3, N·m/rad ×3]
    "nullspace_damping": 1.0,  # [N·m·s/rad]
    "finger_stiffness": 20.0,  # [N/m]
    "finger_damping": 1.0,  # [N·s/m]
}


def slow_loop_gains(config: StackConfig, bundled: bool, rate: float) -> dict[str, Any]:
    """The ``rate`` [Hz] rigs' gain overrides for ``config``: :data:`SLOW_LOOP_GAINS` on the
    bundled arm (``bundled``), else ct-setup's design for the configured robot at ``rate``:
    every controller instance of the configuration that the design covers, the safe hold's
    damping and the default controller (the design's choice at that rate); and for both, the
    finger servo's gains at that rate (module docstring)."""
    finger = dict(
        _finger_servo(
            config.robot_description,
            config.backend,
            config.tcp_frame,
            config.base_frame,
            config.gripper_joints,
            config.grip_width_frames,
            config.gripper_stiffness,
            config.gripper_damping,
            float(rate),
        )
    )
    if bundled:
        return dict(SLOW_LOOP_GAINS) | finger
    return finger | dict(
        _designed(
            config.robot_description,
            config.backend,
            config.tcp_frame,
            config.base_frame,
            config.arm_joints,
            config.gripper_joints,
            tuple(config.home_positions),
            float(rate),
            frozenset(config.controllers),
        )
    )


def with_drive_armature(urdf: str) -> str:
    """``urdf`` with every driven joint's ``<dynamics armature>`` [kg·m² | kg] the URDF's plus
    the plant rigs' drives' reflected rotor inertia (:func:`~ct_controllers.sim.drives.
    rotor_inertia`): the arm those rigs simulate."""
    model = RobotModel(urdf)
    rotor = rotor_inertia(model)
    root = ET.fromstring(urdf)
    for joint in root.findall("joint"):
        name = joint.get("name", "")
        if name not in model.joint_names:
            continue  # fixed, or a mimic follower (carried by its master's)
        index = model.v_index(name)
        dynamics = joint.find("dynamics")
        if dynamics is None:
            dynamics = ET.SubElement(joint, "dynamics")
        dynamics.set("armature", repr(float(model.model.armature[index] + rotor[index])))
        if dynamics.get("damping") is None and dynamics.get("friction") is None:
            dynamics.set("damping", "0")  # urdfdom refuses a <dynamics> with neither
    return ET.tostring(root, encoding="unicode")


@functools.lru_cache(maxsize=8)
def _finger_servo(
    description: str,
    backend: str,
    tcp: str,
    base: str,
    gripper: tuple[str, ...],
    width_frames: tuple[str, ...],
    stiffness: float,
    damping: float,
    rate: float,
) -> tuple[tuple[str, float], ...]:
    """``gripper.stiffness`` and ``gripper.damping`` for the rigs' arm (the configured ones
    lowered where its lightest finger, rotor and drive friction included, needs it at
    ``rate``); () without a gripper."""
    if not gripper:
        return ()
    urdf = load_description(description or None, mappings={"backend": backend}).urdf
    model = RobotModel(with_drive_armature(urdf), tcp_frame=tcp, base_frame=base)
    grip = gripper_geometry(model, gripper, width_frames)
    servo = GripperController(model, gripper, levers=None if grip is None else grip.levers)
    # The drives' viscous friction counted (the plant's, as its rotor).
    mass, friction = servo.lightest_finger(drive_friction(RobotModel(urdf)))
    found = sampled_finger_gains(stiffness, damping, mass, 1.0 / rate, friction)
    return (("gripper.stiffness", float(found[0])), ("gripper.damping", float(found[1])))


@functools.lru_cache(maxsize=8)  # a design costs seconds; rigs of one robot share it
def _designed(
    description: str,
    backend: str,
    tcp: str,
    base: str,
    arm: tuple[str, ...],
    gripper: tuple[str, ...],
    home: tuple[float, ...],
    rate: float,
    instances: frozenset[str],
) -> tuple[tuple[str, Any], ...]:
    # The robot as the stack reads it: its locked joints fixed (ct-setup's tree is the same).
    urdf = load_description(description, mappings={"backend": backend}).urdf
    tree = parse_robot(with_drive_armature(urdf), Path(description))
    chain = discover_chain(tree, tcp=tcp, base=base, gripper=list(gripper))
    design = design_model(tree, chain)
    model = design.model
    names = arm + gripper
    order = np.array([model.v_index(name) for name in names], dtype=np.intp)
    at_home = np.empty(model.nv)
    at_home[order] = home
    gains = design_gains(design, at_home, rate)

    def listed(values: np.ndarray) -> list[float]:
        return [float(v) for v in np.asarray(values)[order]]

    found: dict[str, Any] = {"safe_hold.damping": listed(gains.hold_damping)}
    designed = {
        JOINT_IMPEDANCE: {
            "stiffness": gains.stiffness,
            "damping": gains.damping,
            "friction_stiffness": gains.friction_stiffness,
        },
        COMPUTED_TORQUE: {
            "kp": gains.kp,
            "kd": gains.kd,
            "friction_stiffness": gains.ct_friction_stiffness,
        },
    }
    for instance, values in designed.items():
        if instance in instances:
            found.update({f"{instance}.{k}": listed(v) for k, v in values.items()})
    if gains.default_controller in instances:
        found["default_controller"] = gains.default_controller
    return tuple(found.items())
