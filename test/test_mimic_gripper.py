"""A gripper of two fingers, one mimicking the other (the Franka Panda of example-robot-data,
configured by ct-setup: ``gripper_joints: [panda_finger_joint1]``, panda_finger_joint2 its
``<mimic>`` follower, an equality constraint in the MuJoCo scene): the grasp bench's trials on
it — the real stack, MuJoCo lockstep, the object sensor — reach DONE, and the follower finger
moves with the actuated one (its body presses on the cube as hard as the contact check asks).

Cost: one ct-setup, TRIALS grasp trials of ~5 s sim time each (~3 s wall each, idle machine).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from ct_controllers.bench import grasp
from ct_controllers.bench.robots import example_robot_path
from ct_controllers.config import StackConfig, load_config
from ct_controllers.setup_assistant.cli import main as setup_main
from ct_controllers.tasks.phases import GraspParameters, Phase

TRIALS = 2  # seeded cubes (seed 1: the bench's first two)


def _panda() -> Path:
    return example_robot_path("panda_description/urdf/panda.urdf")


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> StackConfig:
    out = tmp_path_factory.mktemp("panda")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = setup_main([str(_panda()), "-o", str(out)])
    assert code == 0, printed.getvalue()
    loaded = load_config(out / "controllers.yaml", overrides={"mujoco.mode": "lockstep"})
    assert loaded.gripper_joints == ("panda_finger_joint1",)  # the premise: one actuated finger
    return loaded


def test_a_grasp_with_a_mimic_finger_succeeds(config: StackConfig) -> None:
    """Each of TRIALS seeded trials reaches DONE within the bench's limit, CLOSE ending on
    contact on both fingers: the sensor sees two finger bodies (the actuated joint's and its
    follower's) though one joint is commanded, and each presses the cube with at least the
    contact force — the follower moved with its master."""
    contact = GraspParameters().contact_force
    for trial in range(TRIALS):
        result, setup = grasp.run_trial(
            config, trial, grasp.trial_cube(1, trial, grasp.robot_scene(config).region)
        )
        assert result.success, result
        assert len(setup.sensor.finger_ids) == 2
        closed = next(t for t in setup.task.transitions if t.source == Phase.CLOSE)
        assert closed.reason == "contact on both fingers", closed
        forces = [v for k, v in closed.values.items() if k.endswith("_force")]
        assert len(forces) == 2 and min(forces) >= contact, closed.values
        assert "finger0_opening" in closed.values and "finger1_opening" not in closed.values


def test_each_finger_squeezes_with_the_grasp_effort(config: StackConfig) -> None:
    """grasp_effort is the squeeze on each finger, whatever drives it: the Panda's one motor
    moves both fingers (the follower by <mimic>), so its joint effort is twice the force per
    finger (virtual work). Measured by MuJoCo's own contact forces (the object sensor) while
    the cube is held in HOLD: each finger's median within 10 % of grasp_effort — before, the
    master's effort was split and each finger pressed half (10 N of a 20 N goal)."""
    import numpy as np

    forces: list[np.ndarray] = []

    class HoldForces:
        def __init__(self, setup: grasp.GraspSetup) -> None:
            self.setup = setup

        def started(self, stack: object) -> None:
            pass

        def ticked(self, stack: object) -> None:
            if self.setup.task.phase == Phase.HOLD:
                reading = self.setup.sensor.observe().contact_forces
                if reading is not None:
                    forces.append(np.array(reading))

    cube = grasp.trial_cube(1, 0, grasp.robot_scene(config).region)
    result, _ = grasp.run_trial(config, 0, cube, observers=lambda setup, goal: [HoldForces(setup)])
    assert result.success, result
    goal = grasp.GraspGoal(grasp_pose=np.eye(4))
    held = np.array(forces)
    assert held.shape[0] > 10 and held.shape[1] == 2
    np.testing.assert_allclose(np.median(held, axis=0), goal.grasp_effort, rtol=0.1)


def test_the_backends_bench_grasps_with_both_fingers_on_mujoco(config: StackConfig) -> None:
    """`ct-bench backends`' grasp scenario on MuJoCo (effort interface) with the Panda: the rig
    reads MuJoCo's contact force of each finger body — the actuated finger's and its mimic
    follower's, two forces for one gripper joint (this raised a ValueError before) — and both
    hold the 15 N asked within 1 N while the cube is held."""
    from ct_controllers.bench.backends import GRASP_EFFORT, run_backend

    path = Path(config.robot_description).parent / "controllers.yaml"
    (row,) = run_backend("mujoco", "effort", ("grasp",), config_path=str(path))
    assert row.ok, row
    assert row.final_error is not None and row.final_error <= 1.0, row
    assert GRASP_EFFORT == 15.0
