"""The written files read back the way the stack reads them, before they are written where the
user asked: its configuration loader (:func:`~ct_controllers.config.load_config`), its
description parser (:func:`~ct_controllers.model.description.load_description`, with the
configured ``backend``), the joints and frames against the URDF as
:func:`~ct_controllers.runtime.stack.build_stack` checks them, the controllers built by their
plugins from the file, and the stack's gain check at ``update_rate``
(:func:`~ct_controllers.runtime.stack.gain_stabilities`, 0 and 1 period of delay) with every
gain and the safe hold's damping doubled. Any failure is :class:`ReadBackError`: a bug of the
setup assistant, not the user's input.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ct_controllers.config import load_config
from ct_controllers.controllers.controller import Controller
from ct_controllers.errors import CtError
from ct_controllers.model.description import load_description
from ct_controllers.model.robot import RobotModel
from ct_controllers.plugins import CONTROLLERS, load_plugin
from ct_controllers.runtime.gain_stability import GainStability
from ct_controllers.runtime.stack import gain_stabilities, to_model_order
from ct_controllers.setup_assistant.design_model import one_angle_urdf
from ct_controllers.setup_assistant.gains import DELAYS, GAIN_MARGIN

CONFIG_NAME = "controllers.yaml"


class ReadBackError(CtError, RuntimeError):
    """A file the setup assistant made does not pass the stack's own checks."""


def _doubled(check: GainStability, controller: Controller | None) -> float:
    if controller is None:  # the safe hold: a fixed (K, D) pair
        assert isinstance(check.feedback, tuple)
        stiffness, damping = check.feedback
        doubled = GainStability(
            check.plant,
            (GAIN_MARGIN * stiffness, GAIN_MARGIN * damping),
            check.configurations,
            check.period,
            check.delay,
        )
        found = doubled.worst()
    else:
        gains = {name: GAIN_MARGIN * getattr(controller, name) for name in controller.GAIN_NAMES}
        found = check.worst(gains)
    return 0.0 if found is None else found.radius


def read_back(files: dict[Path, str], scratch: Path) -> str:
    """Write ``files`` (final path → text) under ``scratch`` and check them (module docstring);
    a one-line verdict, or :class:`ReadBackError`."""
    local: dict[str, Path] = {}
    for path, text in files.items():
        copy = scratch / path.name
        copy.write_text(text)
        local[str(path)] = copy
    config_file = next(copy for name, copy in local.items() if name.endswith(CONFIG_NAME))
    try:
        config = load_config(config_file)
        described = local.get(config.robot_description, Path(config.robot_description))
        description = load_description(described, mappings={"backend": config.backend})
        model = RobotModel(
            one_angle_urdf(description.urdf),
            tcp_frame=config.tcp_frame,
            base_frame=config.base_frame,
        )
    except CtError as exc:
        raise ReadBackError(f"the stack does not load it: {exc}") from exc
    except ValueError as exc:
        raise ReadBackError(f"the stack does not load it: {exc}") from exc
    for group, names in (
        ("arm_joints/gripper_joints", config.joint_names),
        ("<ros2_control>", description.hardware.joint_names),
    ):
        if set(names) != set(model.joint_names) or len(names) != len(model.joint_names):
            raise ReadBackError(f"{group} {list(names)} are not the URDF's {model.joint_names}")
    home = to_model_order(model, config.joint_names, config.home_positions, "home_positions")
    if np.any(home < model.limits.lower - 1e-9) or np.any(home > model.limits.upper + 1e-9):
        raise ReadBackError(f"home_positions {list(config.home_positions)} outside the limits")
    controllers: dict[str, Controller] = {}
    for name, params in config.controllers.items():
        kind = load_plugin(CONTROLLERS, str(params["type"]))
        controllers[name] = kind.from_parameters(model.with_own_data(), config.joint_names, params)
    worst: dict[str, float] = {}
    for delay in DELAYS:
        for name, check in gain_stabilities(config, model, controllers, delay).items():
            found = check.worst()
            if found is not None and not found.stable:
                raise ReadBackError(
                    f"{name} unstable with {delay} period(s) of delay: {found.describe()}"
                )
            doubled = _doubled(check, controllers.get(name))
            if doubled > 1.0 + 1e-6:
                raise ReadBackError(
                    f"{name} without margin with {delay} period(s) of delay: its gains ×"
                    f"{GAIN_MARGIN:g} give spectral radius {doubled:.4f}"
                )
            worst[name] = max(worst.get(name, 0.0), doubled)
    radii = ", ".join(f"{name} {value:.4f}" for name, value in worst.items())
    return (
        f"loads, joints and frames match the URDF, every loop stable at {config.update_rate:g} "
        f"Hz with its gains ×{GAIN_MARGIN:g} (worst spectral radius {radii}; the safe hold's 1 "
        "is its position integrator: it damps, it does not hold a position)"
    )
