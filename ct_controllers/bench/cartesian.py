"""``ct-bench cartesian``: the Cartesian impedance law (``ct_controllers/CartesianImpedance``)
measured through the whole stack in MuJoCo (lockstep, 1 kHz, effort interface, the limiter
last), per robot (``--config FILE``, repeatable; ``bundled`` is the bundled arm; a Panda made
with ``ct-setup`` from example-robot-data, as ``ct-bench reach --config`` takes it), from the
configuration's home pose:

- **push**: the law holding the TCP where it is while a 10 N force pushes at the TCP, along the
  base x, y and z axes in turn (``--push-seconds`` each; MuJoCo's ``xfrc_applied`` on the TCP's
  body — an external force, the plant's input — re-aimed every 10 ticks so that it acts at the
  TCP as the TCP moves). At the end of each push the TCP's displacement from where it rested
  before the pushes is compared with the compliance's K⁻¹F (the translational rows of
  K⁻¹ [F; 0], K the 6 × 6 stiffness in base axes): stiffness error = ‖d − K⁻¹F‖ / ‖K⁻¹F‖
  (goal ≤ 5 %). Also reported: the TCP speed then (steady state: ≪ 1 mm/s) and its rotation.
- **circle**: the TCP along a circle 0.1 m across (``--radius``, default 0.05 m) in the base
  x-y plane at
  ``--frequency`` (default 0.5 Hz), its orientation held, by each method in turn on a fresh
  stack: ``cartesian_impedance`` (the law given the moving target pose and its twist),
  ``cartesian_impedance_ff`` (the same plus the feed-forward wrench Λ ẍ* through the target's
  ``wrench``, Λ as the law computes it at the latest measured configuration: the law has no
  acceleration input of its own) and ``diff_ik`` (the differential IK (QP) → the
  configuration's joint impedance, the chain MoveToPose runs, given the same pose and twist).
  The circle starts at the TCP at rest and its
  angular speed ramps up smoothly over ``--ramp`` periods (so both start on their trajectory,
  position and velocity); the error is sampled every 10 ticks over the ``--periods`` full
  periods after the ramp: the TCP's distance from where the circle is at the state's stamp,
  RMS and maximum, and the orientation error's RMS.
- **update time**: one controller update (``Controller.update``, as the loop calls it), p50 and
  p99 over ``--ticks`` states moving along a sine after a warm-up (``ct-bench timing``'s
  protocol), for the Cartesian impedance law, the configuration's joint impedance and the
  differential IK chain; and the loop's own ``controller`` stage times while each method
  tracked the circle.

Figures are measured, each with the robot and the command; nothing is copied from a document.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pinocchio as pin

from ct_controllers.bench.timing import WARMUP, _measure, _states, _summary, _updater
from ct_controllers.chains.tcp_chain_factory import tcp_target_chain
from ct_controllers.chains.tcp_target_chain import TcpTargetChain
from ct_controllers.config import StackConfig, load_config
from ct_controllers.controllers.cartesian_impedance import (
    PARAMETERS as CARTESIAN_PARAMETERS,
)
from ct_controllers.controllers.cartesian_impedance import (
    CartesianImpedanceController,
    operational_space,
)
from ct_controllers.controllers.controller import Controller
from ct_controllers.model.robot import RobotModel
from ct_controllers.plugins import CONTROLLERS, load_plugin
from ct_controllers.runtime.control_loop import ControlLoop
from ct_controllers.runtime.loop_snapshot import LoopSnapshot
from ct_controllers.runtime.stack import Stack, build_stack

JOINT_IMPEDANCE = "ct_controllers/JointImpedance"
BUNDLED = "bundled"
PUSH_FORCE = 10.0  # [N]
GOAL_STIFFNESS_ERROR = 0.05  # [-] ‖d − K⁻¹F‖ / ‖K⁻¹F‖ at steady state
SETTLE_SECONDS = 1.0  # [s] under the law before the pushes: at rest to ≪ 1 µm
CIRCLE_SETTLE = 0.3  # [s] under the method before the circle: the switch's transient gone
FEED_FORWARD = "cartesian_impedance_ff"
METHODS = ("cartesian_impedance", FEED_FORWARD, "diff_ik")
AXES = ("x", "y", "z")


def default_stiffness() -> tuple[float, ...]:
    """The law's default K diagonal [N/m; N·m/rad] (its parameter schema's)."""
    spec = next(s for s in CARTESIAN_PARAMETERS.parameters if s.name == "stiffness")
    return tuple(float(v) for v in spec.default)


# --- the stack ---------------------------------------------------------------------------------
def bench_config(config_path: str | None) -> StackConfig:
    """``config_path``'s configuration (None or ``bundled``: the bundled one) on MuJoCo in
    lockstep."""
    path = None if config_path in (None, BUNDLED) else config_path
    return load_config(path, overrides={"mujoco.mode": "lockstep", "backend": "mujoco"})


def settled_stack(config: StackConfig) -> Stack:
    """The stack, brought up, after 0.1 s holding home with the default controller."""
    stack = build_stack(config)
    stack.bring_up()
    stack.loop.run_ticks(round(0.1 / config.period))
    return stack


def joint_impedance(stack: Stack) -> Controller:
    """The configuration's joint impedance instance (the first of its type), fresh: its own
    model data and state."""
    config = stack.config
    for params in config.controllers.values():
        if str(params["type"]) == JOINT_IMPEDANCE:
            kind = load_plugin(CONTROLLERS, JOINT_IMPEDANCE)
            return kind.from_parameters(stack.model.with_own_data(), config.joint_names, params)
    raise ValueError(f"the configuration loads no {JOINT_IMPEDANCE} controller")


def cartesian_impedance(stack: Stack, stiffness: tuple[float, ...]) -> CartesianImpedanceController:
    """The law with stiffness ``stiffness`` (6 diagonal values [N/m; N·m/rad], base axes), every
    other parameter its default."""
    return CartesianImpedanceController(stack.model.with_own_data(), stiffness=stiffness)


def target_chain(stack: Stack, controller: Controller, pose: np.ndarray) -> TcpTargetChain:
    """The chain factory's chain to ``controller`` toward ``pose`` (4 × 4, base frame), as
    MoveToPose's finish and the streams build it: differential IK (QP) in front of a joint law,
    the target straight to Cartesian impedance."""
    config = stack.config
    return tcp_target_chain(
        stack.model, controller, config.arm_joints, config.cartesian_divisor, pose
    )


def diff_ik_chain(stack: Stack, pose: np.ndarray) -> TcpTargetChain:
    """Differential IK (QP) → the configuration's joint impedance, toward ``pose`` (4 × 4, base
    frame): MoveToPose's finishing chain (``chains/pose_goal.py``)."""
    return target_chain(stack, joint_impedance(stack), pose)


