"""The three backends as rigs, for tests and ``ct-bench backends``: the whole stack built by
``build_stack`` for ``mujoco`` (lockstep), ``ros2_control_bridge`` (against the plant process
over loopback DDS) and ``canopen`` (against simulated drives on a virtual bus), each wrapped in
:class:`InjectingSystem` so the same sensor faults can be injected into all three, and each
able to say what its plant last applied and where its joints truly are, by joint name.

The real-drive backends run at ``REAL_RATE`` (pure-Python bus and DDS round trips) with the
slow-loop gains of :mod:`~ct_controllers.sim.gains`. The bridge's plant is a process of its own;
the simulated CiA 402 drives run in this process (tests reach into them) or, with
``drives_process=True``, in one of their own (:mod:`~ct_controllers.sim.drives_process`: the
benches, which measure the stack, not the GIL the drives' motor model takes). Their plants can
hold an object between the fingers (``object_width``; :mod:`~ct_controllers.sim.object_contact`),
so a grasp runs end to end on them; MuJoCo's scene has its own cube.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any

from ct_controllers.config import StackConfig, load_config
from ct_controllers.hardware import cia402
from ct_controllers.hardware.canopen.system import CanopenCia402System
from ct_controllers.hardware.mujoco_objects import ObjectSensor
from ct_controllers.hardware.mujoco_system import MujocoSystem
from ct_controllers.model.description import RobotDescription, load_description
from ct_controllers.model.payload import Payload
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.stack import Stack, build_stack
from ct_controllers.sim.drives import SimulatedDrives, simulated_drives_for
from ct_controllers.sim.drives_process import DrivesProcess, drives_process_for
from ct_controllers.sim.fault_injection import InjectingSystem
from ct_controllers.sim.gains import slow_loop_gains, with_drive_armature
from ct_controllers.sim.payload_plant import load_mujoco_scene
from ct_controllers.sim.ros2_control_plant import PlantProcess

BACKENDS = ("mujoco", "ros2_control_bridge", "canopen")
REAL_RATE = 100.0  # [Hz] for the real-drive backends (pure-Python bus and DDS round trips)
# Each backend's command interfaces: (backend, mode) → configuration overrides.
MODES: dict[tuple[str, str], dict[str, Any]] = {
    ("mujoco", "effort"): {},
    ("mujoco", "position"): {"mujoco.command_interfaces": ["position"]},
    ("ros2_control_bridge", "effort"): {},
    ("ros2_control_bridge", "position"): {"ros2_control_bridge.command_interface": "position"},
    ("canopen", "torque"): {},
    ("canopen", "position"): {"canopen.mode": "position"},
}
_unique = itertools.count()
# The plant rigs' runaway check (``watchdog.speed_limit_factor``, 2 by default): × 5. Their
# 100 Hz finger servo rings after an end stop or an impact at up to 0.6 m/s (3 × the URDF's
# 0.2 m/s) and settles; what the check is for there, an arm the loop's delay made unstable,
# ran at 9 × (the CANopen rig at 16 rad/s on an overloaded machine) and is still caught.
RIG_SPEED_LIMIT_FACTOR = 5.0


@dataclass
class Rig:
    """A backend's whole stack (``stack.hardware`` is the :class:`InjectingSystem`) and its
    plant."""

    backend: str
    config: StackConfig
    stack: Stack
    # PlantProcess | SimulatedDrives | DrivesProcess | None (MuJoCo is its own plant)
    plant: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def injector(self) -> InjectingSystem:
        assert isinstance(self.stack.hardware, InjectingSystem)
        return self.stack.hardware

    def applied(self) -> dict[str, float]:
        """Joint → the effort [N·m | N] the plant last took in."""
        if self.backend == "mujoco":
            inner = self.injector.inner
            assert isinstance(inner, MujocoSystem)
            report = inner.actuation_report()
            return dict(zip(report.joint_names, report.requested.tolist(), strict=True))
        if self.backend == "ros2_control_bridge":
            time.sleep(0.05)  # the last command crosses DDS
            return dict(self.plant.report()["last_command"])
        scalings = self._scalings()
        return {
            joint: scalings[joint].permille_to_effort(permille)
            for joint, permille in self.plant.last_target_torques().items()
        }

    def _scalings(self) -> dict[str, cia402.JointScaling]:
        inner = self.injector.inner
        assert isinstance(inner, CanopenCia402System)
        return {d.joint: d.scaling for d in inner.drives}

    def max_applied(self) -> dict[str, float]:
        """Joint → the largest |effort| the plant ever took in (MuJoCo: the last one)."""
        if self.backend == "ros2_control_bridge":
            return dict(self.plant.report()["max_command"])
        if self.backend == "canopen":
            scalings = self._scalings()
            return {
                joint: scalings[joint].permille_to_effort(permille)
                for joint, permille in self.plant.peak_target_torques().items()
            }
        return {k: abs(v) for k, v in self.applied().items()}

    def true_positions(self) -> dict[str, float]:
        """Joint → the plant's own position [rad | m], not through the backend's state path."""
        if self.backend == "mujoco":
            system = self.injector.inner
            assert isinstance(system, MujocoSystem)
            assert system.model is not None and system.data is not None
            with system.lock:
                return {
                    n: float(system.data.qpos[system.model.joint(n).qposadr[0]])
                    for n in system.joint_names
                }
        if self.backend == "ros2_control_bridge":
            return dict(self.plant.report()["position"])
        assert isinstance(self.plant, SimulatedDrives | DrivesProcess)
        return self.plant.positions()

    def place_object(self, width: float | None) -> None:
        """An object ``width`` [m] wide between the fingers of a plant rig from now on (None:
        none). MuJoCo's scene has its own cube: not here."""
        if isinstance(self.plant, PlantProcess):
            self.plant.place_object(width)
        elif isinstance(self.plant, SimulatedDrives | DrivesProcess):
            self.plant.place_object(width, self.config.gripper_joints, **_levers(self.stack))
        else:
            raise ValueError(f"the {self.backend} rig has no object model (its scene has a cube)")

    def contact_forces(self) -> dict[str, float]:
        """Finger → the normal force [N] between it and the object, as the plant knows it (the
        plant rigs: their contact model's, by finger joint; MuJoCo: its object sensor's, by the
        finger's body — a mimic follower's and a fixed jaw's too); empty without an object."""
        if isinstance(self.plant, PlantProcess):
            return dict(self.plant.report()["contact"])
        if isinstance(self.plant, SimulatedDrives | DrivesProcess):
            return self.plant.contact_forces()
        sensor = self.injector.inner.object_sensor()
        if sensor is None:
            return {}
        forces = sensor.observe().contact_forces
        if forces is None:
            return {}
        assert isinstance(sensor, ObjectSensor)  # MuJoCo's
        return dict(zip(sensor.finger_names, forces.tolist(), strict=True))

    def brought_up(self) -> Rig:
        """Configure and activate the stack; if that fails, close what was opened (the plant
        process, the simulated drives) and re-raise."""
        try:
            self.stack.bring_up()
        except Exception:
            self.close()
            raise
        return self

    def close(self) -> None:
        self.stack.shut_down()
        if isinstance(self.plant, SimulatedDrives | DrivesProcess):
            self.plant.close()
        elif isinstance(self.plant, PlantProcess):
            self.plant.stop()


