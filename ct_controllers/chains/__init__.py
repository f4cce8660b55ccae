"""Chains: controllers chained to reference generators for one goal — the Cartesian chain
(differential IK → a joint controller), the MoveToPose chain (a joint-space approach, then the
Cartesian finish) and the grasp runner (the phase machine → differential IK → a joint controller
+ the gripper) — and the factories the ROS layer (and the benches) build them with."""
