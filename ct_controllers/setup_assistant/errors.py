"""The setup assistant's one error: bad input, said in one line that names it (exit code 2)."""

from __future__ import annotations

from ct_controllers.errors import CtError


class SetupError(CtError, ValueError):
    """The URDF or an option cannot give a configuration; the message names what and why."""
