"""The same contract tests over every backend — MuJoCo (lockstep), the ros2_control bridge
(against a plant process over loopback DDS) and CANopen CiA 402 (against simulated drives on a
virtual bus): lifecycle order, stamps in the hardware's clock, names not positions, the limiter
before every write, and the watchdog's reaction to a frozen sensor."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np
import pytest
from backends import BACKENDS, Rig, make_rig

from ct_controllers.controllers.controller import FloatArray, JointReference, JointState
from ct_controllers.controllers.joint_impedance import JointImpedanceController
from ct_controllers.hardware.interface import (
    CommandRejected,
    JointCommand,
    LifecycleError,
    LifecycleState,
)

pytestmark = pytest.mark.realtime  # plant rigs in this process (pyproject.toml)


@pytest.fixture(scope="module", params=BACKENDS)
def rig(request, frozen_module_heap) -> Iterator[Rig]:
    """One rig per backend for the whole module; each test leaves it healthy. Real-time
    deadlines of 100-200 ms against threads of this process: the heap is frozen before the first
    rig (conftest.frozen_module_heap)."""
    rig = make_rig(request.param)
    try:
        yield rig
    finally:
        rig.close()


def seconds(rig: Rig, value: float) -> None:
    rig.stack.loop.run_ticks(max(1, round(value / rig.config.period)))


def heal(rig: Rig) -> None:
    """Back to healthy: injection off, fresh data, fault reset."""
    rig.injector.inject(None)
    seconds(rig, 0.1)
    rig.stack.loop.reset_fault()
    seconds(rig, 0.05)
    assert rig.stack.loop.fault is None, rig.stack.loop.reset_refused


@pytest.mark.parametrize("backend", BACKENDS)
def test_lifecycle_order_is_enforced(backend):
    """Before configure nothing can be read; before activate nothing can be written; a
    transition from the wrong state is refused, naming both states; the real backends refuse to
    activate unless armed."""
    from backends import make_rig as _make  # noqa: F401 - same factory, unconfigured use below
    from helpers import bundled_description

    from ct_controllers.config import load_config
    from ct_controllers.runtime.stack import build_stack

    overrides = {"mujoco.mode": "lockstep"} if backend == "mujoco" else {"backend": backend}
    config = load_config(overrides=overrides)
    hardware = build_stack(config, bundled_description(backend)).hardware
    names = hardware.joint_names
    command = JointCommand(0.0, 1, names, hardware.command_interfaces, np.zeros(len(names)))
    with pytest.raises(LifecycleError, match="read"):
        hardware.read()
    with pytest.raises(LifecycleError, match="write"):
        hardware.write(command)
    with pytest.raises(LifecycleError, match="'unconfigured'"):
        hardware.activate()
    assert hardware.state is LifecycleState.UNCONFIGURED
    assert hardware.requires_arming == (backend != "mujoco")


def test_samples_are_stamped_in_the_hardware_clock_and_named(rig):
    """Every sample carries a finite stamp in the hardware's clock (within 0.5 s of now: another
    clock would be years off), stamps never go backwards, most samples (≥ 80 %) pass the guard's
    max_state_age and future checks, and each names exactly the hardware's joints."""
    hardware = rig.stack.hardware
    stamps, accepted = [], 0
    for _ in range(20):
        seconds(rig, rig.config.period)
        sample = hardware.read()
        now = hardware.now()
        assert math.isfinite(sample.stamp) and abs(now - sample.stamp) < 0.5
        assert sorted(sample.joint_names) == sorted(hardware.joint_names)
        age = now - sample.stamp
        accepted += -rig.config.future_tolerance <= age <= rig.config.effective_max_state_age
        stamps.append(sample.stamp)
    assert stamps == sorted(stamps)
    assert accepted >= 16


