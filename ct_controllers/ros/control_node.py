"""``/ct/controller_manager``: the ROS 2 face of the stack.

Thin by design: it declares parameters, validates goals at the boundary, hands requests to the
control loop and publishes snapshots. It never calls the hardware; the loop thread does.

Publishes ``/ct/joint_states`` (sensor_msgs/JointState, stamped with the measurement time),
``/ct/controller_state``, ``/diagnostics``, ``/robot_description``, ``/tf_static``, ``/tf`` and,
with the MuJoCo backend, ``/clock`` (sim time).
Serves ``/ct/move_joints``, ``/ct/move_to_pose``, ``/ct/grasp``, ``~/identify_payload``
(``ros/identify_payload.py``), ``/ct/<gripper controller>/
gripper_cmd`` (control_msgs GripperCommand / ParallelGripperCommand), ros2_control's controller
manager services (``~/list_controllers``, ``~/switch_controller``, ``~/load_controller``, ...:
``ros/controller_manager_services.py``) and ``~/reset_fault``. Takes streamed TCP targets on
``~/target_pose`` and ``~/target_twist`` while the live parameter ``stream.command_type`` selects
one, with ``~/servo_status`` (``ros/streams.py``). Gains are live parameters (see
``ros/parameters.py``).
"""

from __future__ import annotations

import argparse
import array
import gc
import math
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from ct_controllers.ros.dds import ensure_loopback_dds

ensure_loopback_dds()  # before rclpy creates any participant

import rclpy  # noqa: E402
from rcl_interfaces.msg import SetParametersResult  # noqa: E402
from rclpy.callback_groups import ReentrantCallbackGroup  # noqa: E402
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.signals import SignalHandlerOptions  # noqa: E402

from ct_controllers.chains.grasp_goal import grasp_goal_ik  # noqa: E402
from ct_controllers.config import TARGETS, ConfigError, StackConfig  # noqa: E402
from ct_controllers.controllers.controller import Controller, GainError  # noqa: E402
from ct_controllers.hardware.interface import LifecycleError  # noqa: E402
from ct_controllers.interface_controllers import TRAJECTORY, of_kind  # noqa: E402
from ct_controllers.model.payload import PayloadError  # noqa: E402
from ct_controllers.ros.controller_manager_services import (  # noqa: E402
    ControllerManagerServices,
)
from ct_controllers.ros.follow_joint_trajectory import (  # noqa: E402
    JointTrajectoryControllerServer,
)
from ct_controllers.ros.goals import RESULT_TIMEOUT, GoalArbiter  # noqa: E402
from ct_controllers.ros.grasp_action import GraspServer  # noqa: E402
from ct_controllers.ros.gripper_command_action import gripper_servers  # noqa: E402
from ct_controllers.ros.identify_payload import IdentifyPayloadServer  # noqa: E402
from ct_controllers.ros.move_joints import MoveJointsServer  # noqa: E402
from ct_controllers.ros.move_to_pose import MoveToPoseServer  # noqa: E402
from ct_controllers.ros.node_uniqueness import UniquenessCheck, standard_actions  # noqa: E402
from ct_controllers.ros.parameters import (  # noqa: E402
    PAYLOAD_COM,
    PAYLOAD_MASS,
    PAYLOAD_PARAMETERS,
    declare_all,
    live_gains,
    live_parameters,
    payload_from_parameters,
)
from ct_controllers.ros.recorder import McapRecorder  # noqa: E402
from ct_controllers.ros.state_publishers import StatePublishers  # noqa: E402
from ct_controllers.ros.streams import StreamServer  # noqa: E402
from ct_controllers.runtime.controller_claims import interface_controller_joints  # noqa: E402
from ct_controllers.runtime.controller_manager import (  # noqa: E402
    ControllerFactory,
    ControllerManager,
    joint_controller_factory,
)
from ct_controllers.runtime.payload import carries_payload, stage_payload  # noqa: E402
from ct_controllers.runtime.realtime import GIL_SWITCH_INTERVAL  # noqa: E402
from ct_controllers.runtime.stack import Stack, build_stack  # noqa: E402
from ct_controllers.runtime.timing import GcMonitor  # noqa: E402

GOAL_SHUTDOWN_TIMEOUT = 2.0  # [s] for running goals to end at shutdown (they check every 50 ms)
RESULT_FLUSH_TIME = 0.3  # [s] of spinning after they ended, for their results to be sent
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # each asks the node to stop, once


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (array.array, tuple)) else value


