"""Recording to MCAP (ct_controllers.ros.recorder): the node's --record over real rclpy and
loopback DDS, ct-sim --record and ct-bench grasp --record in lockstep; every file is read back
with the MCAP ROS 2 decoder (mcap_ros2), as Foxglove and rosbag2 read it."""

from __future__ import annotations

import itertools
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
import rclpy
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from ros_helpers import ARM, Client, goal, start_node, stop_node, wait_ready
from sensor_msgs.msg import JointState

from ct_controllers.bench.grasp import showcase_trial
from ct_controllers.cli import sim_main
from ct_controllers.config import load_config
from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel
from ct_controllers.ros.recorder import McapRecorder, message_definition
from ct_controllers.ros.tf_publisher import GOAL_FRAME, OBJECT_FRAME

CONFIG = load_config()
MODEL = RobotModel(load_description().urdf, CONFIG.tcp_frame, CONFIG.base_frame)
STATE_TOPICS = {
    "/robot_description": "std_msgs/msg/String",
    "/tf_static": "tf2_msgs/msg/TFMessage",
    "/tf": "tf2_msgs/msg/TFMessage",
    "/ct/joint_states": "sensor_msgs/msg/JointState",
    "/ct/controller_state": "ct_interfaces/msg/ControllerState",
    "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
}


def read(path: Path) -> dict[str, list[tuple[int, Any]]]:
    """topic → [(log_time [ns], decoded message)] in file order; checks the ros2 profile, CDR
    encoding and ros2msg schemas on the way."""
    messages: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    with open(path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=False):
            assert channel.message_encoding == "cdr" and schema is not None
            assert schema.encoding == "ros2msg"
            messages[channel.topic].append((message.log_time, decoded))
            messages.setdefault(f"type:{channel.topic}", [(0, schema.name)])
    return messages


def types(messages: dict[str, list[tuple[int, Any]]]) -> dict[str, str]:
    return {k[5:]: v[0][1] for k, v in messages.items() if k.startswith("type:")}


