"""Steady ticks keep no memory (issue 18, item 2), measured with ``tracemalloc`` on the real stack
(MuJoCo lockstep, Pinocchio, the default joint controller, the limiter; no ROS).

After a warm-up (every array, ring and cache the loop keeps has been built), 1,000 steady ticks
are traced: the net growth of the memory Python allocated — what was allocated during the ticks
and is still held after them — must be (near) zero. Transient objects (a JointState per fresh
sample, the controller's output) are freed within their tick and do not count; the peak above
the start says how large they are together. The report (``pytest -s``) gives both, and the net
growth per stage, by the module that allocated: read and write (the backend and the interface),
guard, controller (controllers, model, references, chains, tasks), limiter, loop (the tick's
skeleton, timing records, faults, snapshots: ``runtime/``).

The bound, ``NET_BOUND`` = 1 KiB over the 1,000 ticks: the smallest object a tick could leak is a
float (24 B), so keeping one per tick would grow by ≥ 24 KiB, and keeping one per snapshot (every
10 ticks) by ≥ 2.4 KiB — both well over the bound; what the bound admits are one-off
allocations (a dict resized once, an interpreter cache), not anything that grows with the ticks.

:func:`steady_tick_growth` takes any stack and controller: a chain (the grasp runner) is measured
the same way once it is set up on the stack (a started task), by a test calling it with that
controller.
"""

from __future__ import annotations

import gc
import tracemalloc
from dataclasses import dataclass

import pytest
from helpers import lockstep_config

from ct_controllers.controllers.controller import Controller
from ct_controllers.runtime.stack import Stack

CONFIG = lockstep_config()
TICKS = 1000  # steady ticks traced
WARM_UP = 500  # ticks before tracing: every buffer, ring and cache built
TRACED_WARM_UP = 100  # traced ticks before the measured ones (a multiple of 10: snapshots)
NET_BOUND = 1024  # [B] net growth allowed over the TICKS ticks (see the module docstring)
# Reachable arm target [rad] (arm_joints order), away from home.
TARGET = (0.3, 0.5, 0.1, -1.4, 0.1, 1.0, 0.2)

# Where an allocation happened -> the stage it belongs to (first match of the module path).
STAGES = (
    ("hardware/guard.py", "guard"),
    ("hardware/", "read/write"),
    ("controllers/limiter.py", "limiter"),
    ("controllers/", "controller"),
    ("model/", "controller"),
    ("references/", "controller"),
    ("chains/", "controller"),
    ("tasks/", "controller"),
    ("runtime/", "loop"),
)


@dataclass(frozen=True)
class TickGrowth:
    """Traced memory over ``ticks`` steady ticks: ``net`` [B] still held after them, per stage
    (``by_stage`` [B], allocating module -> stage; "other" for numpy's and Python's own files),
    and ``peak`` [B] the most held above the start at any moment (the transient)."""

    ticks: int
    net: int
    peak: int
    by_stage: dict[str, int]

    @property
    def net_per_tick(self) -> float:
        return self.net / self.ticks

    def report(self) -> str:
        stages = ", ".join(f"{stage} {size:+d} B" for stage, size in sorted(self.by_stage.items()))
        return (
            f"{self.ticks} ticks: net {self.net:+d} B ({self.net_per_tick:+.2f} B/tick), "
            f"peak {self.peak} B above the start; by stage: {stages or 'nothing'}"
        )


def _stage_of(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "/ct_controllers/" not in path:
        return "other"
    module = path.split("/ct_controllers/", 1)[1]
    for prefix, stage in STAGES:
        if module.startswith(prefix):
            return stage
    return "other"


def steady_tick_growth(
    stack: Stack, controller: Controller | None = None, ticks: int = TICKS, warm_up: int = WARM_UP
) -> TickGrowth:
    """Switch ``stack``'s loop to ``controller`` (None: keep the running one), run ``warm_up``
    ticks and ``TRACED_WARM_UP`` more under tracemalloc, then ``ticks`` ticks: the net growth of
    traced memory over those (after a garbage collection on both sides), per stage, and the
    transient peak."""
    loop = stack.loop
    if controller is not None:
        loop.switch_controller(controller)
    loop.run_ticks(warm_up)
    ignored = (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__))
    tracemalloc.start()
    try:
        # Traced ticks first: what the loop holds from tick to tick (the last state, command,
        # snapshot) is then traced on both sides, and only a difference counts.
        loop.run_ticks(TRACED_WARM_UP)
        gc.collect()
        before = tracemalloc.take_snapshot()
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        loop.run_ticks(ticks)
        peak = tracemalloc.get_traced_memory()[1] - start
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # Filtered once both are taken: the filters' own pattern compiling is in neither.
    before, after = before.filter_traces(ignored), after.filter_traces(ignored)
    by_stage: dict[str, int] = {}
    for difference in after.compare_to(before, "filename"):
        if difference.size_diff:
            stage = _stage_of(difference.traceback[0].filename)
            by_stage[stage] = by_stage.get(stage, 0) + difference.size_diff
    return TickGrowth(ticks, sum(by_stage.values()), peak, by_stage)


@pytest.fixture
def stack(lockstep_stack: Stack) -> Stack:
    return lockstep_stack


def test_holding_ticks_keep_no_memory(stack):
    """The default joint controller holding the home pose: 1,000 steady ticks (read, guard,
    controller, limiter, write, timing records, snapshots) keep less than NET_BOUND bytes,
    whichever stage allocated them, and no fault is latched."""
    growth = steady_tick_growth(stack)
    print(f"\nholding: {growth.report()}")
    assert stack.loop.fault is None
    assert stack.loop.stale_ticks == 0  # every tick computed from a fresh sample
    assert abs(growth.net) <= NET_BOUND, growth.report()


def test_tracking_ticks_keep_no_memory(stack):
    """The default joint controller tracking a joint motion (a trajectory sampled every tick, its
    status updated every tick) for the whole traced window: the same bound on the net growth."""
    loop = stack.loop
    motion = loop.request_motion(CONFIG.arm_joints, TARGET, 5.0)  # longer than warm-up + ticks
    growth = steady_tick_growth(stack)
    print(f"\ntracking: {growth.report()}")
    status = loop.motion_status(motion)
    assert status is not None and status.state == "running" and 0 < status.progress < 1
    assert loop.fault is None
    assert abs(growth.net) <= NET_BOUND, growth.report()


def test_grasp_chain_ticks_keep_no_memory():
    """The whole grasp chain — observation with the object sensor, the phase machine, the QP
    differential IK, computed torque, the gripper servo — switched in as a goal does and
    approaching the pre-grasp pose for the whole traced window (one stage: a new stage builds
    its target and dwell timer, and a phase change is kept by the task on purpose): the same
    bound on the net growth over 1,000 steady ticks."""
    from ct_controllers.bench.grasp import grasp_setup, random_cubes, top_down_grasp
    from ct_controllers.tasks.phases import GraspGoal, Phase

    cube = next(random_cubes(1))
    setup = grasp_setup(CONFIG, cube, install=False)
    try:
        setup.task.start(GraspGoal(grasp_pose=top_down_grasp(*cube)))
        growth = steady_tick_growth(setup.stack, setup.runner, warm_up=50)
        print(f"\ngrasp chain: {growth.report()}")
        assert setup.stack.loop.fault is None
        assert setup.task.phase is Phase.APPROACH and setup.task.stage == "pre_grasp"
        assert abs(growth.net) <= NET_BOUND, growth.report()
    finally:
        setup.stack.shut_down()
