"""A stand-in for a running ros2_control stack, as a separate ROS process: a small plant
simulation (the arm's rigid-body model with rotor inertia, friction and brakes, from
:mod:`ct_controllers.sim.drives`) that publishes ``sensor_msgs/JointState`` like a
joint_state_broadcaster and applies ``std_msgs/Float64MultiArray`` commands like a
forward_command_controller (the last command holds until the next; brakes hold the arm until the
first one arrives): efforts [N·m | N] (``--interface effort``) or position targets [rad | m]
(``--interface position``), which a drive's position loop servoes at every sub-step of the motor
model, PD plus the gravity feed-forward, like the simulated CiA 402 drives' CSP servo
(:data:`~ct_controllers.sim.drives.SERVO_BANDWIDTH`, torque limited to the URDF effort
limit); the published effort is what the motors apply, as a drive reports it.

With ``--object-width W`` [m] an object sits between the fingers (``--contact-stiffness``
[N/m], ``--contact-damping`` [N·s/m]; :mod:`~ct_controllers.sim.object_contact`, the model
the simulated CiA 402 drives use too): the fingers close on it and a grasp runs end to end.
The published finger effort stays the motor's (the command, or the servo's torque), not the
contact force; ``report`` gives the contact forces separately.

With ``--payload M CX CY CZ`` the plant's arm carries M [kg] at (CX, CY, CZ) [m] in the TCP
frame (its model is the configuration's robot with that payload at ``tcp_frame``), which the
stack's model does not know; ``--effort-noise S`` adds Gaussian noise of σ = S [N·m | N] to each
published effort (a torque sensor's).

``python -m ct_controllers.sim.ros2_control_plant [--config FILE] [--rate HZ]
[--order j1,j2,...] [--interface effort|position] [--object-width W]``: the robot, its joints,
home and the bridge's command order come from the configuration FILE (default: the bundled
``config/controllers.yaml``) and the robot description it names.

Lines on standard input change its behaviour, for fault injection: ``nan`` (positions NaN),
``unknown`` (one joint renamed), ``shuffle`` (joints published in reverse order), ``unstamped``
(zero stamps), ``no_effort`` (an empty effort field, as for hardware without effort state
interfaces), ``ok`` (back to normal), ``object W`` / ``object none`` (an object W [m] wide
between the fingers from now on, or none), ``report`` (one JSON line on standard output: true
positions and velocities by name, commands received, non-finite or malformed commands, the
largest |command| per joint, the fingers' contact forces, when the mode last changed), ``quit``.
Stalling is done from outside (SIGSTOP/SIGCONT).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from ct_controllers.ros.dds import ensure_loopback_dds

ensure_loopback_dds()

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from ct_controllers.config import load_config  # noqa: E402
from ct_controllers.model.description import load_description  # noqa: E402
from ct_controllers.model.grip_geometry import gripper_geometry  # noqa: E402
from ct_controllers.model.payload import Payload  # noqa: E402
from ct_controllers.model.robot import RobotModel  # noqa: E402
from ct_controllers.sim.drives import (  # noqa: E402
    SERVO_BANDWIDTH,
    drive_friction,
    least_inertia,
    motor_step,
    rotor_inertia,
)
from ct_controllers.sim.object_contact import (  # noqa: E402
    CONTACT_DAMPING,
    CONTACT_STIFFNESS,
    ObjectBetweenFingers,
)


class Plant:
    def __init__(
        self,
        rate: float,
        order: list[str] | None,
        states: str,
        commands: str,
        interface: str = "effort",
        object_width: float | None = None,
        contact_stiffness: float = CONTACT_STIFFNESS,
        contact_damping: float = CONTACT_DAMPING,
        config_path: str | None = None,
        payload: Payload | None = None,
        effort_noise: float = 0.0,
    ) -> None:
        config = load_config(config_path)
        description = load_description(
            config.robot_description or None, mappings={"backend": config.backend}
        )
        if payload is None:
            self.model = RobotModel(description.urdf)  # dynamics only: no frame needed
        else:  # the payload sits at the TCP
            self.model = RobotModel(
                description.urdf, config.tcp_frame, config.base_frame
            ).with_payload(payload)
        # The fingers meet an object through the grip geometry's levers, as the stack finds it
        # (a revolute jaw's length; sim/object_contact.py).
        grip = gripper_geometry(
            RobotModel(description.urdf, config.tcp_frame, config.base_frame),
            config.gripper_joints,
            config.grip_width_frames,
        )
        self.width_frames = grip.frames if grip is not None else ()
        self.effort_noise = float(effort_noise)  # [N·m | N] σ on the published effort
        self.noise = np.random.default_rng()
        self.fingers = tuple(config.gripper_joints)
        self.contact_stiffness = contact_stiffness
        self.contact_damping = contact_damping
        self.contact: ObjectBetweenFingers | None = None
        self.names = order or list(config.joint_names)
        bridge = config.sections.get("ros2_control_bridge")
        self.command_names = list(bridge["command_joints"]) if bridge else self.names
        self.index = self.model.indices(self.names)
        self.command_index = self.model.indices(self.command_names)
        self.q = np.zeros(self.model.nq)
        self.q[self.model.indices(config.joint_names)] = config.home_positions
        self.v = np.zeros(self.model.nv)
        least = least_inertia(self.model)  # once: 64 mass matrices
        self.rotor = rotor_inertia(self.model, least)
        self.friction = drive_friction(self.model, least)
        self.effort = np.zeros(self.model.nv)  # [N·m | N] what the motors apply
        self.interface = interface
        self.command = np.zeros(self.model.nv)  # the last command's values, model order
        self.target = self.q.copy()  # [rad | m] position interface: the servo's target
        self.period = 1.0 / rate
        self.mode = "ok"
        self.mode_since: float | None = None  # [s] time.time of the last change from stdin
        self.lock = threading.Lock()
        self.commands = 0
        self.bad_commands = 0
        self.max_command = np.zeros(self.model.nv)
        self.first_command_at: float | None = None
        self.node = rclpy.create_node("ct_ros2_control_plant")
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.publisher = self.node.create_publisher(JointState, states, qos)
        self.node.create_subscription(Float64MultiArray, commands, self.on_command, qos)
        self.place_object(object_width)

    def on_command(self, message: Float64MultiArray) -> None:
        values = np.array(message.data, dtype=np.float64)
        with self.lock:
            if values.size != len(self.command_names) or not np.all(np.isfinite(values)):
                self.bad_commands += 1  # a forward_command_controller ignores these too
                return
            self.command[self.command_index] = values
            if self.interface == "position":
                self.target[self.command_index] = values
            else:
                self.effort[self.command_index] = values
            self.max_command = np.maximum(self.max_command, np.abs(self.command))
            self.commands += 1
            if self.first_command_at is None:
                self.first_command_at = time.time()

    def step(self) -> None:
        with self.lock:
            locked = np.full(self.model.nv, self.first_command_at is None)  # brakes until then
            servos = self._servos() if self.first_command_at is not None else {}
            self.q, self.v = motor_step(
                self.model,
                self.q,
                self.v,
                self.rotor,
                self.effort,
                locked,
                {},
                self.period,
                servos,
                contact=self.contact,
                friction=self.friction,
            )
            if servos:  # the servo's torque at the new state, as a drive reports it
                gravity = self.model.gravity(self.q)
                for index, (target, kp, kd, limit) in servos.items():
                    tau = kp * (target - self.q[index]) - kd * self.v[index] + gravity[index]
                    self.effort[index] = min(max(tau, -limit), limit)
            mode = self.mode
            position = self.q[self.index].copy()
            velocity = self.v[self.index].copy()
            effort = self.effort[self.index].copy()
        if self.effort_noise > 0.0:
            effort += self.noise.normal(0.0, self.effort_noise, effort.shape)
        names = list(self.names)
        if mode == "nan":
            position[1] = np.nan
        elif mode == "unknown":
            names[2] = "ghost_joint"
        elif mode == "shuffle":
            names, position, velocity, effort = (
                names[::-1],
                position[::-1],
                velocity[::-1],
                effort[::-1],
            )
        message = JointState()
        if mode != "unstamped":
            now = time.time()
            message.header.stamp.sec = int(now)
            message.header.stamp.nanosec = int((now - int(now)) * 1e9)
        message.name = names
        message.position = position.tolist()
        message.velocity = velocity.tolist()
        # no_effort: as joint_state_broadcaster publishes for hardware without effort state
        # interfaces (a position-only robot): an empty effort field.
        message.effort = [] if mode == "no_effort" else effort.tolist()
        self.publisher.publish(message)

    def _servos(self) -> dict[int, tuple[float, float, float, float]]:
        """Position interface: joint index → (target [rad | m], kp, kd, effort limit) of its
        drive's position loop, tuned to SERVO_BANDWIDTH on the joint's inertia at q."""
        if self.interface != "position":
            return {}
        inertia = np.diag(self.model.mass_matrix(self.q)) + self.rotor
        kp = inertia * SERVO_BANDWIDTH**2  # [N·m/rad | N/m]
        kd = 2.0 * inertia * SERVO_BANDWIDTH  # [N·m·s/rad | N·s/m]
        limit = self.model.limits.effort
        return {
            i: (float(self.target[i]), float(kp[i]), float(kd[i]), float(limit[i]))
            for i in range(self.model.nv)
        }

    def place_object(self, width: float | None) -> None:
        """An object ``width`` [m] wide between the fingers from now on (None: none)."""
        contact = (
            None
            if width is None
            else ObjectBetweenFingers.for_model(
                self.model,
                self.fingers,
                width,
                self.contact_stiffness,
                self.contact_damping,
                self.width_frames,
            )
        )
        with self.lock:
            self.contact = contact

    def report(self) -> dict[str, object]:
        with self.lock:
            contact = (
                {}
                if self.contact is None
                else dict(
                    zip(
                        self.contact.fingers,
                        self.contact.finger_forces(self.q, self.v).tolist(),
                        strict=True,
                    )
                )
            )
            return {
                "position": {n: float(self.q[self.model.q_index(n)]) for n in self.names},
                "velocity": {n: float(self.v[self.model.v_index(n)]) for n in self.names},
                "commands": self.commands,
                "bad_commands": self.bad_commands,
                "max_command": {
                    n: float(self.max_command[self.model.v_index(n)]) for n in self.names
                },
                "last_command": {n: float(self.command[self.model.v_index(n)]) for n in self.names},
                "effort": {n: float(self.effort[self.model.v_index(n)]) for n in self.names},
                "first_command_at": self.first_command_at,
                "mode_since": self.mode_since,  # a fault's onset: data before it were good
                "contact": contact,  # finger → normal force [N] on the object (none: empty)
            }


class PlantProcess:
    """This plant started as a separate process (joints published in reverse order of
    ``joints``), controlled through its stdin; for tests and ``ct-bench faults``."""

    def __init__(
        self,
        states: str,
        commands: str,
        joints: Sequence[str],
        rate: float = 200.0,
        interface: str = "effort",
        object_width: float | None = None,
        config_path: str | os.PathLike[str] | None = None,
        payload: Payload | None = None,
        effort_noise: float = 0.0,
    ) -> None:
        """``object_width`` [m]: an object between the fingers from the start (None: none;
        :meth:`place_object` changes it); ``config_path``: the configuration whose robot the
        plant simulates (None: the bundled one); ``payload``: carried at the TCP by the plant's
        arm; ``effort_noise`` [N·m | N]: σ of Gaussian noise on the published efforts."""
        carried = (
            []
            if payload is None
            else ["--payload", repr(payload.mass), *(repr(float(c)) for c in payload.com)]
        )
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "ct_controllers.sim.ros2_control_plant",
                "--order", ",".join(reversed(list(joints))), "--rate", str(rate),
                "--states-topic", states, "--command-topic", commands,
                "--interface", interface,
                *(["--object-width", repr(object_width)] if object_width is not None else []),
                *(["--config", os.fspath(config_path)] if config_path is not None else []),
                *carried, "--effort-noise", repr(float(effort_noise)),
            ],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ),
        )  # fmt: skip
        first = self.readline(20.0)
        if first != "plant ready":
            raise RuntimeError(f"the plant process did not start: {first!r}")

    def readline(self, timeout: float = 5.0) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if line:
                return line.strip()
            if self.process.poll() is not None:
                break
        raise RuntimeError("the plant process said nothing")

    def send(self, word: str) -> None:
        """One of the stdin words; waits for the acknowledgement (not for ``report``)."""
        assert self.process.stdin is not None
        self.process.stdin.write(word + "\n")
        self.process.stdin.flush()
        if word != "report":
            answer = self.readline()
            if answer != f"mode {word}":
                raise RuntimeError(f"the plant process answered {answer!r} to {word!r}")

    def place_object(self, width: float | None) -> None:
        """An object ``width`` [m] wide between the fingers from now on (None: none)."""
        self.send(f"object {'none' if width is None else repr(float(width))}")

    def report(self) -> dict[str, Any]:
        self.send("report")
        return dict(json.loads(self.readline()))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ros2_control_plant")
    parser.add_argument("--rate", type=float, default=200.0, help="JointState rate [Hz]")
    parser.add_argument("--order", default="", help="joint order of the JointState messages")
    parser.add_argument("--states-topic", default="/joint_states")
    parser.add_argument("--command-topic", default="/effort_controller/commands")
    parser.add_argument("--interface", choices=("effort", "position"), default="effort")
    parser.add_argument(
        "--object-width", type=float, default=None, help="[m] an object between the fingers"
    )
    parser.add_argument("--contact-stiffness", type=float, default=CONTACT_STIFFNESS)
    parser.add_argument("--contact-damping", type=float, default=CONTACT_DAMPING)
    parser.add_argument(
        "--config", default=None, help="configuration file (default: the bundled one)"
    )
    parser.add_argument(
        "--payload",
        type=float,
        nargs=4,
        default=None,
        metavar=("M", "CX", "CY", "CZ"),
        help="[kg], [m] a payload at the TCP (TCP frame)",
    )
    parser.add_argument(
        "--effort-noise", type=float, default=0.0, help="[N·m | N] σ on published efforts"
    )
    args = parser.parse_args(argv)
    sys.setswitchinterval(0.0005)
    rclpy.init()
    plant = Plant(
        args.rate, args.order.split(",") if args.order else None, args.states_topic,
        args.command_topic, args.interface, args.object_width, args.contact_stiffness,
        args.contact_damping, args.config,
        None if args.payload is None else Payload(args.payload[0], np.array(args.payload[1:])),
        args.effort_noise,
    )  # fmt: skip
    executor = SingleThreadedExecutor()
    executor.add_node(plant.node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    stop = threading.Event()

    def control() -> None:
        for line in sys.stdin:
            word = line.strip()
            if word == "report":
                print(json.dumps(plant.report()), flush=True)
            elif word == "quit":
                break
            elif word in ("nan", "unknown", "shuffle", "unstamped", "no_effort", "ok"):
                with plant.lock:
                    plant.mode = word
                    plant.mode_since = time.time()
                print(f"mode {word}", flush=True)
            elif word.startswith("object "):
                value = word.split(maxsplit=1)[1]
                try:
                    plant.place_object(None if value == "none" else float(value))
                except ValueError as exc:
                    print(f"error {exc}", flush=True)
                else:
                    print(f"mode {word}", flush=True)
        stop.set()

    threading.Thread(target=control, daemon=True).start()
    print("plant ready", flush=True)
    scheduled = time.monotonic()
    try:
        while not stop.is_set():
            plant.step()
            scheduled += plant.period
            delay = scheduled - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                scheduled = time.monotonic()  # a stall (SIGSTOP): re-base, do not bunch
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        rclpy.try_shutdown()
        spinner.join(2.0)
        executor.shutdown()
        plant.node.destroy_node()
    return 0


if __name__ == "__main__":
    sys.exit(main())
