"""The Grasp goal's reachability check, without ROS: the ``/ct/grasp`` action (its goal check,
``ros/grasp_action.py``) and ``ct-bench grasp`` (before each trial) run this same check, so a
pose the action refuses as UNREACHABLE is reported so by the bench too, not as a timeout.

Each of the goal's poses — the grasp pose, the pre-grasp pose (backed off along the tool z) and
the place pose where given — needs a converged full IK solution within the joint limits (the
goal check's solver, :func:`~ct_controllers.chains.pose_goal.goal_ik`: the gripper joints
locked, the limits less the approach's margin), seeded with the measured configuration.
"""

from __future__ import annotations

from ct_controllers.ik.solver import IkSolver
from ct_controllers.tasks.phases import GraspGoal
from ct_controllers.types import FloatArray


def unreachable_pose(ik: IkSolver, goal: GraspGoal, q: FloatArray) -> str | None:
    """Why ``goal`` is unreachable from ``q`` (full model order [rad | m]): the first of its
    poses without a converged IK solution, named, with the IK's residual [m, rad]; None when
    every pose has one."""
    for name, pose in (
        ("grasp_pose", goal.grasp_pose),
        ("pre-grasp pose", goal.pre_grasp_pose),
        ("place_pose", goal.place_pose),
    ):
        if pose is None:
            continue
        candidate = ik.solve(pose, seed=q)
        if not candidate.converged:
            return (
                f"{name}: no IK solution within the joint limits (residual "
                f"{candidate.position_residual:.4f} m, {candidate.orientation_residual:.4f} rad)"
            )
    return None