def _levers(stack: Stack) -> dict[str, Any]:
    """The contact model's width frames: the stack's grip geometry's (configured or found), so
    that the plant's fingers meet the object through the levers the grasp works with (a
    revolute jaw's length); none without a geometry (prismatic fingers closed at 0)."""
    return {"width_frames": stack.grip.frames} if stack.grip is not None else {}


def _description(config_path: str | None, backend: str) -> RobotDescription:
    """The configured robot's description for ``backend`` (its xacro's ``backend`` argument)."""
    configured = load_config(config_path).robot_description
    return load_description(configured or None, mappings={"backend": backend})


def make_rig(
    backend: str,
    object_width: float | None = None,
    drives_process: bool = False,
    config_path: str | None = None,
    plant_payload: Payload | None = None,
    plant_effort_noise: float = 0.0,
    **overrides: Any,
) -> Rig:
    """The stack for ``backend``, configured and active (brought up), not yet ticking.
    ``object_width`` [m]: an object between the fingers of a plant rig (bridge, CANopen) from
    the start (None: none; :meth:`Rig.place_object` changes it); ``drives_process``: CANopen's
    simulated drives in a process of their own (:class:`DrivesProcess`) rather than this one;
    ``config_path``: the controllers.yaml (None: the bundled one), whose robot_description the
    rig builds; ``plant_payload``: a payload the plant's arm carries at the TCP (MuJoCo: composed
    into its TCP body; the bridge's plant process and CANopen's in-process drives: in their
    plant model; not for CANopen drives in a process of their own), which the stack's model
    does not know; ``plant_effort_noise`` [N·m | N]: σ of Gaussian noise on the bridge plant's
    published efforts; ``overrides``: configuration (e.g. a mode's, :data:`MODES`)."""
    if plant_payload is not None and backend == "canopen" and drives_process:
        raise ValueError("plant_payload: CANopen drives in a process of their own carry none")
    description = _description(config_path, backend)

    def modelled() -> RobotDescription:
        """A user's robot on a plant rig: the stack models the drives' rotor inertia the plant
        has (as the user's URDF would state it), as the rigs' gains are designed for it."""
        if config_path is None:
            return description
        return dataclasses.replace(description, urdf=with_drive_armature(description.urdf))

    def slow_gains() -> dict[str, Any]:  # the plant rigs' (a user's robot's: a design, seconds)
        return slow_loop_gains(load_config(config_path), config_path is None, REAL_RATE)

    if backend == "mujoco":
        if object_width is not None:
            raise ValueError("the MuJoCo rig's scene has its own cube; object_width is for plants")
        config = load_config(config_path, overrides={"mujoco.mode": "lockstep", **overrides})
        stack = build_stack(config, description, wrap_hardware=InjectingSystem)
        rig = Rig(backend, config, stack).brought_up()
        if plant_payload is not None:
            system: MujocoSystem = stack.hardware.inner  # type: ignore[attr-defined]
            assert system.model is not None
            with system.lock:
                load_mujoco_scene(system.model, config.tcp_frame, plant_payload)
        return rig
    if backend == "ros2_control_bridge":
        n = next(_unique)
        states = f"/ct_contract_{os.getpid()}_{n}/joint_states"
        commands = f"/ct_contract_{os.getpid()}_{n}/commands"
        config = load_config(
            config_path,
            overrides={
                "backend": backend,
                "hardware.armed": True,
                "update_rate": REAL_RATE,
                "watchdog.speed_limit_factor": RIG_SPEED_LIMIT_FACTOR,
                "ros2_control_bridge.joint_states_topic": states,
                "ros2_control_bridge.command_topic": commands,
                # Generous deadlines: two Python processes and DDS on a shared 2-core machine
                # pause for tens of ms now and then (once just over 100 ms in CI); the contract
                # bounds scale with these.
                "watchdog.state_timeout": 0.2,
                "watchdog.command_timeout": 0.2,
                **slow_gains(),
                **overrides,
            },
        )
        plant = PlantProcess(
            states,
            commands,
            list(config.joint_names),
            interface=config.section("ros2_control_bridge")["command_interface"],
            object_width=object_width,
            config_path=config_path,
            payload=plant_payload,
            effort_noise=plant_effort_noise,
        )
        stack = build_stack(config, modelled(), wrap_hardware=InjectingSystem)
        return Rig(backend, config, stack, plant).brought_up()
    if backend == "canopen":
        config = load_config(
            config_path,
            overrides={
                "backend": backend,
                "hardware.armed": True,
                "update_rate": REAL_RATE,
                "watchdog.speed_limit_factor": RIG_SPEED_LIMIT_FACTOR,
                "canopen.channel": f"ct_contract_can_{next(_unique)}",
                "canopen.heartbeat_timeout": 0.2,  # python-can's software timers: slack
                "canopen.master_heartbeat_timeout": 0.2,  # the drives watching us: the same
                # 20 periods, not the default 3, as the other rigs: the drives, the bus and the
                # loop share this process's GIL in pure Python, and a full test session stalls
                # them now and then (a 30 ms deadline was missed by 1.8 ms in CI, a 60 ms one by
                # 1.9 ms, 100 ms ones by 15 ms, and on a loaded machine the drives quick-stopped
                # on a lost master heartbeat at 100 ms); the contract bounds scale with it.
                "watchdog.state_timeout": 0.2,
                "watchdog.command_timeout": 0.2,
                "canopen.pdo_timeout": 0.2,
                "canopen.enable_timeout": 3.0,  # nine drives' SDO setup in one GIL: slack
                # Drives in this process run at normal scheduling, and so must the bus threads
                # (which take realtime.priority): a real-time thread waiting for the GIL behind
                # a normal one that other work preempted stalls for as long. Tests tick the loop
                # at normal scheduling too. Drives of their own: the loop's real-time default.
                **({} if drives_process else {"realtime.priority": 0}),
                **slow_gains(),
                **overrides,
            },
        )
        stack = build_stack(config, modelled(), wrap_hardware=InjectingSystem)
        inner = stack.hardware.inner  # type: ignore[attr-defined]
        home = dict(zip(config.joint_names, config.home_positions, strict=True))
        robot = RobotModel(
            description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame
        )
        drives: SimulatedDrives | DrivesProcess = (
            drives_process_for(inner, description.urdf, home)
            if drives_process
            else simulated_drives_for(inner, robot.with_payload(plant_payload), home)
        )
        if object_width is not None:
            drives.place_object(object_width, config.gripper_joints, **_levers(stack))
        return Rig(backend, config, stack, drives).brought_up()
    raise ValueError(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