def test_a_command_reaches_the_joints_it_names(rig):
    """A command listing the joints in a shuffled order puts each value on the joint it names
    at the plant (MuJoCo actuator, forward-controller array, drive target torque); a command
    stamped in the future is rejected."""
    hardware = rig.stack.hardware
    names = list(hardware.joint_names)
    rng = np.random.default_rng(5)
    order = list(rng.permutation(names))
    sample = hardware.read()
    # Gravity hold plus a distinct small offset per joint (the arm barely moves in a cycle).
    loop = rig.stack.loop
    q = np.empty(loop.model.nq)
    q[loop.model.indices(sample.joint_names)] = sample.position
    hold = dict(zip(loop.model.joint_names, loop.model.gravity(q), strict=True))
    offset = {n: 0.5 + 0.25 * i for i, n in enumerate(names)}
    values = np.array([hold[n] + offset[n] for n in order])
    sequence = loop._sequence + 1000
    hardware.write(
        JointCommand(sample.stamp, sequence, tuple(order), ("effort",) * len(names), values)
    )
    loop._sequence = sequence + 1  # the loop writes on after the test's commands
    if rig.backend == "canopen":
        time.sleep(2.5 * rig.config.period)  # the backend's next SYNC cycles carry it
    applied = rig.applied()
    quantum = {"canopen": 0.2}.get(rig.backend, 1e-9)  # CANopen: per-mille of rated torque
    for name in names:
        assert abs(applied[name] - (hold[name] + offset[name])) <= quantum, name
    future = JointCommand(
        hardware.now() + 1.0, sequence + 1, tuple(names), ("effort",) * len(names), values
    )
    with pytest.raises(CommandRejected, match="future"):
        hardware.write(future)
    # The loop stood still while the test wrote and looked: its command deadline may have
    # expired (as it should); back to healthy for the next test.
    heal(rig)


class GreedyImpedance(JointImpedanceController):
    """Asks for ten times every effort limit, alternating in sign."""

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        sign = 1.0 if int(state.stamp / dt) % 2 else -1.0
        return sign * 10.0 * self.model.limits.effort


def test_the_limiter_is_applied_before_every_write(rig):
    """With a controller asking for 10× the effort limits, what the plant takes in never
    exceeds the URDF effort limits, and the limiter reports the saturation."""
    loop = rig.stack.loop
    original = loop.controller
    current = rig.stack.controller
    assert isinstance(current, JointImpedanceController)
    loop.controller = GreedyImpedance(current.model, current.stiffness, current.damping)
    loop.snapshot_decimation = 1
    try:
        saturated = False
        for _ in range(5):
            seconds(rig, 2 * rig.config.period)
            snapshot = loop.snapshot()
            assert snapshot is not None
            saturated |= bool(snapshot.saturated.any())
            limits = dict(zip(loop.model.joint_names, loop.model.limits.effort, strict=True))
            for name, value in rig.max_applied().items():
                assert abs(value) <= limits[name] + 1e-9, name
        assert saturated
    finally:
        loop.controller = original
        rig.stack.loop.hold()
        seconds(rig, 0.2)
        loop.snapshot_decimation = 10
        # Efforts alternating at 10× the limits fling the light fingers past twice their URDF
        # velocity limit: the runaway check latches a fault (as it should); healthy again.
        heal(rig)


def test_a_frozen_sensor_ends_in_the_watchdog_reaction(rig):
    """The same sensor stall on every backend: within state_timeout plus two periods (plus 50 ms
    of thread-scheduling slack for the real-time backends) a watchdog fault is latched, a running
    motion ends FAILED and the first safe command is written; the fault stays latched until the
    sensor is healthy and reset_fault() is called."""
    loop = rig.stack.loop
    motion = loop.request_motion(["joint1"], [0.3], 1.0)
    seconds(rig, 0.2)
    injected = rig.injector.now()
    rig.injector.inject("stall")
    timeout = rig.config.effective_state_timeout
    seconds(rig, timeout + 4 * rig.config.period)
    assert loop.fault is not None and "no fresh state" in loop.fault
    record = loop.fault_record
    assert record is not None and record.first_safe_command is not None
    slack = 0.0 if rig.backend == "mujoco" else 0.05  # [s] scheduling on a shared machine
    assert record.first_safe_command - injected <= timeout + 2 * rig.config.period + slack
    assert loop.motion_status(motion).state == "failed"
    seconds(rig, 0.1)
    assert loop.fault is not None
    heal(rig)
