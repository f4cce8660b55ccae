"""ct_controllers.sim_demo: the scripted motion behind ``make sim``, whole stack in lockstep."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest
from helpers import cube_distances

from ct_controllers.bench.robots import example_robot_path
from ct_controllers.config import load_config
from ct_controllers.hardware.mujoco_collision import SCENE_CLEARANCE, scene_clearance
from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel
from ct_controllers.sim_demo import (
    FINAL_ERROR_LIMIT,
    MOVE_TIME,
    PATH_SAMPLES,
    PATTERNS,
    SETTLE_TIME,
    SimSummary,
    run_scripted_motion,
    scripted_waypoints,
)


def _run() -> SimSummary:
    return run_scripted_motion(load_config(overrides={"mujoco.mode": "lockstep"}))


@pytest.fixture(scope="module")
def summary() -> SimSummary:
    return _run()


def test_scripted_motion_succeeds(summary):
    """The run ends back home within FINAL_ERROR_LIMIT, and ok says so."""
    assert summary.ok is True
    assert summary.final_error <= FINAL_ERROR_LIMIT
    home = load_config().home_positions[:7]
    np.testing.assert_allclose(summary.final_position, home, atol=FINAL_ERROR_LIMIT)


def test_tracking_error_stays_small(summary):
    """The arm follows the reference within 0.05 rad throughout, and it did really move."""
    assert summary.tracking_error_max < 0.05
    assert 0 < summary.tracking_error_rms <= summary.tracking_error_max
    assert summary.waypoints == len(PATTERNS) + 1


def test_run_covers_every_move_in_sim_time(summary):
    """Sim time covers all moves and settles (lockstep: one period per tick, no ticks lost)."""
    minimum = summary.waypoints * (MOVE_TIME + SETTLE_TIME)
    assert minimum <= summary.sim_time < minimum + 0.2
    assert summary.ticks == summary.timing.ticks
    assert summary.sim_time == pytest.approx((summary.ticks - 10) * 1e-3, abs=1e-9)
    assert summary.timing.jitter.max == 0.0  # nothing is scheduled in lockstep


def test_lockstep_run_is_bit_for_bit_repeatable(summary):
    """A second run ends at exactly the same joint positions (float equality)."""
    again = _run()
    assert again.final_position == summary.final_position
    assert again.ticks == summary.ticks
    assert again.tracking_error_max == summary.tracking_error_max


def test_waypoints_come_from_the_robot_and_stay_inside_its_limits():
    """The scripted waypoints are derived from the configured robot: each inside the URDF
    limits, each arm joint at most 0.5 rad from home and really moved by some waypoint, home
    last; with home moved, the waypoints move with it (they are not fixed numbers)."""
    config = load_config()
    description = load_description(None, mappings={"backend": config.backend})
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)
    arm = model.indices(config.arm_joints)
    home = np.array(config.home_positions[: len(arm)])
    waypoints = scripted_waypoints(model, config)
    assert len(waypoints) == len(PATTERNS) + 1
    np.testing.assert_array_equal(waypoints[-1], home)
    for waypoint in waypoints:
        assert np.all(waypoint >= model.limits.lower[arm])
        assert np.all(waypoint <= model.limits.upper[arm])
        assert np.all(np.abs(waypoint - home) <= 0.5 + 1e-12)
    moved = np.max(np.abs(np.array(waypoints) - home), axis=0)
    assert np.all(moved > 0.05)
    shifted = home + 0.1
    other = load_config(
        overrides={"home_positions": [*shifted, *config.home_positions[len(arm) :]]}
    )
    assert not np.allclose(scripted_waypoints(model, other)[0], waypoints[0])


# The UR3 with gripper of example-robot-data from a home 4 cm above the cube (its upper arm low
# over the table): waypoints from link heights alone run its upper arm into the cube.
UR3 = "ur_description/urdf/ur3_gripper.urdf"
UR3_HOME_NEAR_THE_CUBE = [-0.618, 0.10, -1.189, -0.813, -1.639, -0.831]  # [rad]


def _sampled_paths(waypoints: list[np.ndarray]) -> list[np.ndarray]:
    """Every waypoint and PATH_SAMPLES points of each straight path to it, from home."""
    points, previous = [], waypoints[-1]
    for waypoint in waypoints:
        points += [
            previous + s * (waypoint - previous) for s in np.linspace(0, 1, PATH_SAMPLES + 1)
        ]
        previous = waypoint
    return points


def test_waypoints_and_their_paths_keep_clear_of_the_cube(tmp_path: Path) -> None:
    """The UR3 with gripper (ct-setup's output) from a home 4 cm from the cube, where the
    waypoints from link heights alone run into the cube: with the stack's scene, every waypoint
    and every sampled point of the straight paths between them keeps more than SCENE_CLEARANCE
    from the cube by MuJoCo's own distance (in MujocoSystem.from_config's scene), and ct-sim's
    run from that home ends within FINAL_ERROR_LIMIT."""
    from ct_controllers.setup_assistant.cli import main as setup_main

    with contextlib.redirect_stdout(io.StringIO()):
        assert setup_main([str(example_robot_path(UR3)), "-o", str(tmp_path)]) == 0
    config = load_config(
        tmp_path / "controllers.yaml",
        overrides={"home_positions": UR3_HOME_NEAR_THE_CUBE, "mujoco.mode": "lockstep"},
    )
    description = load_description(config.robot_description, mappings={"backend": "mujoco"})
    model = RobotModel(description.urdf, tcp_frame=config.tcp_frame, base_frame=config.base_frame)

    def nearest(waypoints: list[np.ndarray]) -> float:
        points = [dict(zip(config.arm_joints, q, strict=True)) for q in _sampled_paths(waypoints)]
        return min(d for d, _ in cube_distances(config, description, points))

    assert nearest(scripted_waypoints(model, config)) < 0.0  # heights alone: into the cube
    clear = scripted_waypoints(model, config, scene_clearance(description, config))
    assert nearest(clear) > SCENE_CLEARANCE
    summary = run_scripted_motion(config)
    assert summary.ok and summary.final_error <= FINAL_ERROR_LIMIT


def test_a_fault_during_the_motion_is_one_line_and_exit_1(tmp_path: Path, capsys) -> None:
    """ct-sim on the bundled arm with joint impedance stiffness ×1000 and no damping (unstable
    at 1 kHz by far: the joints ring up until the speed check latches): exit 1 and one line on
    stderr naming the fault, no traceback (the stack's fault reaction ran; not a crash, not bad
    input)."""
    from ct_controllers.cli import sim_main
    from ct_controllers.share import share_directory

    text = (share_directory() / "config" / "controllers.yaml").read_text()
    gains = (
        "stiffness: [600.0, 600.0, 300.0, 300.0, 100.0, 100.0, 50.0, 100.0, 100.0]",
        "damping: [50.0, 50.0, 25.0, 25.0, 6.0, 6.0, 3.0, 4.0, 4.0]",
    )
    changed = text.replace(
        gains[0],
        "stiffness: [6.0e5, 6.0e5, 3.0e5, 3.0e5, 1.0e5, 1.0e5, 5.0e4, 100.0, 100.0]",
        1,
    ).replace(gains[1], "damping: [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 4.0, 4.0]", 1)
    assert changed.count("6.0e5") == 2 and "damping: [0.0," in changed
    config = tmp_path / "controllers.yaml"
    config.write_text(changed)
    code = sim_main(["--config", str(config), "--controller", "joint_impedance"])
    err = capsys.readouterr().err
    assert code == 1, err
    fault_lines = [line for line in err.splitlines() if line.startswith("ct-sim: ")]
    assert len(fault_lines) == 1 and "control loop fault:" in fault_lines[0], err
    assert "Traceback" not in err