def operational_inertia(
    law: CartesianImpedanceController, stack: Stack, model: RobotModel
) -> Callable[[np.ndarray], np.ndarray]:
    """q ↦ Λ(q) (6 × 6 [kg | kg·m²]) as ``law`` computes it (the arm joints' block of M, its
    singularity damping), for a feed-forward wrench Λ ẍ* given through the target."""
    arm = np.array(model.indices(stack.config.arm_joints))
    block = np.ix_(arm, arm)

    def inertia(q: np.ndarray) -> np.ndarray:
        return operational_space(
            model.frame_jacobian(q)[:, arm],
            model.mass_matrix(q)[block],
            law.singularity_measure,
            law.singularity_threshold,
            law.max_inertia_damping,
        ).inertia

    return inertia


def _tcp(model: RobotModel, q: np.ndarray) -> np.ndarray:
    return model.frame_pose(q)


def _latest(loop: ControlLoop) -> LoopSnapshot:
    """The loop's latest snapshot (a lockstep loop that has ticked has one)."""
    snapshot = loop.snapshot()
    assert snapshot is not None
    return snapshot


def _angle(rotation: np.ndarray) -> float:
    """The rotation angle [rad] of a rotation matrix."""
    return float(np.linalg.norm(pin.log3(rotation)))


# --- push --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Push:
    """One push: force [N] (base axes), the TCP's displacement d [m] at its end, the
    compliance's K⁻¹F [m], the stiffness error ‖d − K⁻¹F‖ / ‖K⁻¹F‖, the TCP speed [m/s] and
    rotation [rad] then."""

    axis: str
    force: list[float]
    displacement: list[float]
    expected: list[float]
    stiffness_error: float
    speed: float
    rotation: float


