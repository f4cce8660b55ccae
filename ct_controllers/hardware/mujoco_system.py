"""MuJoCo simulation backend (plugin ``ct_controllers/MujocoSystem``).

Two modes:
- ``lockstep``: each ``write()`` advances physics by exactly one control period. The control loop
  runs as fast as it can, deterministically and faster than real time; state at tick k is the
  state at sim time k·T.
- ``paced``: physics follows the wall clock. Each ``read()`` first steps physics until sim time
  catches up with the wall time elapsed since activation, as a real robot keeps moving whether or
  not the controller is on time; commands hold until replaced. The catch-up per read is bounded
  (``max_catch_up_periods``, default 2 control periods): a stalled controller then makes sim time
  fall behind wall time (real-time factor < 1, counted in ``lagged_reads``) instead of letting the
  plant run open-loop on a stale command for a long stretch. Stale commands on real drives are the
  watchdog's job; in sim they would only make the simulation meaningless.

The scene (hardware/mujoco_scene.py) is MuJoCo's own import of the URDF, or the MJCF file named by
the optional ``mujoco.scene`` entry, with the TCP site at the configured ``tcp_frame`` and one
actuator per ``<ros2_control>`` joint (a mimic follower is none: it follows its master).

The clock of this backend is sim time (``data.time``) [s]; the ROS node publishes it on /clock.
Measured effort is the generalized actuator force on the joint (``qfrc_actuator``), what a joint
torque sensor would read without friction.

Command interfaces, per joint (``command_interfaces``; from ``mujoco.command_interfaces``, each
checked against the joint's ``<ros2_control>`` interfaces):
- ``effort``: a MuJoCo motor; the value written is the joint torque [N·m | N], clamped to the
  URDF effort limit.
- ``position``: a drive's position loop with gravity feed-forward. A MuJoCo position actuator,
  force = kp (q* − q) − kv q̇ + g(q), clamped to ± the URDF effort limit (the drive's torque
  limit; :meth:`MujocoSystem.set_effort_limit` lowers it at run time, e.g. to a grip force);
  q* [rad | m] is the value written, clamped to the joint range. kp [N·m/rad | N/m] and
  kv [N·m·s/rad | N·s/m] are :class:`~ct_controllers.hardware.mujoco_scene.ServoGains`
  (default 400 and 40 for revolute joints, 4000 and 40 for the prismatic fingers; kv is
  integrated implicitly by ``implicitfast``, so the servo stays stable for the 0.05 kg fingers
  too). g(q) [N·m | N] is
  the simulated arm's own gravity torque (as a drive with an identified gravity model has),
  evaluated at every physics step from the state at its start (``mj_rne`` at zero velocity on
  a scratch copy) and put in the actuator's constant bias term (``biasprm[0]``), so ``ctrl``
  keeps the request, the force limit covers the sum, and a joint held against gravity does not
  sag by g/kp. Measured effort is then the servo's whole force, as a drive's torque actual.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

from ct_controllers.errors import ConfigError
from ct_controllers.hardware.grasp_scene import GraspScene, cube_size, grasp_scene
from ct_controllers.hardware.interface import (
    COMMAND_INTERFACES,
    EFFORT,
    POSITION,
    ActuationReport,
    FloatArray,
    JointCommand,
    LifecycleState,
    ObjectSensing,
    SimulatedScene,
    StateSample,
    SystemInterface,
)
from ct_controllers.hardware.jaw_grasp import robot_jaw_grasp
from ct_controllers.hardware.mujoco_objects import ObjectSensor
from ct_controllers.hardware.mujoco_scene import (
    CUBE_BODY,
    ServoGains,
    build_scene,
    compile_scene,
    compose_payload,
)
from ct_controllers.model.description import RobotDescription
from ct_controllers.model.grip_geometry import gripper_geometry
from ct_controllers.model.payload import Payload
from ct_controllers.model.robot import RobotModel
from ct_controllers.parameter_schema import ParameterSchema, ParameterSpec, one_of, positive

if TYPE_CHECKING:
    from ct_controllers.config import StackConfig

LOCKSTEP = "lockstep"
PACED = "paced"
SECTION = "mujoco"
_NO_VIEW = np.empty(0)  # in place of MjData's arrays while there is none (unconfigured)
_NO_VIEW.setflags(write=False)


def _interfaces_per_joint(values: Mapping[str, Any], joint_count: int | None) -> str | None:
    count = len(values["command_interfaces"])
    if joint_count is not None and count not in (1, joint_count):
        return (
            "parameter 'mujoco.command_interfaces': expected one interface for every joint or "
            f"one per joint ({joint_count}), got {count}"
        )
    return None


# The section ``mujoco.*`` of controllers.yaml. Read-only: it shapes the simulation.
PARAMETERS = ParameterSchema(
    SECTION,
    (
        ParameterSpec(
            "mode",
            str,
            PACED,
            "paced (sim time follows the wall clock) | lockstep (as fast as possible)",
            validator=one_of(PACED, LOCKSTEP),
        ),
        ParameterSpec(
            "timestep",
            float,
            0.001,
            "Physics step; the control period must be a whole multiple",
            "s",
            validator=positive,
        ),
        ParameterSpec(
            "command_interfaces",
            str,
            (EFFORT,),
            "effort | position, for every joint or per joint (arm, gripper)",
            sequence=True,
            validator=one_of(*COMMAND_INTERFACES),
        ),
    ),
    checks=(_interfaces_per_joint,),
)
# Optional entry (the schema requires every one of its entries in every file; this one is for
# the few who have an MJCF): ``mujoco.scene``, an MJCF file [path, absolute or relative to the
# working directory] to simulate the robot from (e.g. a MuJoCo Menagerie model), matched to the
# URDF by joint name (hardware/mujoco_mjcf.py); absent or "" = MuJoCo's import of the URDF.
SCENE = f"{SECTION}.scene"
# Optional entries, simulation only: an object fixed at the TCP of the *simulated* arm — mass
# [kg] (0 = none) and centre of mass [m] in the TCP frame — composed into the TCP's body; the
# controllers' model knows nothing of it (the truth a payload identification is checked against,
# as a grasped object would be). The node declares them read-only with the MuJoCo backend.
SIM_PAYLOAD_MASS = f"{SECTION}.payload_mass"
SIM_PAYLOAD_COM = f"{SECTION}.payload_com"


@dataclass(frozen=True)
class MujocoConfig:
    """timestep [s] physics step; control_period [s], a whole multiple of the timestep;
    initial_positions [rad | m] and initial_velocities [rad/s | m/s] by joint name (others 0);
    mass_scale multiplies every link mass of the simulated robot (plant model error, 1 = URDF);
    command_interfaces: joint name -> "effort" (default) | "position"; tcp_frame: the URDF
    link that gets the TCP site (None: none); urdf_directory: the URDF file's folder (where
    its meshes are also looked for; None: the URDF came as text); scene: an MJCF file to take
    the robot from instead of the URDF (None: MuJoCo's import of the URDF), its joints the
    description locks (locked_joints, name → [rad | m]) welded there; gripper_joints:
    the gripper's joints, whose bodies (and those of joints mimicking them) the object sensor
    reads contact forces on (empty: the sensor's default finger bodies)."""

    timestep: float = 0.001
    control_period: float = 0.001
    mode: str = LOCKSTEP
    initial_positions: Mapping[str, float] = field(default_factory=dict)
    initial_velocities: Mapping[str, float] = field(default_factory=dict)
    mass_scale: float = 1.0
    command_interfaces: Mapping[str, str] = field(default_factory=dict)
    servo_gains: ServoGains = field(default_factory=ServoGains)
    with_objects: bool = True
    max_catch_up_periods: int = 2  # paced mode: control periods of physics per read at most
    tcp_frame: str | None = None
    urdf_directory: str | None = None
    scene: str | None = None
    locked_joints: Mapping[str, float] = field(default_factory=dict)
    gripper_joints: tuple[str, ...] = ()
    # gripper.width_frames: a fixed jaw among them stays a body, and its contacts count.
    width_frames: tuple[str, ...] = ()
    # The table and cube from the robot's reach and gripper (None: the bundled arm's constants).
    objects: GraspScene | None = None
    # An object fixed at the TCP of the simulated arm (None: none): ``mujoco.payload_*``.
    payload: Payload | None = None

    def __post_init__(self) -> None:
        if self.mode not in (LOCKSTEP, PACED):
            raise ValueError(f"unknown MuJoCo mode '{self.mode}' (known: {LOCKSTEP}, {PACED})")
        if not (self.timestep > 0 and self.control_period > 0):
            raise ValueError("timestep and control_period must be positive")
        ratio = self.control_period / self.timestep
        if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            raise ValueError(
                f"control_period {self.control_period} s is not a whole multiple of the "
                f"physics timestep {self.timestep} s"
            )


class MujocoSystem(SystemInterface):
    """The simulated arm: scene built from the URDF, one actuator per claimed joint."""

    backend_name = "ct_controllers/MujocoSystem"
    BACKEND = "mujoco"  # the `backend:` value that selects it
    PARAMETERS = PARAMETERS  # its section of controllers.yaml
    measurement_delay = 0  # the physics steps after the write: the effort acts at once
    publishes_clock = True  # sim time

    def __init__(
        self, urdf: str, joint_names: tuple[str, ...], config: MujocoConfig = MujocoConfig()
    ):
        interfaces = tuple(config.command_interfaces.get(n, EFFORT) for n in joint_names)
        super().__init__(joint_names=tuple(joint_names), command_interfaces=interfaces)
        unknown = sorted(set(config.command_interfaces) - set(joint_names))
        if unknown:
            raise ValueError(f"command interface configured for unknown joint(s): {unknown}")
        self.urdf = urdf
        self.config = config
        self.lock = threading.Lock()  # guards model/data against a viewer or test reading them
        self.model: mujoco.MjModel | None = None
        self.data: mujoco.MjData | None = None
        self._qpos = self._qvel = self._qfrc_actuator = self._ctrl = _NO_VIEW
        self._steps_per_period = round(config.control_period / config.timestep)
        self._wall_start = 0.0
        self._sim_start = 0.0
        self._max_catch_up_steps = config.max_catch_up_periods * self._steps_per_period
        self._paced = config.mode == PACED  # (the config is frozen) tested every read and write
        self.lagged_reads = 0  # paced mode: reads that hit the catch-up bound
        # Wall time [s] spent in mj_step: what physics costs inside a run.
        self.physics_seconds = 0.0

    @classmethod
    def from_config(cls, description: RobotDescription, config: StackConfig) -> MujocoSystem:
        """The plugin constructor: joints from the ``<ros2_control>`` block, the rest from
        controllers.yaml (``mujoco.*`` — command interfaces per joint included —, as
        :func:`~ct_controllers.config.load_config` parsed it by :data:`PARAMETERS`, sized by the
        joint lists, when ``backend`` is ``mujoco``; parsed here only for a URDF whose own block
        names this plugin under another ``backend``; ``home_positions``, ``update_rate``)."""
        if config.backend == cls.BACKEND:
            params = config.section(cls.BACKEND)
        else:
            params = PARAMETERS.parse(config.parameters, len(config.joint_names))
        scene = config.parameters.get(SCENE, "")
        if not isinstance(scene, str):
            raise ConfigError(f"parameter '{SCENE}': expected a path (a string), got {scene!r}")
        home = dict(zip(config.joint_names, config.home_positions, strict=True))
        mass = config.parameters.get(SIM_PAYLOAD_MASS, 0.0)
        com = config.parameters.get(SIM_PAYLOAD_COM, (0.0, 0.0, 0.0))
        try:
            payload = None if mass == 0.0 else Payload(float(mass), com)
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"parameters '{SIM_PAYLOAD_MASS}', '{SIM_PAYLOAD_COM}': {exc}"
            ) from None
        if payload is not None and (payload.mass < 0.0 or config.tcp_frame is None):
            raise ConfigError(
                f"parameter '{SIM_PAYLOAD_MASS}': a simulated payload needs a mass ≥ 0 and a "
                f"tcp_frame, got {mass} kg"
            )
        per_joint = params["command_interfaces"]
        if len(per_joint) == 1:
            per_joint *= len(config.joint_names)
        interfaces = dict(zip(config.joint_names, per_joint, strict=True))
        source = Path(description.source)
        model = RobotModel(
            description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame
        )
        grip = gripper_geometry(model, config.gripper_joints, config.grip_width_frames)
        directory = str(source.parent) if source.is_file() else None
        jaw = robot_jaw_grasp(
            description.urdf,
            directory,
            config.tcp_frame,
            grip,
            cube_size(grip),
            len(config.arm_joints),
        )
        return cls(
            description.urdf,
            description.hardware.joint_names,
            MujocoConfig(
                timestep=params["timestep"],
                control_period=config.period,
                mode=params["mode"],
                initial_positions=home,
                command_interfaces={n: i for n, i in interfaces.items() if i != EFFORT},
                tcp_frame=config.tcp_frame,
                urdf_directory=directory,
                scene=scene or None,
                locked_joints=dict(description.locked_joints),
                gripper_joints=config.gripper_joints,
                width_frames=config.grip_width_frames,
                objects=grasp_scene(model, grip, jaw),
                payload=payload,
            ),
        )

    def scene_spec(self) -> mujoco.MjSpec:
        """The scene this system simulates, uncompiled (:func:`build_scene` with this
        configuration): what benches and tests check against, the very scene the stack runs."""
        return build_scene(
            self.urdf,
            timestep=self.config.timestep,
            command_interfaces=self.config.command_interfaces,
            servo_gains=self.config.servo_gains,
            tcp_frame=self.config.tcp_frame,
            with_objects=self.config.with_objects,
            mass_scale=self.config.mass_scale,
            actuated_joints=self.joint_names,
            urdf_directory=self.config.urdf_directory,
            scene=self.config.scene,
            kept_links=self.config.width_frames,
            objects=self.config.objects,
            locked_joints=self.config.locked_joints,
        )

    # --- lifecycle -------------------------------------------------------------------------
    def _on_configure(self) -> None:
        model = compile_scene(self.scene_spec())
        if self.config.payload is not None and self.config.tcp_frame is not None:
            compose_payload(model, self.config.tcp_frame, self.config.payload)
        self.model, self.data = model, mujoco.MjData(model)
        # MjData's arrays as numpy views, taken once (each attribute access builds a new view;
        # MjData never moves them): what every read and write indexes.
        self._qpos, self._qvel = self.data.qpos, self.data.qvel
        self._qfrc_actuator, self._ctrl = self.data.qfrc_actuator, self.data.ctrl
        # Name maps, built once: joint -> qpos address, dof address, actuator (ctrl) address.
        # As intp, numpy's own index type: MuJoCo's int32 addresses would be converted on
        # every read and write (~0.6 µs an indexing).
        self._qpos_adr = np.array(
            [model.joint(n).qposadr[0] for n in self.joint_names], dtype=np.intp
        )
        self._dof_adr = np.array(
            [model.joint(n).dofadr[0] for n in self.joint_names], dtype=np.intp
        )
        self._ctrl_adr = np.array([model.actuator(n).id for n in self.joint_names], dtype=np.intp)
        self._ctrl_low = model.actuator_ctrlrange[self._ctrl_adr, 0].copy()
        self._ctrl_high = model.actuator_ctrlrange[self._ctrl_adr, 1].copy()
        # [N·m | N] each actuator's force limit as built (the URDF effort limit): the default
        # that set_effort_limit(joint, None) restores.
        self._force_limit = model.actuator_forcerange[self._ctrl_adr, 1].copy()
        # Position servos: their actuators and dofs, and a scratch copy for g(q).
        servo = np.array([i == POSITION for i in self.command_interfaces], dtype=bool)
        self._servo_actuators = self._ctrl_adr[servo]
        self._servo_dofs = self._dof_adr[servo]
        self._gravity_data = mujoco.MjData(model) if servo.any() else None
        self._gravity = np.zeros(model.nv)  # [N·m | N] g(q) of the last physics step
        # A lockstep write is one bare mj_step: no servo to feed, one physics step a period.
        self._one_bare_step = self._gravity_data is None and self._steps_per_period == 1
        named = set(self.config.initial_positions) | set(self.config.initial_velocities)
        unknown = sorted(named - set(self.joint_names))
        if unknown:
            raise ValueError(f"initial state given for unknown joint(s): {unknown}")
        self.reset()

    def _on_activate(self) -> None:
        assert self.data is not None
        self._wall_start = time.monotonic()
        self._sim_start = float(self.data.time)

    def _on_cleanup(self) -> None:
        self.model = self.data = None
        self._qpos = self._qvel = self._qfrc_actuator = self._ctrl = _NO_VIEW

    def reset(self) -> None:
        """Explicit reset: the initial positions at rest, the objects at their start, t = 0.
        The only place outside physics that writes simulator state."""
        assert self.model is not None and self.data is not None
        with self.lock:
            mujoco.mj_resetData(self.model, self.data)
            for name, value in self.config.initial_positions.items():
                self.data.qpos[self.model.joint(name).qposadr[0]] = value
            for name, value in self.config.initial_velocities.items():
                self.data.qvel[self.model.joint(name).dofadr[0]] = value
            self._satisfy_joint_couplings()
            # Servos start at their joint's position, motors at zero effort.
            for i, interface in enumerate(self.command_interfaces):
                self.data.ctrl[self._ctrl_adr[i]] = (
                    0.0 if interface == EFFORT else self.data.qpos[self._qpos_adr[i]]
                )
            self._gravity_feedforward()
            mujoco.mj_forward(self.model, self.data)

    def _satisfy_joint_couplings(self) -> None:
        """Joints coupled by a joint equality (a URDF <mimic>: q1 = c0 + c1 q2 + ... + c4 q2⁴)
        start on it, at rest relative to their master (q̇1 = dq1/dq2 · q̇2), so the first step
        has no constraint violation to correct. Lock held."""
        model, data = self.model, self.data
        assert model is not None and data is not None
        for i in range(model.neq):
            if int(model.eq_type[i]) != int(mujoco.mjtEq.mjEQ_JOINT) or not model.eq_active0[i]:
                continue
            follower, master = int(model.eq_obj1id[i]), int(model.eq_obj2id[i])
            if master < 0:  # a joint held at a constant: the constant is its own business
                continue
            c = model.eq_data[i, :5]
            q = data.qpos[model.jnt_qposadr[master]]
            data.qpos[model.jnt_qposadr[follower]] = sum(c[k] * q**k for k in range(5))
            slope = sum(k * c[k] * q ** (k - 1) for k in range(1, 5))
            data.qvel[model.jnt_dofadr[follower]] = slope * data.qvel[model.jnt_dofadr[master]]

    def _gravity_feedforward(self) -> None:
        """Position servos: g(q) [N·m | N] at the current state into their actuators' bias
        (force = kp ctrl − kp q − kv q̇ + biasprm[0]). Lock held; nothing without servos."""
        scratch = self._gravity_data
        if scratch is None:
            return
        assert self.model is not None and self.data is not None
        # Zero velocity in the scratch copy (never set): mj_rne without acceleration is g(q).
        scratch.qpos[:] = self.data.qpos
        mujoco.mj_kinematics(self.model, scratch)
        mujoco.mj_comPos(self.model, scratch)
        mujoco.mj_rne(self.model, scratch, 0, self._gravity)
        self.model.actuator_biasprm[self._servo_actuators, 0] = self._gravity[self._servo_dofs]

    def _step(self) -> None:
        """One physics step, the position servos' gravity feed-forward taken at its start."""
        assert self.model is not None and self.data is not None
        self._gravity_feedforward()
        mujoco.mj_step(self.model, self.data)

    # --- cyclic ----------------------------------------------------------------------------
    def now(self) -> float:
        assert self.data is not None
        return float(self.data.time)

    # The lock of a read or write is taken by hand, not by ``with``: two thirds of its cost.
    def _read(self) -> StateSample:
        assert self.model is not None and self.data is not None
        lock = self.lock
        lock.acquire()
        try:
            if self._paced and self.state is LifecycleState.ACTIVE:
                target = self._sim_start + (time.monotonic() - self._wall_start)
                steps = 0
                start = time.perf_counter()
                while self.data.time + 0.5 * self.config.timestep < target:
                    if steps == self._max_catch_up_steps:
                        # Too far behind: give up the lost time rather than run open loop.
                        self.lagged_reads += 1
                        self._sim_start -= target - self.data.time
                        break
                    self._step()
                    steps += 1
                self.physics_seconds += time.perf_counter() - start
            # Indexing by an address array copies: each sample has arrays of its own.
            return StateSample(
                float(self.data.time),
                self.joint_names,
                self._qpos[self._qpos_adr],
                self._qvel[self._dof_adr],
                self._qfrc_actuator[self._dof_adr],
            )
        finally:
            lock.release()

    def _write(self, command: JointCommand, values: FloatArray) -> None:
        assert self.model is not None and self.data is not None
        lock = self.lock
        lock.acquire()
        try:
            self._ctrl[self._ctrl_adr] = values
            if not self._paced:  # lockstep
                start = time.perf_counter()
                if self._one_bare_step:
                    mujoco.mj_step(self.model, self.data)  # _step without servos to feed
                else:
                    for _ in range(self._steps_per_period):
                        self._step()
                self.physics_seconds += time.perf_counter() - start
        finally:
            lock.release()

    @property
    def loop_paced(self) -> bool:
        """Paced mode runs in real time on the loop's schedule; lockstep runs ticks back to back
        (one physics period each)."""
        return self.config.mode == PACED

    def describe(self) -> str:
        return f"simulation, {self.config.mode}"

    def effort_limit_range(self, joint: str) -> tuple[float, float] | None:
        """Every actuator's force range can be set while the simulation runs: (0, the URDF
        effort limit) [N·m | N]. Configured only."""
        if self.model is None or joint not in self.joint_names:
            return None
        return 0.0, float(self._force_limit[self.joint_names.index(joint)])

    def _set_effort_limit(self, joint: str, limit: float | None) -> None:
        """The joint's actuator force range becomes ±``limit`` (MuJoCo clamps the actuator's
        force to it: a motor's effort, a position servo's kp (q* − q) − kv q̇ + g(q))."""
        assert self.model is not None
        i = self.joint_names.index(joint)
        value = self._force_limit[i] if limit is None else limit
        with self.lock:
            self.model.actuator_forcerange[self._ctrl_adr[i]] = (-value, value)

    def simulated_scene(self) -> SimulatedScene | None:
        """MuJoCo's model and data, and the lock they are stepped under (configured only)."""
        if self.model is None or self.data is None:
            return None
        return SimulatedScene("mujoco", self.model, self.data, self.lock)

    def object_sensor(self) -> ObjectSensing | None:
        """The scene's simulated object sensor (the cube's pose and finger contact forces, read
        from MuJoCo) when the scene has a cube, else None. Configured backends only."""
        if self.model is None:
            return None
        try:
            if not self.config.gripper_joints:
                return ObjectSensor(self)
            return ObjectSensor(self, CUBE_BODY, self._finger_bodies())
        except KeyError:  # no cube (or no finger bodies) in this scene
            return None

    def _finger_bodies(self) -> tuple[str, ...]:
        """The bodies the gripper joints move, then those of joints that mimic them (a mimic
        finger, coupled by a joint equality), then a fixed jaw's (a width frame that is a body
        of the scene, moved by no gripper joint), each once: the fingers the object touches."""
        model = self.model
        assert model is not None
        joints = [model.joint(name).id for name in self.config.gripper_joints]
        for i in range(model.neq):
            coupled = int(model.eq_type[i]) == int(mujoco.mjtEq.mjEQ_JOINT)
            if coupled and int(model.eq_obj2id[i]) in joints:
                joints.append(int(model.eq_obj1id[i]))
        bodies = [model.body(int(model.jnt_bodyid[j])).name for j in joints]
        for frame in self.config.width_frames:
            body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, frame)
            # A frame link without geometry (a fingertip marker): the jaw is the nearest body
            # up its chain that has some.
            while body > 0 and model.body_geomnum[body] == 0:
                body = int(model.body_parentid[body])
            if body > 0:
                bodies.append(model.body(body).name)
        return tuple(dict.fromkeys(bodies))

    @property
    def unstable(self) -> bool:
        """MuJoCo reported a non-finite or huge acceleration (it then resets the state, so the
        simulation since is not the one commanded)."""
        assert self.data is not None
        return bool(self.data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number > 0)

    def actuation_report(self) -> ActuationReport:
        """The four different things seed 000 §7 separates: request, clamped input,
        actuator output, generalized force on the joint."""
        assert self.model is not None and self.data is not None
        with self.lock:
            requested = self.data.ctrl[self._ctrl_adr].copy()
            return ActuationReport(
                joint_names=self.joint_names,
                requested=requested,
                effective=np.clip(requested, self._ctrl_low, self._ctrl_high),
                actuator_force=self.data.actuator_force[self._ctrl_adr].copy(),
                joint_force=self.data.qfrc_actuator[self._dof_adr].copy(),
            )
