"""What a MoveToPose goal runs, without ROS: the goal check's full IK and the chain built on its
solution. The action (``ros/move_to_pose.py``) and ``ct-bench reach`` build both from here, so the
bench measures what the action does.

The goal check: a full IK (:class:`~ct_controllers.ik.solver.IkSolver`) seeded with the measured
configuration, fingers locked, within the joint limits less the margin joint motions keep from
them (``LimitApproach.margin``, 5 mrad: the approach's trajectory then ends on the solution, not
clipped short of it). No converged solution: UNREACHABLE, before anything moves. Of its
solutions, the one the approach goes to (:func:`goal_selection`, ``chains/approach_goal.py``): on
the branch nearest the measured configuration, its approach clear of the scene.

The chain (the chain factory's, ``chains/tcp_chain_factory.py``): for a joint-space controller a
joint-space approach to that solution, then the differential IK (QP) for the finish
(:class:`~ct_controllers.references.joint_approach.JointSpaceApproach`), → the joint controller.
Without a solution (``goal=None``) the differential IK runs alone from the measured state: the
chain before the approach existed, kept for the side-by-side figures of ``ct-bench reach``. A
controller that takes Cartesian targets (Cartesian impedance) gets the pose directly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ct_controllers.chains.approach_goal import GoalSelection
from ct_controllers.chains.tcp_chain_factory import tcp_target_chain
from ct_controllers.chains.tcp_target_chain import TcpTargetChain
from ct_controllers.controllers.controller import Controller, FloatArray
from ct_controllers.hardware.mujoco_collision import SceneCollision, scene_collision
from ct_controllers.ik.solver import IkOptions, IkSolver
from ct_controllers.model.description import DescriptionError
from ct_controllers.runtime.stack import Stack

DEFAULT_POSITION_TOLERANCE = 0.001  # [m], when the goal gives 0
DEFAULT_ORIENTATION_TOLERANCE = 0.01  # [rad], when the goal gives 0
SUCCESS_DWELL = 0.1  # [s] the measured TCP within both tolerances this long: SUCCESS
# Reachability at the boundary is not a hot path: a generous budget, so that a loaded machine
# does not turn "not found in 5 ms" into UNREACHABLE.
IK_TIME_BUDGET = 0.2  # [s]

LOG = logging.getLogger("ct_controllers")


@dataclass(frozen=True)
class PoseRequest:
    """A MoveToPose goal as checked, once, at the boundary (``ros/move_to_pose.py``
    ``validate``) and handed down as is: nothing downstream checks it again.

    pose                   4x4 TCP target [m] in the base frame: a rigid transform (from a unit
                           quaternion), its origin within ``MAX_GOAL_DISTANCE`` of the base's
                           (``ros/pose_goals.py``)
    position_tolerance     [m] > 0: the goal's, or ``DEFAULT_POSITION_TOLERANCE`` for its 0
    orientation_tolerance  [rad] > 0: the goal's, or ``DEFAULT_ORIENTATION_TOLERANCE`` for its 0
    timeout                [s]: the goal's, within [0, ``MAX_DURATION``], or the node's
                           ``move_to_pose.default_timeout`` for its 0
    solution               the goal check's chosen converged IK solution for ``pose``
                           [rad | m], full model order (:func:`goal_selection`): where the
                           chain's joint-space approach goes
    """

    pose: FloatArray
    position_tolerance: float
    orientation_tolerance: float
    timeout: float
    solution: FloatArray


def goal_ik(stack: Stack, max_restarts: int | None = None, least_margin: float = 0.0) -> IkSolver:
    """The goal check's IK (its own model: the solver is not thread-safe): the TCP, the gripper
    joints locked, the arm's joint limits less the margin of the loop's limit approach, or
    ``least_margin`` [rad | m] where that is larger (a chain that keeps further from them).
    ``max_restarts``: a bound on the restarts of a solve (None: as many as its time budget
    allows), for many solves from nearby seeds where a count, not the wall clock, ends one."""
    config = stack.config
    model = stack.model.with_own_data()
    approach = stack.loop.reference_limits.approach
    margin = least_margin
    if approach is not None:
        margin = max(margin, float(approach.margin[model.indices(config.arm_joints)].max()))
    return IkSolver(
        model,
        locked={name: 0.0 for name in config.gripper_joints},
        options=IkOptions(
            time_budget=IK_TIME_BUDGET, limit_margin=margin, max_restarts=max_restarts
        ),
    )


def goal_selection(stack: Stack, ik: IkSolver) -> GoalSelection:
    """Which of ``ik``'s solutions the approach goes to (``chains/approach_goal.py``): on the
    branch nearest the measured configuration, its approach clear of the stack's scene (the
    MuJoCo scene of this description and configuration, whatever the backend). A scene MuJoCo
    cannot build (a mesh format it does not read): no collision check, said once, here."""
    config = stack.config
    model = stack.model
    collision: SceneCollision | None
    try:
        collision = scene_collision(
            stack.description,
            config,
            model.joint_names,
            {n: (j.master, j.multiplier, j.offset) for n, j in model.mimic.items()},
        )
    except (DescriptionError, ValueError) as exc:
        LOG.warning("MoveToPose approaches are not checked for collisions: %s", exc)
        collision = None
    return GoalSelection(
        ik, stack.loop.reference_limits, model.indices(config.arm_joints), collision
    )


def pose_chain(
    stack: Stack, controller: Controller, pose: FloatArray, goal: FloatArray | None
) -> TcpTargetChain:
    """The chain of one goal toward ``pose`` (4x4, base frame), by the chain factory
    (``chains/tcp_chain_factory.py``): to a joint-space ``controller`` through ``goal`` (the
    goal check's IK solution, model order; None: the differential IK alone), to a Cartesian one
    directly."""
    config = stack.config
    return tcp_target_chain(
        stack.model,
        controller,
        config.arm_joints,
        config.cartesian_divisor,
        pose,
        solution=goal,
        reference_limits=stack.loop.reference_limits,
    )
