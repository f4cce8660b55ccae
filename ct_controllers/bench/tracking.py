"""``ct-bench tracking``: computed torque vs PD vs PD + gravity on a moving trajectory.

Protocol (seed 004): q_d,i(t) = q0_i + A sin((1 + 0.3 i) t), i = 0..n−1, starting on the trajectory
(q(0) = q_d(0), q̇(0) = q̇_d(0)); gains K_p = M_ii(q0) ω², K_d = 2ζω M_ii(q0) for every law (in
computed-torque mode these act inside M, so the error dynamics are ë + K_d ė + K_p e = 0 with
those same numbers); 6 s at dt = 0.002 s.

Plants:
- ``--robot sample`` (default): Pinocchio's sample manipulator, plant = ABA with semi-implicit
  Euler (v += a dt; q ⊕= v dt), as in the seed; the mass sweep scales the plant's link masses.
- ``--robot ct_arm``: our arm with MuJoCo as the plant (lockstep, timestep = dt, no objects), the
  controller's Pinocchio model from the same URDF; the command limiter sits before every write;
  the mass sweep scales MuJoCo's link masses.

``--ct-gains seed`` (default) hands computed torque the same K_p, K_d numbers as the PD laws, as
the seed does; inside M they give joint i the bandwidth ω·sqrt(M_ii), which is tiny for a light
wrist (ct_arm joint 7: M_77 = 0.0024 kg·m² → 0.3 rad/s). ``--ct-gains bandwidth`` gives computed
torque K_p = ω² [s⁻²], K_d = 2ζω [s⁻¹]: the same nominal closed-loop bandwidth as the PD laws.

Error metric: e_k = ‖q_d(t) − q_{k+1}‖₂ over the joints that follow the sine (all six of the
sample; the seven arm joints of ct_arm, whose fingers hold their position [m]), after each
step. ``--error-time start`` (default, the seed's) takes t = the step's start time t_k; ``end``
takes t = t_k + dt, the time the new state belongs to. ``start`` therefore includes the
trajectory's own motion over one step (≈ ‖q̇_d‖ dt), which dominates computed torque's tiny
error and makes it scale with dt.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pinocchio as pin

from ct_controllers.controllers.computed_torque import (
    COMPUTED_TORQUE,
    PD,
    PD_GRAVITY,
    ComputedTorqueController,
)
from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.sim.plants import PinocchioPlant, Plant

LAWS = (PD, PD_GRAVITY, COMPUTED_TORQUE)
LAW_TITLES = {PD: "PD", PD_GRAVITY: "PD + gravity", COMPUTED_TORQUE: "computed torque"}
DT_SWEEP = (0.01, 0.005, 0.002, 0.001)
MASS_SWEEP = (1.0, 0.8, 1.2, 1.5, 2.0, 3.0)
AMPLITUDE = 0.3  # [rad]


@dataclass(frozen=True)
class SineTrajectory:
    """q_d,i(t) = offset_i + A_i sin(w_i t) [rad]; A_i = 0 holds joint i at its offset."""

    offset: FloatArray  # [rad]
    amplitude: FloatArray  # [rad]
    frequency: FloatArray  # [rad/s]

    @staticmethod
    def seed_protocol(offset: FloatArray, moving: FloatArray) -> SineTrajectory:
        """A = 0.3 rad and w = 1 + 0.3 i on the moving joints (i counts moving joints only)."""
        rank = np.cumsum(moving) - 1
        return SineTrajectory(
            offset=offset,
            amplitude=np.where(moving, AMPLITUDE, 0.0),
            frequency=1.0 + 0.3 * np.where(moving, rank, 0),
        )

    def at(self, t: float) -> JointReference:
        w, amplitude = self.frequency, self.amplitude
        return JointReference(
            q=self.offset + amplitude * np.sin(w * t),
            v=amplitude * w * np.cos(w * t),
            a=-amplitude * w**2 * np.sin(w * t),
        )


@dataclass(frozen=True)
class TrackingResult:
    """e_* [rad] (2-norm over joints), tau_peak [N·m] (2-norm); diverged if a state went
    non-finite."""

    e_max: float
    e_rms: float
    e_final: float
    tau_peak: float
    diverged: bool = False


def simulate(
    plant: Plant,
    controller: ComputedTorqueController,
    trajectory: SineTrajectory,
    dt: float,
    duration: float,
    error_time: str,
    limit: Callable[[FloatArray, FloatArray, FloatArray], FloatArray] | None = None,
    trace: list[tuple[float, FloatArray]] | None = None,
) -> TrackingResult:
    """Run one law for ``duration`` [s]; the first sample is taken after the first step.
    ``trace``: gets (t [s], q_d − q per joint [rad]) after each step (the error the metric
    takes, before its norm)."""
    steps = round(duration / dt)
    start = trajectory.at(0.0)
    plant.reset(start.q, start.v)
    errors = np.empty(steps + 1)
    tau_peak = 0.0
    for k in range(steps + 1):
        t = k * dt
        q, v = plant.state()
        reference = trajectory.at(t)
        tau = controller.update(JointState(stamp=t, q=q, v=v), reference, dt)
        if limit is not None:
            tau = limit(tau, q, v)
        tau_peak = max(tau_peak, float(np.linalg.norm(tau)))
        plant.step(tau)
        q_next, v_next = plant.state()
        finite = np.all(np.isfinite(q_next)) and np.all(np.isfinite(v_next))
        if not finite or plant.unstable():
            return TrackingResult(np.inf, np.inf, np.inf, tau_peak, diverged=True)
        desired = reference.q if error_time == "start" else trajectory.at(t + dt).q
        errors[k] = np.linalg.norm((desired - q_next)[trajectory.amplitude > 0])
        if trace is not None:
            trace.append((t + dt, desired - q_next))
    return TrackingResult(
        e_max=float(errors.max()),
        e_rms=float(np.sqrt(np.mean(errors**2))),
        e_final=float(errors[-1]),
        tau_peak=tau_peak,
    )


# --- robots ------------------------------------------------------------------------------------
@dataclass
class Setup:
    """Everything one robot needs: controller model, q0, the joints that follow the sine, and a
    plant factory ``plant(dt, mass_scale)``."""

    controller_model: object  # RobotModel
    q0: FloatArray
    make_plant: Callable[[float, float], Plant]
    limit: Callable[[float], Callable[[FloatArray, FloatArray, FloatArray], FloatArray] | None]
    moving: FloatArray  # True where the joint follows the sine, False where it holds q0


def sample_setup() -> Setup:
    from ct_controllers.model.robot import RobotModel

    model = pin.buildSampleModelManipulator()
    robot = RobotModel(model, tcp_frame="effector_body", base_frame="universe")

    def make_plant(dt: float, scale: float) -> Plant:
        return PinocchioPlant(robot.with_mass_scale(scale), dt)

    return Setup(
        robot,
        np.array(pin.neutral(model)),
        make_plant,
        lambda dt: None,
        np.ones(model.nv, dtype=bool),
    )


def ct_arm_setup() -> Setup:
    from ct_controllers.config import load_config
    from ct_controllers.model.description import load_description
    from ct_controllers.model.robot import RobotModel
    from ct_controllers.sim.mujoco_plant import MujocoPlant, limiter_for

    config = load_config()
    description = load_description(mappings={"backend": "mujoco"})
    robot = RobotModel(description.urdf, config.tcp_frame, config.base_frame)
    q0 = np.empty(robot.nq)
    q0[robot.indices(config.joint_names)] = config.home_positions
    moving = np.zeros(robot.nv, dtype=bool)
    moving[robot.indices(config.arm_joints)] = True

    def make_plant(dt: float, scale: float) -> Plant:
        return MujocoPlant(description, robot, dt, scale)

    return Setup(robot, q0, make_plant, lambda dt: limiter_for(robot, dt), moving)


# --- the benchmark -----------------------------------------------------------------------------
def run(
    robot: str, dt: float, omega: float, duration: float, error_time: str, ct_gains: str = "seed"
) -> dict:
    setup = sample_setup() if robot == "sample" else ct_arm_setup()
    model = setup.controller_model
    inertia = np.diag(model.mass_matrix(setup.q0))  # type: ignore[attr-defined]
    kp, kd = inertia * omega**2, 2.0 * 1.0 * omega * inertia
    trajectory = SineTrajectory.seed_protocol(setup.q0, setup.moving)

    if ct_gains == "seed":
        ct_kp, ct_kd = kp, kd
    else:
        ct_kp, ct_kd = np.full_like(kp, omega**2), np.full_like(kd, 2.0 * omega)

    def law(mode: str) -> ComputedTorqueController:
        gains = (ct_kp, ct_kd) if mode == COMPUTED_TORQUE else (kp, kd)
        return ComputedTorqueController(model, *gains, mode)  # type: ignore[arg-type]

    def one(mode: str, step: float, scale: float = 1.0) -> TrackingResult:
        return simulate(
            setup.make_plant(step, scale),
            law(mode),
            trajectory,
            step,
            duration,
            error_time,
            setup.limit(step),
        )

    laws = {mode: one(mode, dt) for mode in LAWS}
    dt_sweep = []
    for step in DT_SWEEP:
        result = one(COMPUTED_TORQUE, step)
        dt_sweep.append(
            {
                "dt": step,
                "e_rms": result.e_rms,
                "e_final": result.e_final,
                "diverged": result.diverged,
            }
        )
    mass_sweep = []
    for scale in MASS_SWEEP:
        pdg, ct = one(PD_GRAVITY, dt, scale), one(COMPUTED_TORQUE, dt, scale)
        mass_sweep.append(
            {
                "scale": scale,
                "pd_gravity_e_rms": pdg.e_rms,
                "computed_torque_e_rms": ct.e_rms,
                "diverged": [
                    mode for mode, r in ((PD_GRAVITY, pdg), (COMPUTED_TORQUE, ct)) if r.diverged
                ],
            }
        )
    return {
        "robot": robot,
        "dt": dt,
        "omega": omega,
        "duration": duration,
        "error_time": error_time,
        "ct_gains": ct_gains,
        "kp": kp.tolist(),
        "kd": kd.tolist(),
        "ct_kp": ct_kp.tolist(),
        "ct_kd": ct_kd.tolist(),
        "laws": {
            mode: {k: v for k, v in asdict(r).items() if k != "diverged"}
            | ({"diverged": True} if r.diverged else {})
            for mode, r in laws.items()
        },
        "dt_sweep": dt_sweep,
        "mass_sweep": mass_sweep,
    }


def plot(
    path: str,
    robot: str,
    dt: float,
    omega: float,
    duration: float,
    error_time: str,
    ct_gains: str = "seed",
) -> None:
    """The tracking error of each joint that follows the sine, over time, one panel per law
    (each on its own scale: they differ by orders of magnitude), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    setup = sample_setup() if robot == "sample" else ct_arm_setup()
    model = setup.controller_model
    inertia = np.diag(model.mass_matrix(setup.q0))  # type: ignore[attr-defined]
    kp, kd = inertia * omega**2, 2.0 * omega * inertia
    if ct_gains == "seed":
        ct_kp, ct_kd = kp, kd
    else:
        ct_kp, ct_kd = np.full_like(kp, omega**2), np.full_like(kd, 2.0 * omega)
    trajectory = SineTrajectory.seed_protocol(setup.q0, setup.moving)
    joints = np.flatnonzero(trajectory.amplitude > 0)
    figure, axes = plt.subplots(len(LAWS), 1, sharex=True, figsize=(8, 7))
    for axis, mode in zip(axes, LAWS, strict=True):
        gains = (ct_kp, ct_kd) if mode == COMPUTED_TORQUE else (kp, kd)
        controller = ComputedTorqueController(model, *gains, mode)  # type: ignore[arg-type]
        trace: list[tuple[float, FloatArray]] = []
        result = simulate(
            setup.make_plant(dt, 1.0),
            controller,
            trajectory,
            dt,
            duration,
            error_time,
            setup.limit(dt),
            trace,
        )
        t = np.array([sample[0] for sample in trace])
        errors = np.array([sample[1] for sample in trace])
        for joint in joints:
            axis.plot(t, errors[:, joint] * 1e3, linewidth=1, label=f"joint {joint + 1}")
        axis.set_ylabel("q_d − q [mrad]")
        axis.set_title(
            f"{LAW_TITLES[mode]}: RMS ‖e‖ {result.e_rms * 1e3:.3g} mrad, "
            f"max {result.e_max * 1e3:.3g} mrad",
            fontsize=10,
        )
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=7, ncol=len(joints), loc="upper right")
    axes[-1].set_xlabel("time [s]")
    figure.suptitle(
        f"tracking error per joint, {robot}, dt {dt * 1e3:g} ms, ω {omega:g} rad/s, "
        f"computed-torque gains: {ct_gains}",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def print_report(report: dict) -> None:
    print(
        f"ct-bench tracking: robot {report['robot']}, dt {report['dt']} s, ω {report['omega']} "
        f"rad/s, ζ 1, {report['duration']} s, error at step {report['error_time']}"
    )
    print("  K_p = M_ii(q0) ω² = " + " ".join(f"{k:.2f}" for k in report["kp"]))
    print("  K_d = 2ζω M_ii(q0) = " + " ".join(f"{k:.2f}" for k in report["kd"]))
    if report["ct_gains"] != "seed":
        print(
            f"  computed torque: K_p = ω² = {report['ct_kp'][0]:.2f} s⁻², "
            f"K_d = 2ζω = {report['ct_kd'][0]:.2f} s⁻¹ on every joint"
        )
    print(
        f"\n  {'law':18s}{'e_max [rad]':>14s}{'e_rms [rad]':>14s}{'e_final [rad]':>15s}"
        f"{'tau_peak [N·m]':>16s}"
    )
    for mode, r in report["laws"].items():
        print(
            f"  {LAW_TITLES[mode]:18s}{r['e_max']:14.4f}{r['e_rms']:14.4f}{r['e_final']:15.4f}"
            f"{r['tau_peak']:16.2f}"
        )
    print(
        f"\n  computed torque, dt sweep\n  {'dt [s]':>8s}{'e_rms [rad]':>14s}{'e_final [rad]':>15s}"
    )
    for row in report["dt_sweep"]:
        note = "  diverged" if row["diverged"] else ""
        print(f"  {row['dt']:8.3f}{row['e_rms']:14.4f}{row['e_final']:15.4f}{note}")
    base = report["mass_sweep"][0]
    print(
        f"\n  plant mass × scale (controller keeps the nominal model), e_rms [rad] and ratio to "
        f"scale 1\n  {'scale':>6s}{'PD + gravity':>14s}{'CT':>10s}{'PD+g ×':>10s}{'CT ×':>9s}"
    )
    for row in report["mass_sweep"]:
        print(
            f"  {row['scale']:6.1f}{row['pd_gravity_e_rms']:14.4f}"
            f"{row['computed_torque_e_rms']:10.4f}"
            f"{row['pd_gravity_e_rms'] / base['pd_gravity_e_rms']:10.2f}"
            f"{row['computed_torque_e_rms'] / base['computed_torque_e_rms']:9.2f}"
            + (f"  diverged: {', '.join(row['diverged'])}" if row["diverged"] else "")
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ct-bench tracking",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--robot", choices=["sample", "ct_arm"], default="sample")
    parser.add_argument("--dt", type=float, default=0.002, help="[s] control and plant step")
    parser.add_argument("--omega", type=float, default=6.0, help="[rad/s] gain bandwidth")
    parser.add_argument("--duration", type=float, default=6.0, help="[s]")
    parser.add_argument("--error-time", choices=["start", "end"], default="start")
    parser.add_argument("--ct-gains", choices=["seed", "bandwidth"], default="seed")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--plot", metavar="FILE.png", help="also plot each law's error per joint over time"
    )
    args = parser.parse_args(argv)
    for name in ("dt", "omega", "duration"):
        value = getattr(args, name)
        if not (np.isfinite(value) and value > 0):
            parser.error(f"--{name} must be positive and finite, got {value}")
    report = run(args.robot, args.dt, args.omega, args.duration, args.error_time, args.ct_gains)
    if args.plot:
        plot(
            args.plot,
            args.robot,
            args.dt,
            args.omega,
            args.duration,
            args.error_time,
            args.ct_gains,
        )
    if args.json:
        print(json.dumps(report))
    else:
        print_report(report)
        if args.plot:
            print(f"  plot: {args.plot}")
    return 0
