"""Limits that hold whatever the history (issue 23, items 1 and 2), on the real node over DDS
(loopback), one node for the module, MuJoCo in real time.

Each goal preempts another while a joint is at or near its limit — moving towards it — for every
pair of the three motion actions: MoveJoints and MoveToPose drive joint7 towards its lower limit
(−3.054 rad), Grasp (with joint7 6 mrad from that limit) opens its fingers towards their upper
limit (0.04 m) at the servo's 0.1 m/s. Through both goals and the hold after them, every
joint's reference (the published ``controller_state.desired``) and measured position
(``joint_states``) stay inside the URDF range. Before the fix a plan started on the measured
(q, v) and ran on while it braked (the fingers' 0.5 m/s² and 5 m/s³ stop from 0.1 m/s takes
15 mm): measured before the fix, 6 of the 9 pairs left the range, a finger reference by up to
7.6 mm. Also: grasp efforts the finger servo cannot control are refused with the bound, and a
Grasp that ends PHASE_FAILED leaves the fingers a reference, and the fingers themselves, inside
their range."""

from __future__ import annotations

import math
import subprocess
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
import rclpy
from ct_interfaces.action import Grasp, MoveJoints, MoveToPose
from rclpy.action import ActionClient
from ros_helpers import ARM, CONFIG, HOME, Client, pose_message, wait_ready
from ros_helpers import goal as joint_goal

from ct_controllers.controllers.gripper import GripperController
from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel

DESCRIPTION = load_description()
MODEL = RobotModel(DESCRIPTION.urdf, CONFIG.tcp_frame, CONFIG.base_frame)
NAMES = list(MODEL.joint_names)
LOWER, UPPER = MODEL.limits.lower, MODEL.limits.upper
FINGERS = list(CONFIG.gripper_joints)
J7 = ARM.index("joint7")
J7_LOWER = float(LOWER[MODEL.q_index("joint7")])  # −3.054 rad
OPEN = 0.02  # [m] the fingers' home opening
# Where MoveJoints and MoveToPose start towards joint7's limit (0.104 rad from it), and where a
# Grasp starts: joint7 as close to its limit as a MoveJoints goes (5 mrad: the limit approach).
START = HOME.copy()
START[J7] = -2.95
AT_LIMIT = HOME.copy()
AT_LIMIT[J7] = J7_LOWER
GRASP_AT = AT_LIMIT.copy()
GRASP_AT[J7] = J7_LOWER + 0.006  # a grasp there: IK solutions keep 5 mrad from the limits
NEAR = 0.02  # [rad] joint7 this close to its limit, moving towards it: the next goal preempts
OPENING = 0.03  # [m] the fingers this open, opening (towards 0.04 m): the next goal preempts
WATCH = 1.2  # [s] the preempting goal watched before it is canceled


def configuration(arm: np.ndarray) -> np.ndarray:
    """The model's q for arm positions ``arm`` (arm_joints order), fingers at home."""
    q = np.zeros(MODEL.nq)
    q[MODEL.indices(ARM)] = arm
    q[MODEL.indices(FINGERS)] = OPEN
    return q


def tcp_pose(arm: np.ndarray) -> Any:
    """A PoseStamped of the TCP at arm positions ``arm`` (FK of the model; quaternion by
    Pinocchio's own conversion)."""
    pose = MODEL.frame_pose(configuration(arm))
    x, y, z, w = pin.Quaternion(pose[:3, :3]).coeffs().tolist()
    return pose_message(tuple(pose[:3, 3].tolist()), (x, y, z, w))


