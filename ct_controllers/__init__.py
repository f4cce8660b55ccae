"""ct_controllers: a ROS 2 control stack in Python for torque-controlled arms with a gripper."""

import os as _os

# MuJoCo chooses its OpenGL backend once, when it is imported: with no display that must be EGL
# for offscreen rendering (videos: hardware/mujoco_view.py); with a display MuJoCo's default
# (GLFW) also serves its viewer. An explicit MUJOCO_GL is left as it is.
if not (_os.environ.get("DISPLAY") or _os.environ.get("WAYLAND_DISPLAY")):
    _os.environ.setdefault("MUJOCO_GL", "egl")
