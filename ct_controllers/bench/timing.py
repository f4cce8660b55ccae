"""``ct-bench timing``: the time of one controller update on our 7-DOF arm (9 DOF with the
fingers), per controller, beside the same law done by plain Pinocchio calls in a minimal loop
(the floor: what the maths costs from Python without our classes around it).

Each figure is measured over ``--ticks`` updates (default 20,000) on states moving along a sine,
after a warm-up, with ``time.perf_counter_ns`` around the call alone. Garbage collection is left
on, as it is in the control loop.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
import pinocchio as pin

from ct_controllers.controllers.computed_torque import (
    COMPUTED_TORQUE,
    PD,
    PD_GRAVITY,
    ComputedTorqueController,
)
from ct_controllers.controllers.controller import Controller, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.controllers.limiter import CommandLimiter
from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel

WARMUP = 1000
GOAL_P99_US = 60.0  # computed torque update, issue 3
GOAL_RATIO = 2.0  # computed torque p99 within 2× of the floor's


def _states(model: RobotModel, count: int) -> list[tuple[JointState, JointReference]]:
    rng = np.random.default_rng(0)
    middle = (model.limits.lower + model.limits.upper) / 2
    middle = np.where(np.isfinite(middle), middle, 0.0)  # a continuous joint: about 0
    w = 1.0 + 0.3 * np.arange(model.nv)
    samples = []
    for k in range(count):
        t = k * 0.001
        q = middle + 0.3 * np.sin(w * t)
        v = 0.3 * w * np.cos(w * t)
        reference = JointReference(q + 0.01 * rng.standard_normal(model.nv), v, -0.3 * w**2 * q)
        samples.append((JointState(t, q, v), reference))
    return samples


def _measure(call: Callable[[JointState, JointReference], object], samples: list) -> np.ndarray:
    for state, reference in samples[:WARMUP]:
        call(state, reference)
    times = np.empty(len(samples))
    clock = time.perf_counter_ns
    for i, (state, reference) in enumerate(samples):
        start = clock()
        call(state, reference)
        times[i] = clock() - start
    return times / 1000.0  # [µs]


def _updater(controller: Controller, dt: float) -> Callable[[JointState, JointReference], object]:
    def update(state: JointState, reference: JointReference) -> object:
        return controller.update(state, reference, dt)

    return update


def _summary(times_us: np.ndarray) -> dict[str, float]:
    p50, p99 = np.percentile(times_us, [50, 99])
    return {"p50_us": float(p50), "p99_us": float(p99), "max_us": float(times_us.max())}


def robot_urdf(robot: str = "ct_arm", config_path: str | None = None) -> str:
    """The URDF to time: the robot of ``config_path`` (its controllers.yaml), else ``robot``
    (``ct_arm``: the bundled xacro; ``panda``: example-robot-data's)."""
    if config_path is not None:
        from ct_controllers.config import load_config

        config = load_config(config_path)
        return load_description(
            config.robot_description or None, mappings={"backend": "mujoco"}
        ).urdf
    if robot == "panda":
        from ct_controllers.bench.robots import panda_urdf_path

        return panda_urdf_path().read_text()
    if robot != "ct_arm":
        raise ValueError(f"unknown robot '{robot}' (ct_arm, panda)")
    return load_description(mappings={"backend": "mujoco"}).urdf


def run(ticks: int, urdf: str | None = None) -> dict:
    """Every figure on ``urdf`` (None: the bundled arm)."""
    urdf = urdf or robot_urdf()
    model = RobotModel(urdf)
    samples = _states(model, ticks)
    middle = (model.limits.lower + model.limits.upper) / 2
    inertia = np.diag(model.mass_matrix(np.where(np.isfinite(middle), middle, 0.0)))
    kp, kd = inertia * 36.0, inertia * 12.0
    dt = 0.001

    controllers: dict[str, Controller] = {
        "joint_impedance": JointImpedanceController(RobotModel(urdf), kp, kd),
        "pd": ComputedTorqueController(RobotModel(urdf), kp, kd, PD),
        "pd_gravity": ComputedTorqueController(RobotModel(urdf), kp, kd, PD_GRAVITY),
        "computed_torque": ComputedTorqueController(RobotModel(urdf), kp, kd, COMPUTED_TORQUE),
    }
    results: dict[str, dict] = {}
    for name, controller in controllers.items():
        results[name] = _summary(_measure(_updater(controller, dt), samples))

    # Floors: the same laws as bare Pinocchio/numpy calls.
    pin_model = pin.Model(model.model)
    pin_data = pin_model.createData()
    # Pinocchio's configuration: the joint positions themselves unless a joint is continuous
    # (then its (cos, sin), as the controllers convert every tick).
    to_pin = model.pinocchio_configuration if model.continuous_joints else (lambda q: q)

    def floor_computed_torque(state: JointState, reference: JointReference) -> object:
        a = reference.a + kp * (reference.q - state.q) + kd * (reference.v - state.v)
        return pin.rnea(pin_model, pin_data, to_pin(state.q), state.v, a)

    def floor_gravity_pd(state: JointState, reference: JointReference) -> object:
        tau = kp * (reference.q - state.q) + kd * (reference.v - state.v)
        return tau + pin.computeGeneralizedGravity(pin_model, pin_data, to_pin(state.q))

    floors = {
        "computed_torque": _summary(_measure(floor_computed_torque, samples)),
        "pd_gravity": _summary(_measure(floor_gravity_pd, samples)),
    }
    floors["joint_impedance"] = floors["pd_gravity"]

    limiter = CommandLimiter(model.limits.effort)
    zeros = np.zeros(model.nv)
    results["limiter"] = _summary(
        _measure(lambda s, r: limiter.limit(r.q, lambda: zeros, dt), samples)
    )
    ct = results["computed_torque"]
    ratio = ct["p99_us"] / floors["computed_torque"]["p99_us"]
    return {
        "ticks": ticks,
        "controllers": results,
        "floors": floors,
        "computed_torque_goal": {
            "p99_us_limit": GOAL_P99_US,
            "ratio_to_floor_p99": ratio,
            "ratio_limit": GOAL_RATIO,
            "met": bool(ct["p99_us"] <= GOAL_P99_US and ratio <= GOAL_RATIO),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ct-bench timing",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ticks", type=int, default=20_000, help="updates per figure (≥ 10000)")
    parser.add_argument("--config", metavar="FILE", help="the robot of this controllers.yaml")
    parser.add_argument(
        "--robot", choices=("ct_arm", "panda"), default="ct_arm", help="shortcut (no --config)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.ticks < WARMUP + 1:
        parser.error(f"--ticks must be more than {WARMUP}")
    report = run(args.ticks, robot_urdf(args.robot, args.config))
    if args.json:
        print(json.dumps(report))
        return 0
    what = args.config or args.robot
    print(f"ct-bench timing: one update on {what}, {args.ticks} ticks each [µs]")
    print(f"  {'':18s}{'p50':>8s}{'p99':>8s}{'max':>9s}   floor (bare Pinocchio) p50 / p99")
    for name, figures in report["controllers"].items():
        floor = report["floors"].get(name)
        floor_text = f"{floor['p50_us']:6.1f} / {floor['p99_us']:6.1f}" if floor else "   -"
        print(
            f"  {name:18s}{figures['p50_us']:8.1f}{figures['p99_us']:8.1f}"
            f"{figures['max_us']:9.1f}   {floor_text}"
        )
    goal = report["computed_torque_goal"]
    print(
        f"  computed torque p99 {report['controllers']['computed_torque']['p99_us']:.1f} µs "
        f"(goal ≤ {goal['p99_us_limit']:.0f} µs), {goal['ratio_to_floor_p99']:.2f}× the floor's "
        f"p99 (goal ≤ {goal['ratio_limit']:.0f}×): {'met' if goal['met'] else 'NOT met'}"
    )
    return 0
