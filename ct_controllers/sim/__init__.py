"""Rigs shared by tests and benches: the whole stack on each backend with its plant (MuJoCo, the
ros2_control bridge against its plant process, CANopen against simulated drives)."""
