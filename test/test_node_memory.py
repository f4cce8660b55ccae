"""The node's resident memory: the real node (a separate process started as ``ct-bringup sim``,
real DDS on loopback) does not grow while idle nor keep what 150 mixed goals allocated once
their results expired (``ct-bench soak``'s run, :mod:`ct_controllers.bench.soak`, shorter than
its default); and, each
on its own, the leak behind the idle growth that was measured (7.7 kB/s) and the timing
summaries' growing copies behind the node's growth in its first ~77 s (~15 kB/s)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from ct_controllers.bench.soak import run_soak
from ct_controllers.ros.tf_publisher import _pose_values, quaternion_xyzw
from ct_controllers.runtime.timing import StageRecorder, TimingRecorder

# Bounds [kB]. The fixed leak (the ct_object quaternion, 80 B per state message, goal or no goal)
# grew the idle node 7.7 kB/s: +920 kB in 120 s. The window follows the goals, the client
# gone, once RSS has not moved for 8 s (`soak.QUIET`; a leak never lets it: then after 45 s).
# Before the timing summaries' fix the node also grew ~15 kB/s for its first ~77 s
# (test_timing_summaries_allocate_nothing_the_size_of_their_rings), which is where the "growth
# after the goals" of earlier runs came from; after it the idle node measures +0 kB in 120 s.
# The suite runs a shorter window and half the goals than issue 23's spec (300 goals, 120 s idle;
# 194 s, the suite's longest test): `ct-bench soak --goals 300 --idle 120` runs the spec, as it
# was shown when the issue was resolved (+0 kB in 120 s). The window was 45 s with a 75 kB bound
# until session 14; 20 s with 33 kB bounds the same rate (1.67 kB/s, 0.4 pages of 4 kB a second).
IDLE_WINDOW = 20.0  # [s] idle after the goals, the client gone
IDLE_BOUND = 33  # [kB] over IDLE_WINDOW: the leak's +154 kB in 20 s would be 4.7x over it
# Goals raise the node's RSS once: +0.6 MB over 300 goals (results expired) with the timing
# summaries' fix; before it, +0.7-1.6 MB over 100-300 goals and ~1.7 MB over 600 (up to ~1 MB of
# that the node's first-77-s growth), then +176 kB for the next 600 (`--goals 1200`). GOAL_BOUND
# is the 600-goal plateau with a margin: goals that kept 20 kB each (a result never expired:
# ~2 kB) cross it.
GOALS = 150
WARMUP = 20
# [kB] RSS after the goals − after the warm-up (results expired both times): 150 goals that
# kept 20 kB each would cross it too.
GOAL_BOUND = 2048


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1])


def test_tf_quaternions_of_row_major_poses_do_not_leak():
    """The /tf message's quaternion of a 4x4 pose (``_pose_values``, each ``ct_object`` and
    ``ct_goal`` frame at the state rate) 50,000 times: this process's RSS grows less than 1 MB
    (``pin.Quaternion`` of a row-major 3x3 leaked the 80 B matrix eigenpy converted it into:
    +3.9 MB), and the quaternion is the pose's rotation: the matrix rebuilt from its components
    by the textbook formula equals the input to 1e-12."""
    rng = np.random.default_rng(7)
    poses = [pin.SE3.Random().homogeneous for _ in range(10)]  # row-major (C) 4x4 arrays
    for pose in poses:
        x, y, z, w = quaternion_xyzw(pose[:3, :3])
        rebuilt = np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
            ]
        )
        np.testing.assert_allclose(rebuilt, pose[:3, :3], atol=1e-12)
        assert _pose_values(pose)[:3] == pose[:3, 3].tolist()
    for _ in range(2000):  # whatever is allocated once
        _pose_values(poses[0])
    before = _rss_kb()
    for index in rng.integers(0, len(poses), 50_000):
        _pose_values(poses[index])
    grown = _rss_kb() - before
    print(f"RSS after 50,000 quaternions: {grown:+d} kB")
    assert grown < 1024, grown


def test_timing_summaries_allocate_nothing_the_size_of_their_rings():
    """The loop's timing summaries (the controller_state and diagnostics figures, each second)
    over full rings (65,536 ticks; 16,384 per stage) allocate less than 64 KiB at their peak
    (tracemalloc, which numpy reports its arrays' data to): copies of the filled part of each
    ring, growing with it, raised the node's RSS ~13 kB/s for the first ~75 s of its life
    (1-2 MB of copies at once, 512 KiB each). The figures equal numpy's percentiles of the
    rings, and the rings are left as they were."""
    import tracemalloc

    rng = np.random.default_rng(3)
    timing, stages = TimingRecorder(), StageRecorder(stages=("read", "write"))
    for tick in range(timing.capacity + 100):  # wrapped: every ring full
        start = tick * 1e-3 + rng.uniform(0.0, 1e-4)
        timing.record(start, tick * 1e-3, rng.uniform(1e-4, 9e-4), overrun=False)
        stages.record_all({"read": rng.uniform(1e-5, 1e-4), "write": rng.uniform(1e-5, 2e-4)})
    rings = {
        "compute": timing._compute.copy(),
        "jitter": timing._jitter.copy(),
        "period": timing._period.copy(),
    }
    stage_rings = {stage: stages.samples(stage) for stage in ("read", "write")}
    timing.summary(), stages.summary()  # whatever is allocated once
    tracemalloc.start()
    try:
        summary, stage_summary = timing.summary(), stages.summary()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"peak traced memory of the summaries: {peak} B")
    assert peak < 64 * 1024, peak
    for name, ring in rings.items():
        figures = getattr(summary, name)
        p50, p99 = np.percentile(ring, [50, 99])
        assert (figures.p50, figures.p99, figures.max, figures.count) == (
            p50,
            p99,
            ring.max(),
            ring.size,
        )
        np.testing.assert_array_equal(getattr(timing, f"_{name}"), ring)
    for stage, ring in stage_rings.items():
        p50, p99 = np.percentile(ring, [50, 99])
        assert (stage_summary[stage].p50, stage_summary[stage].p99) == (p50, p99)
        assert stage_summary[stage].count == stages.capacity
        np.testing.assert_array_equal(stages.samples(stage), ring)


def test_the_node_does_not_grow_idle_nor_keep_what_its_goals_allocated(capsys):
    """The real node (``ct-bringup sim``, its own process) with a 2 s result expiry: 20
    warm-up goals, then 150 mixed goals (MoveJoints, MoveToPose, Grasp; preempting each other,
    some canceled, some run to their end): every goal answered with a result, and once their
    results expired RSS within 2 MB of where the warm-up left it (GOAL_BOUND); then the client
    leaves and, RSS settled, for 20 s with nothing connected RSS grows less than 33 kB (the
    fixed ct_object quaternion leak grew it 7.7 kB/s: ~154 kB). The node exits 0 on SIGINT."""
    report = run_soak(
        goals=GOALS,
        warmup=WARMUP,
        result_timeout=2.0,
        idle=IDLE_WINDOW,
        sample_period=5.0,
    )
    with capsys.disabled():
        print(f"\n{report.describe()}\nidle samples [s, kB]: {report.idle_samples}")
    described = report.describe() + "\n" + "\n".join(report.node_log_tail)
    assert report.unanswered == 0, described
    assert report.exit_code == 0, described
    assert report.goal_growth < GOAL_BOUND, described
    assert report.idle_growth < IDLE_BOUND, described
