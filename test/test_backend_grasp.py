"""A grasp end to end on every backend that can enforce its grip force (issue 15, items 3 and 4),
on the project's own rigs: the bridge's plant process and the simulated CiA 402 drives hold a
5 cm object between the fingers (a one-sided contact spring at half its width,
``sim/object_contact.py``); MuJoCo has its cube. Fingers on the position interface grip
through their drives' effort limit, which the grasp runner asks for and the loop sets on the
backend; a backend that cannot set it (the bridge) has the goal refused, by the Grasp action of
a running node too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from backends import run_grasp
from ros_helpers import bridge_node, pose_message, ros_client, wait_ready

from ct_controllers.bench.grasp import top_down_grasp
from ct_controllers.chains.grasp_runner import build_grasp_runner, grip_force_refusal
from ct_controllers.sim.rigs import MODES, Rig, make_rig
from ct_controllers.tasks.phases import GraspGoal, Phase

pytestmark = pytest.mark.realtime  # plant rigs in this process (pyproject.toml)

GRASP_EFFORT = 15.0  # [N] per finger: not the task's default 20 N, nor the URDF's 40 N
FINGERS = ("left_finger_joint", "right_finger_joint")
# (backend, mode): every backend and interface whose grip force can be enforced.
GRASPING = [
    ("mujoco", "position"),
    ("ros2_control_bridge", "effort"),
    ("canopen", "torque"),
    ("canopen", "position"),
]


@pytest.fixture(params=GRASPING, ids=[f"{b}-{m}" for b, m in GRASPING])
def rig(request: pytest.FixtureRequest, frozen_heap: None) -> Iterator[Rig]:
    backend, mode = request.param
    width = None if backend == "mujoco" else 0.05  # MuJoCo's scene has its own 5 cm cube
    rig = make_rig(backend, object_width=width, **MODES[(backend, mode)])
    rig.extra["mode"] = mode
    try:
        yield rig
    finally:
        rig.close()


# Real-time rigs (100 Hz deadlines of 200 ms against the drives' and bus threads of this process)
# on a 2-core VM whose host takes CPU at times: one of session 10's two fresh-clone CI runs had
# both CANopen cases fail at once (a 208 ms state gap; an approach over 6 s), the other passing
# them in 10 s. One re-run on a fresh rig; a real regression fails both. To go: the rigs'
# deadlines judged against measured scheduling gaps instead (issue note, session 10).
@pytest.mark.flaky(reruns=1)
def test_a_grasp_runs_end_to_end_with_the_grip_force_asked(rig: Rig) -> None:
    """The whole grasp (approach from above, close, lift 10 cm, hold 0.5 s, put down, release,
    retreat) with grasp_effort 15 N and the stack's default joint controller reaches DONE within
    30 s. Through the hold stage the object is pressed with the force asked, as the plant itself
    knows it (the contact model's force; MuJoCo's contact forces) — within 0.5 N of 15 N, not
    the 40 N the drives could push with — and the finger effort the controllers measure (the
    drives' own report: motor force, not contact force) is −15 N within 0.1 N (CANopen: one
    per-mille step more). Without an object sensor CLOSE ends on the stall judged by that
    measured effort (``finger_stall_effort``)."""
    stack, loop = rig.stack, rig.stack.loop
    loop.run_ticks(round(0.2 / rig.config.period))
    runner = build_grasp_runner(stack, stack.controllers[rig.config.default_controller])
    runner.task.start(
        GraspGoal(grasp_pose=top_down_grasp(0.5, 0.0, 0.0), grasp_effort=GRASP_EFFORT)
    )
    loop.switch_controller(runner)
    fingers = stack.model.indices(FINGERS)
    contact: list[list[float]] = []
    measured: list[np.ndarray] = []

    def sample() -> None:
        contact.append(list(rig.contact_forces().values()))
        snapshot = loop.snapshot()
        assert snapshot is not None
        measured.append(snapshot.measured_effort[fingers])

    task = run_grasp(rig, runner, sample)
    assert task.phase is Phase.DONE, task.failure
    assert contact, "never in the hold stage"
    print(f"{rig.backend}/{rig.extra['mode']}: contact {contact[-1]}, measured {measured[-1]}")
    np.testing.assert_allclose(contact, GRASP_EFFORT, atol=0.5)
    tolerance = 0.1 + (0.04 if rig.backend == "canopen" else 0.0)
    np.testing.assert_allclose(measured, -GRASP_EFFORT, atol=tolerance)
    if runner.sense_object is None:
        assert "finger_stall_effort" in task.checks, task.checks


def test_the_bridge_cannot_enforce_a_grip_force_on_position_fingers() -> None:
    """The ros2_control bridge offers no effort limit (its forward command controller takes
    positions only): with the fingers on the position interface every grasp_effort is refused,
    naming the finger joint and the backend; on the effort interface the gripper servo's own
    clip enforces it, nothing is refused."""
    position = make_rig("ros2_control_bridge", **MODES[("ros2_control_bridge", "position")])
    try:
        hardware = position.stack.hardware
        assert hardware.effort_limit_range("left_finger_joint") is None
        refusal = grip_force_refusal(hardware, FINGERS, GRASP_EFFORT)
        assert refusal is not None
        assert "left_finger_joint" in refusal and "Ros2ControlBridge" in refusal, refusal
        assert "cannot limit" in refusal
    finally:
        position.close()
    effort = make_rig("ros2_control_bridge")
    try:
        assert grip_force_refusal(effort.stack.hardware, FINGERS, GRASP_EFFORT) is None
    finally:
        effort.close()


def test_the_grasp_action_refuses_a_grip_force_it_cannot_enforce(tmp_path: Path) -> None:
    """The node on the ros2_control bridge with every joint on the position interface (against
    the plant process): a Grasp goal of 15 N ends INVALID_GOAL at once, its message naming the
    finger joint and saying the force cannot be enforced; the arm is not moved (no goal ran)."""
    from ct_interfaces.action import Grasp
    from rclpy.action import ActionClient

    with (
        bridge_node(
            tmp_path,
            "ct_grasp_refusal",
            plant_options={"interface": "position", "object_width": 0.05},
            **{"ros2_control_bridge.command_interface": "position"},
        ) as (_, plant),
        ros_client("ct_grasp_refusal_client") as client,
    ):
        action = ActionClient(client.node, Grasp, "/ct/grasp")
        assert wait_ready(action.server_is_ready, 10.0)
        before = plant.report()["position"]
        goal = Grasp.Goal(
            grasp_pose=pose_message((0.5, 0.0, 0.025)),
            approach_offset=0.08,
            lift_height=0.1,
            grasp_effort=GRASP_EFFORT,
            hold_duration=0.5,
        )
        future = action.send_goal_async(goal)
        assert client.spin_until(future.done, 5.0)
        result = client.result(future.result(), 10.0)
        assert result.error_code == Grasp.Result.INVALID_GOAL, result.message
        assert "cannot be enforced" in result.message, result.message
        assert "left_finger_joint" in result.message, result.message
        after = plant.report()["position"]
        assert max(abs(after[n] - before[n]) for n in before) < 1e-3