def stamp_ns(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def assert_monotonic(messages: dict[str, list[tuple[int, Any]]], topic: str) -> None:
    log_times = [t for t, _ in messages[topic]]
    assert all(b >= a for a, b in itertools.pairwise(log_times)), topic
    if topic in ("/ct/joint_states", "/diagnostics"):
        stamps = [stamp_ns(m.header.stamp) for _, m in messages[topic]]
        assert all(b > a for a, b in itertools.pairwise(stamps)), topic
    if topic == "/tf":
        stamps = [stamp_ns(m.transforms[0].header.stamp) for _, m in messages[topic]]
        assert all(b > a for a, b in itertools.pairwise(stamps)), topic


def tcp_from_tf(static: Any, tf: Any) -> np.ndarray:
    """The TCP in the base frame, composed from a /tf_static and a /tf message."""
    edges = {}
    for transform in list(static.transforms) + list(tf.transforms):
        t, r = transform.transform.translation, transform.transform.rotation
        pose = np.eye(4)
        pose[:3, :3] = pin.Quaternion(r.w, r.x, r.y, r.z).toRotationMatrix()
        pose[:3, 3] = [t.x, t.y, t.z]
        edges[transform.child_frame_id] = (transform.header.frame_id, pose)
    pose, frame = np.eye(4), CONFIG.tcp_frame
    while frame != CONFIG.base_frame:
        parent, edge = edges[frame]
        pose, frame = edge @ pose, parent
    return pose


def test_message_definitions_round_trip_through_the_mcap_decoder(tmp_path: Path) -> None:
    """A message written by McapRecorder (rclpy's CDR, the generated ros2msg schema) decodes
    with mcap_ros2 to the same field values, nested types, arrays and strings included."""
    path = tmp_path / "one.mcap"
    recorder = McapRecorder(path)
    sent = JointState(
        name=["a", "bé"], position=[1.5, -2.0], velocity=[0.0, 1e-9], effort=[3.0, 4.0]
    )
    sent.header.stamp.sec, sent.header.stamp.nanosec = 12, 345
    sent.header.frame_id = "base_link"
    recorder.write("/js", sent, 7)
    summary = recorder.close()
    assert summary.counts == {"/js": 1} and summary.dropped == 0
    assert "MSG: std_msgs/Header" in message_definition(JointState)
    ((log_time, decoded),) = read(path)["/js"]
    assert log_time == 7
    assert decoded.header.frame_id == "base_link" and stamp_ns(decoded.header.stamp) == 12e9 + 345
    assert list(decoded.name) == ["a", "bé"]
    assert list(decoded.position) == [1.5, -2.0] and list(decoded.velocity) == [0.0, 1e-9]
    assert list(decoded.effort) == [3.0, 4.0]


def test_the_node_records_its_topics_and_goals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ct_control_node --record FILE.mcap` (as ct-bringup starts it): after a MoveJoints goal
    and a SIGINT, the file holds the state topics, TF, the robot description and the goal with
    its status, feedback and result; stamps are monotonic per topic; the joint states a
    subscriber received are in it, decoded equal field by field. (Started with --viewer too:
    with no display here, the node says why it opens no viewer and runs on.)"""
    path = tmp_path / "node.mcap"
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    process = start_node("--record", str(path), "--viewer")
    received: list[JointState] = []
    feedback: list[Any] = []
    try:
        rclpy.init()
        try:
            client = Client("ct_record_client")
            assert wait_ready(client.move_joints.server_is_ready, 20.0)
            assert client.spin_until(lambda: len(client.joint_states) > 5, 10.0)
            handle = client.send(goal(ARM, [0.3, 0.5, 0.0, -1.2, 0.0, 1.0, 0.0], 0.8), feedback)
            assert client.result(handle).error_code == 0
            received = list(client.joint_states)
            client.node.destroy_node()
        finally:
            rclpy.shutdown()
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=30)
        assert process.returncode == 0, output
    finally:
        stop_node(process)
    assert "recorded" in output and str(path) in output
    assert "--viewer: no display" in output
    messages = read(path)
    expected = {
        **STATE_TOPICS,
        # The node's /ct/joint_states samples again (joint_states_topic auto, in /ct).
        "/joint_states": "sensor_msgs/msg/JointState",
        "/ct/move_joints/goal": "ct_interfaces/action/MoveJoints_Goal",
        "/ct/move_joints/status": "action_msgs/msg/GoalStatus",
        "/ct/move_joints/feedback": "ct_interfaces/action/MoveJoints_Feedback",
        "/ct/move_joints/result": "ct_interfaces/action/MoveJoints_Result",
    }
    assert types(messages) == expected
    for topic in STATE_TOPICS:
        assert_monotonic(messages, topic)
    assert len(messages["/robot_description"]) == 1 and len(messages["/tf_static"]) == 1
    assert messages["/robot_description"][0][1].data.startswith("<?xml")
    assert len(messages["/ct/joint_states"]) >= len(received)
    assert [m.header.stamp for _, m in messages["/joint_states"]] == [
        m.header.stamp for _, m in messages["/ct/joint_states"]
    ]
    assert len(messages["/tf"]) == len(messages["/ct/joint_states"])
    assert len(messages["/ct/move_joints/goal"]) == 1
    assert messages["/ct/move_joints/goal"][0][1].positions[0] == 0.3
    assert [s.status for _, s in messages["/ct/move_joints/status"]] == [2, 4]  # EXECUTING, OK
    assert len(messages["/ct/move_joints/feedback"]) >= len(feedback) > 0
    assert messages["/ct/move_joints/result"][0][1].error_code == 0
    recorded = {stamp_ns(m.header.stamp): m for _, m in messages["/ct/joint_states"]}
    for sent in received:
        decoded = recorded[stamp_ns(sent.header.stamp)]
        assert decoded.header.frame_id == sent.header.frame_id
        assert list(decoded.name) == list(sent.name)
        assert list(decoded.position) == list(sent.position)
        assert list(decoded.velocity) == list(sent.velocity)
        effort = np.array(sent.effort)
        assert np.array_equal(np.array(decoded.effort), effort, equal_nan=True)


def test_ct_sim_records_the_run_in_sim_time(tmp_path: Path) -> None:
    """`ct-sim --record FILE.mcap`: the state topics at 100 Hz of sim time (one joint state
    per 10 ms over the whole run), monotonic stamps, log times equal to the messages' sim-time
    stamps, and each /tf composes with /tf_static to the TCP Pinocchio computes from the joint
    state of the same stamp (1e-9 m)."""
    path = tmp_path / "sim.mcap"
    assert sim_main(["--record", str(path), "--json"]) == 0
    messages = read(path)
    assert types(messages) == STATE_TOPICS
    for topic in STATE_TOPICS:
        assert_monotonic(messages, topic)
    states = messages["/ct/joint_states"]
    duration = (states[-1][0] - states[0][0]) * 1e-9
    assert duration > 9.0 and abs(len(states) - (duration * 100 + 1)) <= 2
    assert all(t == stamp_ns(m.header.stamp) for t, m in states)
    static = messages["/tf_static"][0][1]
    for (_, state), (_, tf) in list(zip(states, messages["/tf"], strict=True))[::50]:
        assert stamp_ns(tf.transforms[0].header.stamp) == stamp_ns(state.header.stamp)
        index = {name: i for i, name in enumerate(state.name)}
        q = np.array([state.position[index[name]] for name in MODEL.joint_names])
        assert np.allclose(tcp_from_tf(static, tf), MODEL.frame_pose(q), atol=1e-9)


def test_the_grasp_bench_records_the_grasp_as_a_goal(tmp_path: Path) -> None:
    """`ct-bench grasp --record FILE.mcap`: one trial recorded with the state topics, the cube
    (ct_object) and the phase machine's target (ct_goal) on /tf, and the grasp as the node
    records a Grasp goal: the goal (its grasp pose at the cube), feedback through the phases to
    DONE, the result SUCCESS with its checks, and the status EXECUTING then SUCCEEDED."""
    path = tmp_path / "grasp.mcap"
    result, lines = showcase_trial(
        load_config(overrides={"mujoco.mode": "lockstep"}), (0.5, 0.05, 0.3), record=str(path)
    )
    assert result.success, result.reason
    assert "recorded" in lines[0]
    messages = read(path)
    assert set(STATE_TOPICS) < set(types(messages))
    for topic in STATE_TOPICS:
        assert_monotonic(messages, topic)
    grasp_goal = messages["/ct/grasp/goal"][0][1]
    assert abs(grasp_goal.grasp_pose.pose.position.x - 0.5) < 1e-9
    phases = [f.phase for _, f in messages["/ct/grasp/feedback"]]
    assert phases[0] == "APPROACH" and {"CLOSE", "HOLD", "RELEASE"} <= set(phases)
    final = messages["/ct/grasp/result"][0][1]
    assert final.error_code == 0 and final.final_phase == "DONE" and list(final.checks)
    assert [s.status for _, s in messages["/ct/grasp/status"]] == [2, 4]
    frames = {t.child_frame_id for _, m in messages["/tf"] for t in m.transforms}
    assert {GOAL_FRAME, OBJECT_FRAME} <= frames


def test_ct_bench_loop_record_runs_paced_with_and_without_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ct-bench loop --record FILE.mcap` adds two paced runs (the node's state messages built
    beside the loop, then also recorded) with their overruns and floors, and the recording it
    made (by the writer process, from bytes serialized once) reads back: joint states, /tf and
    controller states at 100 Hz of wall time, none dropped. (Timing is not judged here: see the
    README for the measured figures.)"""
    import json

    from ct_controllers.bench import loop

    path = tmp_path / "loop.mcap"
    arguments = ["--paced-only", "--no-load", "--paced-seconds", "1", "--record", str(path)]
    assert loop.main([*arguments, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"paced", "paced_messages", "paced_recording"} <= set(report)
    recording = report["paced_recording"]["recording"]
    assert recording["dropped"] == 0 and recording["path"] == str(path)
    messages = read(path)
    assert recording["messages"] == sum(len(v) for k, v in messages.items() if k[:5] != "type:")
    states = len(messages["/ct/joint_states"])
    assert 50 <= states <= 150  # 1 s of paced runs at 100 Hz (trials end early or run on)
    assert len(messages["/tf"]) == states == len(messages["/ct/controller_state"])
    assert_monotonic(messages, "/ct/joint_states")
