"""ct_controllers.sim.plants: the seed's Pinocchio plant keeps the stack's joint positions (one per
joint, a continuous joint's angle unwrapped), also on a robot with a continuous joint."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ct_controllers.model.robot import RobotModel
from ct_controllers.sim.plants import PinocchioPlant

# A pendulum on a continuous joint: a 1 kg point mass 0.5 m from the axis (y), gravity −z.
PENDULUM = """<robot name="pendulum">
  <link name="base"/>
  <link name="arm">
    <inertial><origin xyz="0 0 -0.5"/><mass value="1.0"/>
      <inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <joint name="hinge" type="continuous">
    <parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
    <limit effort="10" velocity="10"/>
  </joint>
</robot>"""
LENGTH, MASS, G = 0.5, 1.0, 9.81


def test_pinocchio_plant_steps_a_continuous_joint_past_pi_unwrapped() -> None:
    """Semi-implicit Euler from θ = π − 0.01 (nearly upright, the mass above the axis), spinning
    at 3 rad/s: each step's acceleration is the pendulum's own (g/l · sin θ about the upright,
    computed here by hand, independent of Pinocchio), and the angle passes π continuously
    (unwrapped, never jumping to −π)."""
    robot = RobotModel(PENDULUM)
    assert robot.continuous_joints == ("hinge",)
    dt = 1e-3
    plant = PinocchioPlant(robot, dt)
    q, v = np.array([math.pi - 0.01]), np.array([3.0])
    plant.reset(q, v)
    angles = [q[0]]
    for _ in range(20):
        theta, omega = plant.state()
        theta, omega = float(theta[0]), float(omega[0])
        # θ = 0 hangs down (mass at −z); torque of gravity about y: −m g l sin θ, I = m l².
        expected = -G / LENGTH * math.sin(theta)
        plant.step(np.zeros(1))
        new_theta, new_omega = plant.state()
        assert (float(new_omega[0]) - omega) / dt == pytest.approx(expected, rel=1e-4, abs=1e-6)
        assert float(new_theta[0]) - theta == pytest.approx(float(new_omega[0]) * dt, rel=1e-9)
        angles.append(float(new_theta[0]))
    assert angles[-1] > math.pi  # passed the upright, unwrapped
    assert np.all(np.diff(angles) > 0)
