"""The node's resident memory: the real node (a separate process started as ``ct-bringup sim``,
real DDS on loopback) does not grow while idle nor keep what 300 mixed goals allocated once
their results expired (``ct-bench soak``'s run, :mod:`ct_controllers.bench.soak`); and the
leak behind the idle growth that was measured (~8 KB/s), checked on its own."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from ct_controllers.bench.soak import run_soak
from ct_controllers.ros.tf_publisher import _pose_values, quaternion_xyzw

# Bounds [kB]. The idle rate was ~8 KB/s (+0.9 MB in 120 s); what is left is page-granular
# noise of the allocators (4 kB pages). Goals raise the node's RSS once, by ~1.2–1.4 MB over
# the first 300 and ~1.7 MB over the first 600, then it stays: `ct-bench soak --goals 1200`
# measured +1676 kB for the first 600 goals and +176 kB for the next 600 (results expired each
# time); GOAL_BOUND is that plateau with a margin. Before, with rclpy's 15 min expiry every
# result was still held, and the idle rate and the goal frame's quaternion leak came on top.
IDLE_WINDOW = 120.0  # [s]
# After the 300 goals the idle node still grows a little: +204 and +228 kB over the 120 s on the
# merged code of issues 23/24 (1.7–1.9 kB/s; +44 kB on the branch that fixed the leak alone),
# against +920 kB before the fix. That residue is not traced yet (issue 23's note); the bound
# is twice what was measured, so the fixed 7.7 kB/s leak (+920 kB) cannot come back unseen.
IDLE_BOUND = 400  # [kB] over IDLE_WINDOW
GOALS = 300
GOAL_BOUND = 2048  # [kB] RSS after the goals − after the warm-up (results expired both times)


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


def test_the_node_does_not_grow_idle_nor_keep_what_300_goals_allocated(capsys):
    """The real node with a 3 s result expiry: 30 warm-up goals, then 300 mixed goals
    (MoveJoints, MoveToPose, Grasp; preempting each other, some canceled, some run to their
    end): every goal answered with a result; once their results expired, RSS within 2 MB of
    where the warm-up left it (the plateau that 1200 goals reach, see GOAL_BOUND); then the
    client leaves and for 120 s with nothing connected RSS grows less than 200 kB (it grew
    ~0.9 MB in 120 s before: the ct_object frame's quaternion leak). The node exits 0 on
    SIGINT."""
    report = run_soak(goals=GOALS, warmup=30, result_timeout=3.0, idle=IDLE_WINDOW)
    with capsys.disabled():
        print(f"\n{report.describe()}")
    assert report.unanswered == 0, report.describe()
    assert report.exit_code == 0, report.describe()
    assert report.goal_growth < GOAL_BOUND, report.describe()
    assert report.idle_growth < IDLE_BOUND, report.describe()
