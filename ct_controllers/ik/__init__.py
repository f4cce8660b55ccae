"""Full inverse kinematics: goal candidates (e.g. pre-grasp poses) with their residuals."""

from ct_controllers.ik.solver import IkOptions, IkResult, IkSolver

__all__ = ["IkOptions", "IkResult", "IkSolver"]
