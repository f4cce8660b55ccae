"""The Grasp goal's reachability check, without ROS: the ``/ct/grasp`` action (its goal check,
``ros/grasp_action.py``) and ``ct-bench grasp`` (before each trial) run this same check, so a
pose the action refuses as UNREACHABLE is reported so by the bench too, not as a timeout.

Each of the goal's poses — the grasp pose, the pre-grasp pose (backed off along the tool z) and
the place pose where given — needs a converged full IK solution within the joint limits (the
goal check's solver, :func:`grasp_goal_ik`: the gripper joints locked, the limits less the
grasp's differential IK's margin), seeded with the measured configuration.
"""

from __future__ import annotations

from ct_controllers.chains.pose_goal import goal_ik
from ct_controllers.ik.solver import IkSolver
from ct_controllers.references.diff_ik_parameters import DEFAULT_POSITION_MARGIN
from ct_controllers.runtime.stack import Stack
from ct_controllers.tasks.phases import GraspGoal
from ct_controllers.types import FloatArray


def grasp_goal_ik(stack: Stack, max_restarts: int | None = None) -> IkSolver:
    """The Grasp goal check's IK: :func:`~ct_controllers.chains.pose_goal.goal_ik` with the
    joint limits less the margin the grasp's differential IK keeps from them
    (``DEFAULT_POSITION_MARGIN``, 0.05 rad) where that is the larger. A grasp runs on that IK
    alone, with no joint-space approach to a solution as MoveToPose has (its goal check keeps
    the approach's 5 mrad): a pose whose every solution takes a joint nearer its limit than
    the QP's margin is one the grasp stalls short of (the SO-101's lift, 8 mm short with its
    wrist pitch at the margin), so it is refused at the check."""
    return goal_ik(stack, max_restarts, least_margin=DEFAULT_POSITION_MARGIN)


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


def no_gripper_refusal(fingers: tuple[str, ...] | list[str]) -> str | None:
    """Why a Grasp cannot run on a robot whose configured ``gripper_joints`` are ``fingers``,
    or None when it has a gripper. An arm without one (e.g. the UR5) runs every other action.
    The Grasp action's goal check and ``ct-bench grasp`` refuse with it alike."""
    if len(fingers) > 0:
        return None
    return (
        "this robot has no gripper (gripper_joints is empty in its configuration): Grasp needs "
        "one; MoveJoints and MoveToPose work without"
    )