class Samples:
    """Every reference and measured position the node publishes while it is recording, per
    joint in the model's order."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.desired: list[np.ndarray] = []
        self.measured: list[np.ndarray] = []
        self._first = (0, 0)

    def start(self) -> None:
        self._first = (len(self.client.controller_states), len(self.client.joint_states))

    def take(self) -> None:
        """Collect what arrived since :meth:`start`."""
        for message in self.client.controller_states[self._first[0] :]:
            index = {n: i for i, n in enumerate(message.joint_names)}
            self.desired.append(np.array([message.desired[index[n]] for n in NAMES]))
        for message in self.client.joint_states[self._first[1] :]:
            index = {n: i for i, n in enumerate(message.name)}
            self.measured.append(np.array([message.position[index[n]] for n in NAMES]))

    def excursions(self) -> dict[str, float]:
        """The furthest each kind of sample went past a joint's range [rad | m] (0 or less:
        never past), and the count of samples."""
        assert self.desired and self.measured, "nothing was published"
        out: dict[str, float] = {}
        for kind, values in (("reference", self.desired), ("measured", self.measured)):
            array = np.array(values)
            past = np.maximum(LOWER - array, array - UPPER)
            worst = np.unravel_index(np.argmax(past), past.shape)
            out[kind] = float(past[worst])
            out[f"{kind} joint"] = NAMES[worst[1]]  # type: ignore[assignment]
        return out


@pytest.fixture(scope="module")
def client(node_process: subprocess.Popen) -> Iterator[Client]:  # type: ignore[type-arg]
    # ros_client, waiting longer for the node: on a loaded 2-core machine it has taken 20 s
    # to come up.
    rclpy.init()
    client = Client("ct_limits_client")
    try:
        client.move_to_pose = ActionClient(client.node, MoveToPose, "/ct/move_to_pose")  # type: ignore[attr-defined]
        client.grasp = ActionClient(client.node, Grasp, "/ct/grasp")  # type: ignore[attr-defined]
        for action in (client.move_joints, client.move_to_pose, client.grasp):  # type: ignore[attr-defined]
            assert wait_ready(action.server_is_ready, 60.0), "no action server"
        assert client.spin_until(lambda: len(client.joint_states) > 0, 10.0), "no joint states"
        yield client
    finally:
        client.node.destroy_node()
        rclpy.shutdown()


def send(client: Client, action: Any, goal: Any) -> Any:
    future = action.send_goal_async(goal)
    assert client.spin_until(future.done, 5.0), "goal not answered"
    handle = future.result()
    assert handle.accepted
    return handle


def move_arm(client: Client, arm: np.ndarray) -> None:
    """MoveJoints to ``arm`` (as fast as the reference limits allow), SUCCESS."""
    handle = send(client, client.move_joints, joint_goal(ARM, arm.tolist(), 0.0))
    result = client.result(handle, 20.0)
    assert result.error_code == MoveJoints.Result.SUCCESS, result.message


def latest(client: Client, names: list[str]) -> np.ndarray:
    message = client.joint_states[-1]
    index = {n: i for i, n in enumerate(message.name)}
    return np.array([message.position[index[n]] for n in names])


def grasp_goal(arm: np.ndarray, approach_offset: float, effort: float = 20.0) -> Grasp.Goal:
    """A Grasp at the TCP pose of ``arm`` — nothing there: the fingers close on nothing."""
    return Grasp.Goal(
        grasp_pose=tcp_pose(arm),
        approach_offset=approach_offset,
        lift_height=0.05,
        grasp_effort=effort,
        hold_duration=0.1,
    )


# The first goal of a pair: (where the arm starts, the goal, the condition that it has a joint
# at or near its limit and moving towards it — then the second goal preempts).
def first_move_joints(client: Client) -> tuple[Any, Callable[[], bool]]:
    goal = START.copy()
    goal[J7] = J7_LOWER  # to the limit itself, slowly enough not to end before the preemption
    handle = send(client, client.move_joints, joint_goal(ARM, goal.tolist(), 3.0))
    return handle, lambda: latest(client, ["joint7"])[0] <= J7_LOWER + NEAR


def first_move_to_pose(client: Client) -> tuple[Any, Callable[[], bool]]:
    goal = START.copy()
    goal[J7] = J7_LOWER + 0.006  # the IK solution's joint7 within its 5 mrad limit margin
    handle = send(
        client,
        client.move_to_pose,  # type: ignore[attr-defined]
        # Tolerances it cannot meet before the preemption (it would otherwise end first).
        MoveToPose.Goal(
            target=tcp_pose(goal), position_tolerance=1e-7, orientation_tolerance=1e-7, timeout=10.0
        ),
    )
    return handle, lambda: latest(client, ["joint7"])[0] <= J7_LOWER + NEAR


def first_grasp(client: Client) -> tuple[Any, Callable[[], bool]]:
    # The fingers closed first (a grasp at the TCP as it is closes on nothing), then a grasp
    # whose APPROACH opens them towards their upper limit at the servo's speed.
    closed = client.result(send(client, client.grasp, grasp_goal(GRASP_AT, 0.0)), 15.0)  # type: ignore[attr-defined]
    assert closed.error_code == Grasp.Result.PHASE_FAILED, closed.message
    handle = send(client, client.grasp, grasp_goal(GRASP_AT, 0.08))  # type: ignore[attr-defined]

    def opening() -> bool:
        message = client.joint_states[-1]
        index = [list(message.name).index(name) for name in FINGERS]
        positions = [message.position[i] for i in index]
        velocities = [message.velocity[i] for i in index]
        return min(positions) >= OPENING and min(velocities) > 0.05

    return handle, opening


FIRST = {
    "MoveJoints": (START, first_move_joints),
    "MoveToPose": (START, first_move_to_pose),
    "Grasp": (AT_LIMIT, first_grasp),
}


def second(client: Client, action: str) -> Any:
    """The preempting goal, away from the limit: back to ``START`` (MoveJoints, MoveToPose) or
    a grasp there (approaching from 5 cm above)."""
    if action == "MoveJoints":
        return send(client, client.move_joints, joint_goal(ARM, START.tolist(), 0.0))
    if action == "MoveToPose":
        goal = MoveToPose.Goal(target=tcp_pose(START), timeout=10.0)
        return send(client, client.move_to_pose, goal)  # type: ignore[attr-defined]
    return send(client, client.grasp, grasp_goal(START, 0.05))  # type: ignore[attr-defined]


@pytest.mark.parametrize("preempting", ["MoveJoints", "MoveToPose", "Grasp"])
@pytest.mark.parametrize("preempted", ["MoveJoints", "MoveToPose", "Grasp"])
def test_a_goal_preempting_another_at_a_limit_keeps_every_joint_inside_its_range(
    client: Client, preempted: str, preempting: str
) -> None:
    """``preempted`` drives a joint towards its limit; when the joint is within ``NEAR`` of it
    (joint7) or past ``OPENING`` (the fingers), still moving, ``preempting`` starts. From the
    first goal to the hold after the second is canceled, every published reference is inside
    the URDF range of its joint, and so is every measured position; the first goal ends
    PREEMPTED."""
    start, first = FIRST[preempted]
    move_arm(client, start)
    samples = Samples(client)
    samples.start()
    handle, near = first(client)
    if not client.spin_until(near, 10.0):
        handle.cancel_goal_async()
        result = client.result(handle, 10.0)
        pytest.fail(
            f"{preempted} never came near the limit: {result.message} {latest(client, NAMES)}"
        )
    at_preemption = latest(client, NAMES)
    following = second(client, preempting)
    first_result = client.result(handle, 5.0)
    assert first_result.error_code == MoveJoints.Result.PREEMPTED, first_result.message
    client.spin_until(lambda: False, WATCH)
    cancel = following.cancel_goal_async()
    assert client.spin_until(cancel.done, 5.0)
    client.result(following, 10.0)
    client.spin_until(lambda: False, 0.5)  # the hold after it
    samples.take()
    excursions = samples.excursions()
    joint7 = at_preemption[MODEL.q_index("joint7")]
    fingers = at_preemption[MODEL.indices(FINGERS)] * 1e3
    print(f"{preempted} preempted by {preempting} (joint7 {joint7:+.4f} rad, fingers {fingers} mm)")
    print(f"  furthest past the range [rad | m] (<= 0: inside): {excursions}")
    assert excursions["reference"] <= 0.0, excursions
    assert excursions["measured"] <= 0.0, excursions


def finger_effort_bound() -> float:
    """[N] the finger servo's smallest controllable force, computed here independently: each
    finger link's mass from the URDF text × standard gravity, plus the servo's damping × speed
    (its documented defaults)."""
    root = ElementTree.fromstring(DESCRIPTION.urdf)
    child = {
        joint.get("name"): joint.find("child").get("link")  # type: ignore[union-attr]
        for joint in root.findall("joint")  # the kinematic joints (not ros2_control's)
    }
    masses = [
        float(link.find("inertial/mass").get("value"))  # type: ignore[union-attr, arg-type]
        for link in root.findall("link")
        if link.get("name") in {child[name] for name in FINGERS}
    ]
    gripper = GripperController(MODEL, FINGERS)
    return max(masses) * 9.81 + gripper.damping * gripper.speed


@pytest.mark.parametrize(
    ("effort", "of_the_bound"),
    [(5e-324, False), (1e-6, False), (1.0, False), (0.999, True)],
    ids=["denormal", "micronewton", "one-newton", "just-below"],
)
def test_a_grasp_effort_the_finger_servo_cannot_control_is_refused_with_the_bound(
    client: Client, effort: float, of_the_bound: bool
) -> None:
    """grasp_effort below the servo's bound (the fingers' weight plus the servo's damping at
    its speed: 2.49 N for the bundled arm) — down to the smallest positive double, up to 0.999
    of the bound — is INVALID_GOAL at the goal check, with a message giving the bound (rounded
    up to the mN), and nothing moves."""
    bound = finger_effort_bound()
    value = bound * effort if of_the_bound else effort
    before = latest(client, NAMES)
    handle = send(client, client.grasp, grasp_goal(START, 0.05, value))  # type: ignore[attr-defined]
    result = client.result(handle, 10.0)
    assert result.error_code == Grasp.Result.INVALID_GOAL, result.message
    shown = math.ceil(bound * 1000.0) / 1000.0
    assert f"below {shown:g} N" in result.message and "finger servo" in result.message
    client.spin_until(lambda: False, 0.2)
    np.testing.assert_allclose(latest(client, NAMES), before, atol=2e-3)


def test_a_grasp_effort_at_the_bound_is_accepted(client: Client) -> None:
    """grasp_effort just above the bound passes the goal check: the grasp runs (its feedback
    arrives) until canceled."""
    bound = finger_effort_bound()
    feedback: list[Any] = []
    future = client.grasp.send_goal_async(  # type: ignore[attr-defined]
        grasp_goal(START, 0.05, bound + 1e-3), feedback_callback=feedback.append
    )
    assert client.spin_until(future.done, 5.0)
    handle = future.result()
    assert client.spin_until(lambda: bool(feedback), 5.0), "the grasp did not run"
    cancel = handle.cancel_goal_async()
    assert client.spin_until(cancel.done, 5.0)
    assert client.result(handle, 10.0).error_code == Grasp.Result.CANCELED


def test_a_grasp_that_closes_on_nothing_leaves_the_fingers_inside_their_range(
    client: Client,
) -> None:
    """A Grasp where there is no object ends PHASE_FAILED ("fingers closed on nothing"):
    through it and idle for 1.5 s after it, every finger reference published and every measured
    finger position is inside the fingers' range [0, 0.04] m (before: references at −3.2 /
    −3.8 mm and fingers at −1.7 / −2.1 mm until the next goal)."""
    move_arm(client, START)
    samples = Samples(client)
    samples.start()
    handle = send(client, client.grasp, grasp_goal(START, 0.0))  # type: ignore[attr-defined]
    result = client.result(handle, 15.0)
    assert result.error_code == Grasp.Result.PHASE_FAILED, result.message
    assert "closed on nothing" in result.message
    client.spin_until(lambda: False, 1.5)
    samples.take()
    fingers = MODEL.indices(FINGERS)
    desired = np.array(samples.desired)[:, fingers]
    measured = np.array(samples.measured)[:, fingers]
    print(
        f"through and after PHASE_FAILED: finger references [{desired.min() * 1e3:.4f}, "
        f"{desired.max() * 1e3:.4f}] mm, measured [{measured.min() * 1e3:.4f}, "
        f"{measured.max() * 1e3:.4f}] mm"
    )
    assert len(desired) > 50 and len(measured) > 50
    assert (desired >= LOWER[fingers]).all() and (desired <= UPPER[fingers]).all()
    assert (measured >= LOWER[fingers]).all() and (measured <= UPPER[fingers]).all()