class TcpPusher:
    """A force at the TCP in the MuJoCo scene: ``xfrc_applied`` on the body carrying the TCP
    (the TCP frame's parent joint's body; MuJoCo fuses fixed links into it), with the moment of
    the force about that body's centre of mass — where ``xfrc_applied`` acts."""

    def __init__(self, stack: Stack) -> None:
        import mujoco

        found = stack.hardware.simulated_scene()
        if found is None:
            raise ValueError("the push needs a simulated backend")
        # MuJoCo's model and data, and the lock they are stepped under.
        scene_model: Any = found.model
        self.data: Any = found.data
        self.lock: Any = found.lock
        model = stack.model.model
        joint = model.names[model.frames[stack.model.tcp_frame_id].parentJoint]
        joint_id = mujoco.mj_name2id(scene_model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        if joint_id < 0:
            raise ValueError(f"the MuJoCo scene has no joint '{joint}' (the TCP's parent)")
        self.body = int(scene_model.jnt_bodyid[joint_id])

    def apply(self, force: np.ndarray, tcp: np.ndarray) -> None:
        """Push with ``force`` [N] (base = world axes) at the point ``tcp`` [m]."""
        with self.lock:
            lever = tcp - self.data.xipos[self.body]
            self.data.xfrc_applied[self.body] = np.concatenate([force, np.cross(lever, force)])

    def release(self) -> None:
        with self.lock:
            self.data.xfrc_applied[self.body] = 0.0


def push(
    config: StackConfig,
    stiffness: tuple[float, ...],
    seconds: float = 2.0,
    force: float = PUSH_FORCE,
) -> list[Push]:
    """Pushes of ``force`` [N] along the base x, y and z axes in turn, ``seconds`` [s] each,
    on the TCP held by the law from home (module docstring)."""
    stack = settled_stack(config)
    try:
        loop, model = stack.loop, stack.model.with_own_data()
        law = cartesian_impedance(stack, stiffness)
        loop.switch_controller(law)
        loop.run_ticks(round(SETTLE_SECONDS / config.period))
        snapshot = loop.snapshot()
        assert snapshot is not None
        rest = _tcp(model, snapshot.position)
        compliance = np.linalg.inv(law.stiffness.reshape(6, 6))  # base axes (stiffness_frame)
        pusher = TcpPusher(stack)
        pushes = []
        every = loop.snapshot_decimation  # ticks between two snapshots
        steps = max(1, round(seconds / config.period / every))
        try:
            for axis, direction in zip(AXES, np.eye(3), strict=True):
                applied = force * direction
                for _ in range(steps):
                    pusher.apply(applied, _tcp(model, _latest(loop).position)[:3, 3])
                    loop.run_ticks(every)
                snapshot = _latest(loop)
                if snapshot.fault:
                    raise RuntimeError(f"fault while pushing along {axis}: {snapshot.fault}")
                pose = _tcp(model, snapshot.position)
                displacement = pose[:3, 3] - rest[:3, 3]
                expected = compliance[:3, :3].dot(applied)
                arm = model.indices(config.arm_joints)
                jacobian = model.frame_jacobian(snapshot.position)[:3, arm]
                speed = float(np.linalg.norm(jacobian.dot(snapshot.velocity[arm])))
                pushes.append(
                    Push(
                        axis,
                        applied.tolist(),
                        displacement.tolist(),
                        expected.tolist(),
                        float(np.linalg.norm(displacement - expected) / np.linalg.norm(expected)),
                        speed,
                        _angle(pose[:3, :3].dot(rest[:3, :3].T)),
                    )
                )
        finally:
            pusher.release()
        return pushes
    finally:
        stack.shut_down()


# --- circle ------------------------------------------------------------------------------------
class Circle:
    """The TCP path: centre c = p₀ − r x̂ (so it starts at p₀, the TCP at rest), in the base
    x-y plane, orientation R₀ held; the phase θ(t) with θ̇ ramping from 0 to ω = 2π f by a
    smoothstep over ``ramp`` [s], then constant."""

    def __init__(self, start: np.ndarray, radius: float, frequency: float, ramp: float) -> None:
        self.start = start.copy()
        self.radius = radius
        self.omega = 2.0 * math.pi * frequency  # [rad/s]
        self.ramp = ramp
        self.centre = start[:3, 3] - np.array([radius, 0.0, 0.0])

    def phase(self, t: float) -> tuple[float, float, float]:
        """(θ [rad], θ̇ [rad/s], θ̈ [rad/s²]) at ``t`` [s] from the start."""
        if t <= 0.0:
            return 0.0, 0.0, 0.0
        if t < self.ramp:
            u = t / self.ramp
            return (
                self.omega * self.ramp * (u**3 - 0.5 * u**4),
                self.omega * (3 * u**2 - 2 * u**3),
                self.omega * (6 * u - 6 * u**2) / self.ramp,
            )
        return self.omega * (0.5 * self.ramp + t - self.ramp), self.omega, 0.0

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(pose 4 × 4, twist (6,) [m/s; rad/s], base frame) at ``t`` [s]."""
        theta, rate, _ = self.phase(t)
        pose = self.start.copy()
        c, s = math.cos(theta), math.sin(theta)
        pose[:3, 3] = self.centre + self.radius * np.array([c, s, 0.0])
        twist = np.zeros(6)
        twist[:3] = self.radius * rate * np.array([-s, c, 0.0])
        return pose, twist

    def acceleration(self, t: float) -> np.ndarray:
        """The path's acceleration (6,) [m/s²; rad/s²] at ``t`` [s]: tangential r θ̈ and
        centripetal r θ̇² (toward the centre)."""
        theta, rate, rate_of_rate = self.phase(t)
        c, s = math.cos(theta), math.sin(theta)
        out = np.zeros(6)
        out[:3] = self.radius * (
            rate_of_rate * np.array([-s, c, 0.0]) - rate * rate * np.array([c, s, 0.0])
        )
        return out


@dataclass(frozen=True)
class Tracking:
    """One method on the circle: position error [m] RMS and max, orientation error [rad] RMS,
    over ``samples`` samples; the loop's ``controller`` stage [µs] p50/p99 meanwhile."""

    method: str
    rms_m: float
    max_m: float
    rms_rad: float
    samples: int
    loop_controller_p50_us: float
    loop_controller_p99_us: float
    fault: str | None = None


def circle(
    config: StackConfig,
    method: str,
    stiffness: tuple[float, ...],
    radius: float = 0.05,
    frequency: float = 0.5,
    periods: float = 2.0,
    ramp_periods: float = 1.0,
) -> Tracking:
    """``method`` (one of :data:`METHODS`) along the circle (module docstring) on a fresh stack
    from home."""
    if method not in METHODS:
        raise ValueError(f"method '{method}' is not one of {', '.join(METHODS)}")
    stack = settled_stack(config)
    try:
        loop, model = stack.loop, stack.model.with_own_data()
        snapshot = loop.snapshot()
        assert snapshot is not None
        start = _tcp(model, snapshot.position)
        controller: Controller
        set_target: Callable[[Circle, float], None]
        if method == "diff_ik":
            chain = diff_ik_chain(stack, start)
            controller = chain

            def set_target(path: Circle, t: float) -> None:
                chain.set_target(*path.at(t))
        else:
            law = cartesian_impedance(stack, stiffness)
            direct = target_chain(stack, law, start)
            controller = direct
            inertia = operational_inertia(law, stack, model) if method == FEED_FORWARD else None

            def set_target(path: Circle, t: float) -> None:
                pose, twist = path.at(t)
                wrench = None
                if inertia is not None:  # Λ ẍ*, Λ at the latest measured configuration
                    wrench = inertia(_latest(loop).position).dot(path.acceleration(t))
                direct.set_target(pose, twist, wrench)

        loop.switch_controller(controller)
        loop.run_ticks(round(CIRCLE_SETTLE / config.period))
        snapshot = loop.snapshot()
        assert snapshot is not None
        start = _tcp(model, snapshot.position)  # where the TCP rests under this method
        path = Circle(start, radius, frequency, ramp_periods / frequency)
        measured_from = path.ramp
        until = path.ramp + periods / frequency
        t0 = loop.now()
        ring = loop.stages.ring("controller")
        first = ring.count
        position_errors, orientation_errors = [], []
        fault = None
        ticks = round(until / config.period)
        for tick in range(ticks):
            # The target for this tick's state: the state is read at the backend's clock now.
            set_target(path, loop.now() - t0)
            loop.run_ticks(1)
            if (tick + 1) % loop.snapshot_decimation:
                continue
            snapshot = loop.snapshot()
            assert snapshot is not None
            if snapshot.fault:
                fault = snapshot.fault
                break
            t = snapshot.stamp - t0
            if t < measured_from:
                continue
            desired, _ = path.at(t)
            pose = _tcp(model, snapshot.position)
            position_errors.append(float(np.linalg.norm(pose[:3, 3] - desired[:3, 3])))
            orientation_errors.append(_angle(desired[:3, :3].dot(pose[:3, :3].T)))
        # This run's ticks, in the ring's order (it wraps after ``capacity`` ticks).
        recorded = np.arange(max(first, ring.count - ring.capacity), ring.count) % ring.capacity
        times = ring.values[recorded] if recorded.size else np.array([math.nan])
        p50, p99 = np.percentile(times * 1e6, [50, 99])
        errors = np.array(position_errors) if position_errors else np.array([math.nan])
        angles = np.array(orientation_errors) if orientation_errors else np.array([math.nan])
        return Tracking(
            method,
            float(np.sqrt(np.mean(errors**2))),
            float(errors.max()),
            float(np.sqrt(np.mean(angles**2))),
            len(position_errors),
            float(p50),
            float(p99),
            fault,
        )
    finally:
        stack.shut_down()


# --- update time -------------------------------------------------------------------------------
def update_times(
    config: StackConfig, stiffness: tuple[float, ...], ticks: int
) -> dict[str, dict[str, float]]:
    """One ``update`` [µs] p50/p99/max of each law over ``ticks`` sampled states (``ct-bench
    timing``'s), on the configuration's robot (no simulation)."""
    stack = build_stack(config)  # not brought up: only its model and controllers are used
    model = stack.model
    samples = _states(model, ticks)
    dt = config.period
    home = np.empty(model.nq)
    home[model.indices(config.joint_names)] = config.home_positions
    laws: dict[str, Controller] = {
        "cartesian_impedance": cartesian_impedance(stack, stiffness),
        "joint_impedance": joint_impedance(stack),
        "diff_ik_chain": diff_ik_chain(stack, model.frame_pose(home)),
    }
    return {name: _summary(_measure(_updater(law, dt), samples)) for name, law in laws.items()}


# --- the bench ---------------------------------------------------------------------------------
def run_robot(
    config_path: str,
    stiffness: tuple[float, ...] | None = None,
    push_seconds: float = 2.0,
    radius: float = 0.05,
    frequency: float = 0.5,
    periods: float = 2.0,
    ramp_periods: float = 1.0,
    ticks: int = 20_000,
) -> dict[str, object]:
    """Every figure on one robot (``config_path``: a controllers.yaml or ``bundled``)."""
    config = bench_config(config_path)
    stiffness = stiffness or default_stiffness()
    pushes = push(config, stiffness, push_seconds)
    tracking = [
        circle(config, method, stiffness, radius, frequency, periods, ramp_periods)
        for method in METHODS
    ]
    worst = max(p.stiffness_error for p in pushes)
    return {
        "config": config_path,
        "tcp_frame": config.tcp_frame,
        "update_rate_hz": config.update_rate,
        "stiffness": list(stiffness),
        "push": {
            "force_n": PUSH_FORCE,
            "seconds": push_seconds,
            "pushes": [asdict(p) for p in pushes],
            "worst_stiffness_error": worst,
            "goal": GOAL_STIFFNESS_ERROR,
            "met": bool(worst <= GOAL_STIFFNESS_ERROR),
        },
        "circle": {
            "radius_m": radius,
            "frequency_hz": frequency,
            "periods": periods,
            "ramp_periods": ramp_periods,
            "methods": {t.method: asdict(t) for t in tracking},
        },
        "update_us": update_times(config, stiffness, ticks),
        "ticks": ticks,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ct-bench cartesian",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help="a robot's controllers.yaml, or 'bundled'; repeatable (default: bundled)",
    )
    parser.add_argument(
        "--stiffness",
        type=float,
        nargs=6,
        metavar="K",
        help="K diagonal [N/m ×3, N·m/rad ×3], base axes (default: the law's)",
    )
    parser.add_argument("--push-seconds", type=float, default=2.0, help="[s] per push axis")
    parser.add_argument("--radius", type=float, default=0.05, help="[m] of the circle")
    parser.add_argument("--frequency", type=float, default=0.5, help="[Hz] of the circle")
    parser.add_argument("--periods", type=float, default=2.0, help="measured, after the ramp")
    parser.add_argument("--ramp", type=float, default=1.0, help="periods of the speed ramp")
    parser.add_argument("--ticks", type=int, default=20_000, help="updates per timing figure")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.ticks <= WARMUP:
        parser.error(f"--ticks must be more than {WARMUP}")
    if min(args.push_seconds, args.radius, args.frequency, args.periods) <= 0 or args.ramp < 0:
        parser.error("--push-seconds, --radius, --frequency, --periods > 0; --ramp ≥ 0")
    logging.getLogger("ct_controllers").setLevel(logging.ERROR)  # one backend line per stack
    started = time.perf_counter()
    robots = [
        run_robot(
            path,
            tuple(args.stiffness) if args.stiffness else None,
            args.push_seconds,
            args.radius,
            args.frequency,
            args.periods,
            args.ramp,
            args.ticks,
        )
        for path in (args.config or [BUNDLED])
    ]
    report = {"robots": robots, "wall_seconds": time.perf_counter() - started}
    if args.json:
        print(json.dumps(report))
        return 0
    for robot in robots:
        _print_robot(robot)
    print(f"({report['wall_seconds']:.0f} s wall)")
    return 0


def _print_robot(robot: dict[str, Any]) -> None:
    stiffness = ", ".join(f"{k:g}" for k in robot["stiffness"])
    print(
        f"ct-bench cartesian: {robot['config']} (TCP {robot['tcp_frame']}), MuJoCo lockstep "
        f"{robot['update_rate_hz']:g} Hz, K = ({stiffness}) [N/m; N·m/rad] in base axes"
    )
    pushes = robot["push"]
    print(
        f"  push {pushes['force_n']:g} N at the TCP, {pushes['seconds']:g} s each: displacement "
        "[mm] against K⁻¹F [mm]"
    )
    for p in pushes["pushes"]:
        shown = ", ".join(f"{v * 1e3:8.4f}" for v in p["displacement"])
        expected = ", ".join(f"{v * 1e3:8.4f}" for v in p["expected"])
        print(
            f"    {p['axis']}: ({shown}) vs ({expected})  error {p['stiffness_error'] * 100:6.3f} %"
            f"  speed {p['speed'] * 1e3:.4f} mm/s  rotation {p['rotation'] * 1e3:.3f} mrad"
        )
    print(
        f"    worst stiffness error {pushes['worst_stiffness_error'] * 100:.3f} % (goal ≤ "
        f"{pushes['goal'] * 100:g} %): {'met' if pushes['met'] else 'NOT met'}"
    )
    path = robot["circle"]
    print(
        f"  circle r = {path['radius_m']:g} m at {path['frequency_hz']:g} Hz, x-y plane, "
        f"{path['periods']:g} periods measured after a {path['ramp_periods']:g}-period ramp"
    )
    print(
        f"    {'method':22s}{'RMS [mm]':>10s}{'max [mm]':>10s}{'RMS [mrad]':>12s}"
        f"{'loop ctrl p50/p99 [µs]':>25s}"
    )
    for name, t in path["methods"].items():
        label = {"diff_ik": "diff_ik + joint_imp.", FEED_FORWARD: "cart. imp. + Λẍ* ff"}.get(
            name, name
        )
        fault = f"  FAULT: {t['fault']}" if t["fault"] else ""
        print(
            f"    {label:22s}{t['rms_m'] * 1e3:10.3f}{t['max_m'] * 1e3:10.3f}"
            f"{t['rms_rad'] * 1e3:12.3f}{t['loop_controller_p50_us']:13.0f} /"
            f"{t['loop_controller_p99_us']:6.0f}{fault}"
        )
    print(f"  one update [µs], {robot['ticks']} states each: p50 / p99 / max")
    for name, figures in robot["update_us"].items():
        print(
            f"    {name:22s}{figures['p50_us']:8.1f} /{figures['p99_us']:8.1f} /"
            f"{figures['max_us']:9.1f}"
        )