class ControlNode(Node):
    def __init__(
        self,
        record: str | None = None,
        viewer: bool = False,
        result_timeout: float = RESULT_TIMEOUT,
    ) -> None:
        """``record``: an MCAP file to record the node's messages to (state topics, TF, the
        robot description, every goal with its feedback, status and result). ``viewer``: open
        MuJoCo's passive viewer on the simulation (where a display exists; else say why).
        ``result_timeout`` [s]: how long a finished goal's result is kept (rclpy's; its memory
        is held that long)."""
        super().__init__("controller_manager", namespace="/ct")
        uniqueness = UniquenessCheck(self)  # its discovery window runs while the stack is built
        values = {name: _plain(v) for name, v in declare_all(self).items()}
        self.config = StackConfig.from_parameters(values)
        uniqueness.add_actions(standard_actions(self.config.interface_controllers))
        # Gains are live by the controller's type, whatever each instance is called.
        self.live_parameters = live_parameters(self.config.controllers)
        self.stack: Stack = build_stack(self.config)
        # A payload given at launch (payload.mass, payload.com): checked like a live set
        # (ConfigError naming it), taken by the controllers at their first tick.
        try:
            self.payload = payload_from_parameters(
                values[PAYLOAD_MASS], values[PAYLOAD_COM], self.config.payload_limits
            )
        except PayloadError as exc:
            raise ConfigError(str(exc)) from None
        if self.payload is not None:
            stage_payload(
                self.stack.controllers, self.payload, self.config.payload_limits, self.stack.loop
            )
        # Before anything is served or the hardware touched: NameTaken (exit 2) if another
        # live node has this name, serves these actions or, in simulation, this clock.
        uniqueness.verify(publishes_clock=self.stack.hardware.publishes_clock)
        self.loop = self.stack.loop
        self.get_logger().warning(
            f"hardware backend: {self.stack.description.hardware.plugin} "
            f"({self.config.backend}, {self.stack.hardware.describe()})"
        )
        self.manager = ControllerManager(
            self.loop,
            self.stack.controllers,
            {name: str(p["type"]) for name, p in self.config.controllers.items()},
            self.config.default_controller,
            factory=self._carrying(
                joint_controller_factory(self.stack.model, self.config.joint_names)
            ),
            interface_joints=interface_controller_joints(self.config.interface_controllers),
        )
        self.arbiter = GoalArbiter(result_timeout)
        group = ReentrantCallbackGroup()
        self.move_joints = MoveJointsServer(self, self.stack, self.manager, self.arbiter, group)
        self.move_to_pose = MoveToPoseServer(self, self.stack, self.manager, self.arbiter, group)
        self.grasp = GraspServer(
            self, self.stack, self.manager, self.arbiter, grasp_goal_ik(self.stack), group
        )
        # ~/identify_payload: a motion goal; an accepted estimate is set as payload.mass/.com.
        self.identify_payload = IdentifyPayloadServer(
            self, self.stack, self.manager, self.arbiter, group
        )
        self.trajectory_controllers = [
            JointTrajectoryControllerServer(
                self, self.stack, self.manager, self.arbiter, group, name, entries
            )
            for name, entries in of_kind(self.config.interface_controllers, TRAJECTORY).items()
        ]
        # control_msgs GripperCommand / ParallelGripperCommand on <entry>/gripper_cmd
        self.gripper_servers = gripper_servers(self, self.stack, self.manager, self.arbiter, group)
        self.controller_services = ControllerManagerServices(self, self.stack, self.manager, group)
        # ~/target_pose, ~/target_twist: selected by the live parameter stream.command_type
        self.streams = StreamServer(self, self.stack, self.manager, self.arbiter, group)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        # Everything built so far lives for the node's life: move it out of the collector's
        # generations so that collections (which stop every thread, the control thread too)
        # only scan what the running node allocates. Pauses are measured either way.
        gc.collect()
        gc.freeze()
        self.gc_monitor = GcMonitor()  # measures the collections of the running node
        self.gc_monitor.install()
        # The MCAP writer process starts (imports, opens the file) before the loop runs.
        self.recorder = McapRecorder(record) if record else None
        try:
            self.stack.start()
        except Exception:
            self.stack.shut_down()  # release what configure opened (buses, nodes, threads)
            self.gc_monitor.remove()
            if self.recorder is not None:
                self.recorder.close()
            raise
        self.arbiter.recorder = self.recorder
        self.state_publishers = StatePublishers(
            self,
            self.stack,
            self.manager,
            goal_target=self.arbiter.target,
            recorder=self.recorder,
            extra_values=self._diagnostic_values,
        )
        self.state_publishers.start()
        self.viewer = self._open_viewer() if viewer else None

    def _diagnostic_values(self) -> dict[str, str]:
        """/diagnostics' values of the node's own: the payload's and the streams' counters."""
        values = self._payload_diagnostics()
        values.update({key: str(value) for key, value in self.streams.diagnostics().items()})
        return values

    def _payload_diagnostics(self) -> dict[str, str]:
        """/diagnostics: the payload the controllers carry (the parameters', or a grasp's
        identified one until its RELEASE) and the last grasp's identification."""
        carried = self.stack.controllers[self.manager.selected].payload
        values = {
            "payload_mass": "0" if carried is None else f"{carried.mass:.4g}",
            "payload_com": "" if carried is None else " ".join(f"{c:.4g}" for c in carried.com),
        }
        outcome = self.grasp.last_payload
        if outcome is not None:
            values["grasp_payload_status"] = outcome.status
            values["grasp_payload_mass"] = f"{outcome.mass:.4g}"
            values["grasp_payload_message"] = outcome.message
        return values

    def _carrying(self, factory: ControllerFactory) -> ControllerFactory:
        """``factory``, its controllers (loaded later by the controller manager's services)
        carrying the node's payload from their first tick, as the configured ones do."""

        def build(type_name: str, entries: Mapping[str, Any]) -> Controller:
            controller = factory(type_name, entries)
            if self.payload is not None and carries_payload(controller):
                controller.stage_payload(self.payload)
            return controller

        return build

    def _open_viewer(self) -> Any:
        from ct_controllers.hardware.mujoco_view import PassiveViewer, viewer_unavailable

        scene = self.stack.hardware.simulated_scene()
        reason = (
            "this hardware backend simulates nothing" if scene is None else viewer_unavailable()
        )
        if scene is None or reason is not None:
            self.get_logger().warning(f"--viewer: {reason}")
            return None
        try:
            return PassiveViewer(scene)
        except Exception as exc:  # a display that does not answer, no OpenGL
            self.get_logger().warning(f"--viewer: cannot open MuJoCo's viewer: {exc}")
            return None

    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        """Validate a set as a whole; stage each controller's gains and the payload
        (``payload.mass``, ``payload.com``) for the next tick boundary, all together. Nothing
        is staged unless every parameter in the set is valid."""
        # <controller>.type / .params_file (the spawner's) are the services' to check.
        parameters = [p for p in parameters if not self.controller_services.owns(p.name)]
        # stream.command_type: the stream's own check; selected once the whole set passed.
        streams = [p for p in parameters if self.streams.owns(p.name)]
        parameters = [p for p in parameters if not self.streams.owns(p.name)]
        for stream in streams:
            problem = self.streams.check(stream.value)
            if problem is not None:
                return SetParametersResult(successful=False, reason=problem)
        given = {p.name: _plain(p.value) for p in parameters if p.name in PAYLOAD_PARAMETERS}
        try:
            payload_set = bool(given)
            if payload_set:  # the other one as it stands: a set may give mass or com alone
                payload = payload_from_parameters(
                    given.get(PAYLOAD_MASS, self.get_parameter(PAYLOAD_MASS).value),
                    given.get(PAYLOAD_COM, _plain(self.get_parameter(PAYLOAD_COM).value)),
                    self.config.payload_limits,
                )
            grouped = live_gains(parameters, self.live_parameters)
            staged = {}
            warnings: list[str] = []
            for controller, gains in grouped.items():
                target = self.stack.controllers[controller]
                # By each gain's shape: per joint re-ordered by name, the others as given.
                model_order = target.gain_values(gains, self.config.joint_names)
                staged[controller] = target.validate_gains(model_order)
                warnings += self._check_stability(controller, staged[controller])
        except (ValueError, TypeError, ConfigError, GainError, PayloadError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        except Exception as exc:  # a bug must not leave the caller without an answer
            self.get_logger().error(f"set_parameters: {type(exc).__name__}: {exc}")
            return SetParametersResult(
                successful=False, reason=f"internal error: {type(exc).__name__}: {exc}"
            )
        for warning in warnings:  # the set is applied: say what is remarkable about it
            self.get_logger().warning(warning)
        for controller, gains in staged.items():
            self.stack.controllers[controller].stage_gains(gains)
        if payload_set:  # checked above: taken at each controller's next tick, with the gains
            self.payload = payload
            stage_payload(
                self.stack.controllers, payload, self.config.payload_limits, self.stack.loop
            )
        for stream in streams:
            self.streams.select(stream.value)
        return SetParametersResult(successful=True)

    def _check_stability(self, controller: str, gains: dict[str, Any]) -> list[str]:
        """Judge the controller's whole gain state, its current gains (the parameters' values:
        what every accepted set made them) with ``gains`` applied, by the rules of
        :mod:`ct_controllers.runtime.gain_checks`: refuse (GainError) a state that leaves a
        joint without feedback or makes the loop where the arm is unstable and worse, except on
        the way back to the configured gains; return the warnings to log once applied."""
        from ct_controllers.runtime.gain_checks import judge_gains

        check = self.stack.gain_stability.get(controller)
        if check is None:
            return []
        target = self.stack.controllers[controller]
        names = self.config.joint_names
        current: dict[str, Any] = {}
        configured: dict[str, Any] = {}
        for gain in target.GAIN_NAMES:
            parameter = f"{controller}.{gain}"
            if self.has_parameter(parameter):
                value = _plain(self.get_parameter(parameter).value)
                current.update(target.validate_gains(target.gain_values({gain: value}, names)))
            else:  # not a parameter: the controller's own (model order)
                current[gain] = getattr(target, gain)
            given = {gain: self.config.controllers[controller].get(gain, ())}
            configured.update(target.validate_gains(target.gain_values(given, names)))
        snapshot = self.loop.snapshot()
        verdict = judge_gains(
            controller,
            check,
            current,
            gains,
            configured,
            None if snapshot is None else snapshot.position,
            allow_free_joints=self.config.allow_free_joints,
        )
        if verdict.refusal is not None:
            raise GainError(verdict.refusal)
        return list(verdict.warnings)

    def finish_goals(self, executor: Any, timeout: float = GOAL_SHUTDOWN_TIMEOUT) -> int:
        """Before anything shuts down: every running goal ends ABORTED ("node shutting
        down") and its result is sent. Spins ``executor`` meanwhile (results go out through
        it); returns how many goals had not ended within ``timeout`` [s]."""
        self.arbiter.stopping.set()
        deadline = time.monotonic() + timeout
        while self.arbiter.executing > 0 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.02)
        flush = time.monotonic() + RESULT_FLUSH_TIME
        while time.monotonic() < flush:  # the result responses and the final goal status
            executor.spin_once(timeout_sec=0.02)
        return self.arbiter.executing

    def shutdown(self) -> None:
        """Stop publishing and the loop, deactivate the hardware, finish the recording; print
        the timing summary."""
        self.state_publishers.stop()
        if self.viewer is not None:
            self.viewer.close()
        if self.recorder is not None:
            self.arbiter.recorder = None
            try:
                print(f"ct_control_node: {self.recorder.close().describe()}", flush=True)
            except Exception as exc:  # a failed recording: say so, the stop goes on
                print(f"ct_control_node: {exc}", file=sys.stderr, flush=True)
        self.stack.shut_down()
        self.gc_monitor.remove()
        timing = self.loop.timing_summary()
        report = self.loop.realtime_report
        scheduling = "normal scheduling" if report is None else report.describe()
        stages = ", ".join(
            f"{stage} {figures.p50 * 1e6:.0f}/{figures.p99 * 1e6:.0f}"
            for stage, figures in self.loop.stages.summary().items()
        )
        print(
            f"ct_control_node: {timing.ticks} ticks, overruns {timing.overruns}, compute "
            f"{timing.compute.as_us()}, jitter {timing.jitter.as_us()}\n"
            f"  stages p50/p99 [µs]: {stages}\n"
            f"  gc: {self.gc_monitor.collections} collections, longest pause "
            f"{self.gc_monitor.longest * 1e6:.0f} µs\n"
            f"  loop thread: {scheduling}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="ct_control_node")
    parser.add_argument("--target", choices=list(TARGETS), default=None)
    parser.add_argument("--config", help="controllers.yaml to load as parameters")
    parser.add_argument(
        "--record",
        metavar="FILE.mcap",
        help="record the node's topics and goals to an MCAP file (Foxglove, ros2 bag)",
    )
    parser.add_argument(
        "--viewer",
        action="store_true",
        help="open MuJoCo's passive viewer on the simulation (needs a display)",
    )
    parser.add_argument(
        "--result-timeout",
        type=float,
        default=RESULT_TIMEOUT,
        metavar="SECONDS",
        help="how long a finished goal's result is kept for a client that asks late; its "
        f"memory is held that long (default {RESULT_TIMEOUT:g} s, rclpy's)",
    )
    own, ros_args = parser.parse_known_args(arguments)
    if not (math.isfinite(own.result_timeout) and own.result_timeout > 0):
        parser.error(f"--result-timeout must be finite and > 0 s, got {own.result_timeout}")
    extra: list[str] = []
    if own.config:
        extra += ["--params-file", own.config]
    if own.target is not None:  # the launch files' defaults (ct_controllers.launch_plan)
        target = TARGETS[own.target]
        extra += ["-p", f"backend:={target.backend}", "-p"]
        extra += [f"use_sim_time:={str(target.use_sim_time).lower()}"]
    if extra:
        ros_args = ros_args + (["--ros-args"] if "--ros-args" not in ros_args else []) + extra
    # The control thread shares the GIL with the executor threads; the default 5 ms switch
    # interval lets one of them hold it for five control periods (see GIL_SWITCH_INTERVAL).
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    # SIGINT/SIGTERM are ours, not rclpy's: its handlers shut the context down at once, before
    # running goals could be told (their abort then raised, clients waited forever), and a
    # second SIGINT (ros2 launch forwards one after the terminal's) raised KeyboardInterrupt
    # inside the shutdown. Here a signal only asks for the stop; the stop runs once, in order:
    # goals end with a result, then the publishers, the loop, the hardware, the context.
    stop = threading.Event()

    def request_stop(signum: int, _frame: Any) -> None:
        stop.set()
        _absorb_stop_signals()  # the stop runs: any further SIGINT/SIGTERM is absorbed

    for signum in STOP_SIGNALS:
        signal.signal(signum, request_stop)
    rclpy.init(args=["ct_control_node", *ros_args], signal_handler_options=SignalHandlerOptions.NO)
    node = None
    executor = None
    code = 0
    try:
        node = ControlNode(record=own.record, viewer=own.viewer, result_timeout=own.result_timeout)
        executor = MultiThreadedExecutor(num_threads=4)
        executor.add_node(node)
        # spin() waits without a timeout: a stop whose wake-up it misses would leave the node
        # running forever. Waiting at most 0.1 s per turn re-checks, so a stop always ends it.
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
    except ExternalShutdownException:
        pass
    except (ConfigError, ValueError, LookupError, LifecycleError) as exc:
        print(f"ct_control_node: {exc}", file=sys.stderr)
        code = 2
    finally:
        if node is not None:
            if executor is not None and rclpy.ok():
                unanswered = node.finish_goals(executor)
                if unanswered:
                    print(f"ct_control_node: {unanswered} goal(s) did not end", file=sys.stderr)
            node.shutdown()
            node.destroy_node()
        rclpy.try_shutdown()
        _absorb_stop_signals()  # the process ends now, whatever ended the spin
        node = executor = None
        _release_everything()
    return code


def _absorb_stop_signals() -> None:
    """Ignore SIGINT and SIGTERM until the process exits (main thread only). Not a Python
    handler: at interpreter finalization CPython puts every signal with a Python handler back
    to SIG_DFL (``_PySignal_Fini``), and modules are torn down after that, so a SIGINT arriving
    then — launch's own, after a terminal's Ctrl-C, on a loaded machine later than usual —
    ended the process by the signal (exit -2). An ignored signal stays ignored through
    finalization."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _release_everything() -> None:
    """Collect the stopped node's objects before the interpreter exits. The node froze what it
    built (``gc.freeze`` in :class:`ControlNode`): frozen objects are never collected, not even
    at exit, and the loop, the chains and the servers are in reference cycles, so what they held
    at the stop — a running goal's trajectory (a nanobind ``ruckig.Trajectory``) — would outlive
    the interpreter, and nanobind reports every such instance, type and function as leaked on
    standard error. Unfrozen and collected here, once everything is shut down, they are
    released in order."""
    gc.unfreeze()
    gc.collect()


if __name__ == "__main__":
    sys.exit(main())
