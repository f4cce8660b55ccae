"""ament_python package ``ct_controllers`` (pip- and colcon-installable)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "ct_controllers"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    package_data={PACKAGE: ["ros/*.xml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
        (f"share/{PACKAGE}/urdf", glob("urdf/*.xacro")),
    ],
    python_requires=">=3.11",
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="ct_controllers maintainers",
    maintainer_email="maintainers@ct-controllers.org",
    description="Python ROS 2 control stack for torque-controlled arms with a gripper",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "ct_control_node = ct_controllers.ros.control_node:main",
            "ct-bringup = ct_controllers.cli:bringup_main",
            "ct-sim = ct_controllers.cli:sim_main",
            "ct-bench = ct_controllers.bench.cli:main",
            "ct-setup = ct_controllers.setup_assistant.cli:main",
        ],
        # Plugins, as pluginlib does for ros2_control: names used in the URDF and controllers.yaml.
        "ct_controllers.hardware": [
            "ct_controllers/MujocoSystem = ct_controllers.hardware.mujoco_system:MujocoSystem",
            "ct_controllers/Ros2ControlBridge = "
            "ct_controllers.hardware.ros2_control_bridge:Ros2ControlBridge",
            "ct_controllers/CanopenCia402System = "
            "ct_controllers.hardware.canopen.system:CanopenCia402System",
        ],
        # Each backend's parameter schema, by the name of its section (= its `backend:` value):
        # the configuration checks a section without importing the backend (nor rclpy).
        "ct_controllers.parameters": [
            "mujoco = ct_controllers.hardware.mujoco_system:PARAMETERS",
            "ros2_control_bridge = "
            "ct_controllers.hardware.ros2_control_bridge_parameters:PARAMETERS",
            "canopen = ct_controllers.hardware.canopen.configuration:PARAMETERS",
        ],
        "ct_controllers.controllers": [
            "ct_controllers/JointImpedance = "
            "ct_controllers.controllers.joint_impedance:JointImpedanceController",
            "ct_controllers/ComputedTorque = "
            "ct_controllers.controllers.computed_torque:ComputedTorqueController",
            "ct_controllers/CartesianImpedance = "
            "ct_controllers.controllers.cartesian_impedance:CartesianImpedanceController",
            # Standard-interface controllers (ct_controllers/interface_controllers.py): an
            # action and its topics, their references through the joint-level controller.
            "ct_controllers/JointTrajectoryController = "
            "ct_controllers.references.trajectory_controller_parameters:"
            "JOINT_TRAJECTORY_CONTROLLER",
            "ct_controllers/GripperActionController = "
            "ct_controllers.tasks.gripper_command_parameters:GRIPPER_ACTION_CONTROLLER",
            "ct_controllers/ParallelGripperActionController = "
            "ct_controllers.tasks.gripper_command_parameters:PARALLEL_GRIPPER_ACTION_CONTROLLER",
        ],
    },
)
