"""Where the package's files are: the one answer for the node, the CLI, the launch files and tests.

The share folder (``package.xml``, ``config/``, ``launch/``, ``urdf/``) is found the ROS way,
through the ament index on ``AMENT_PREFIX_PATH`` (``ament_index_python``), wherever the package
is installed: a plain ``colcon build``, ``colcon build --symlink-install``, this project's venv
(``make setup`` registers it there, with its share files linked to the checkout) or any other
prefix. Only when the ament environment does not know the package (a shell that sourced
nothing) is it taken from where this module was loaded:

- an install prefix (``<prefix>/lib/pythonX.Y/site-packages/ct_controllers``) whose ament index
  registers the package: ``<prefix>/share/ct_controllers``;
- a source checkout (editable install, ``PYTHONPATH=<repo>``): the checkout itself, whose root is
  the package (``package.xml`` beside ``ct_controllers/``).

Never ``sys.prefix``: the interpreter's prefix says nothing about where this package lives.
"""

from __future__ import annotations

import os
from pathlib import Path

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

from ct_controllers.errors import CtError

PACKAGE = "ct_controllers"
INDEX = Path("share") / "ament_index" / "resource_index" / "packages"


class ShareNotFoundError(CtError, LookupError):
    """No share folder for the package: not in the ament index, not installed, not a checkout."""


def share_directory() -> Path:
    """The package's share folder; see the module docstring for the order of the lookups."""
    if os.environ.get("AMENT_PREFIX_PATH"):
        try:
            return Path(get_package_share_directory(PACKAGE))
        except PackageNotFoundError:
            pass
    here = Path(__file__).resolve().parent  # .../ct_controllers
    if here.parent.name == "site-packages" and len(here.parents) > 4:
        prefix = here.parents[3]  # <prefix>/lib/pythonX.Y/site-packages/ct_controllers
        if (prefix / INDEX / PACKAGE).is_file():
            return prefix / "share" / PACKAGE
    checkout = here.parent
    if (checkout / "package.xml").is_file() and (checkout / "setup.py").is_file():
        return checkout
    raise ShareNotFoundError(
        f"cannot find the share folder of '{PACKAGE}': it is not in the ament index "
        f"(AMENT_PREFIX_PATH={os.environ.get('AMENT_PREFIX_PATH', '')!r}), not installed "
        f"beside {here} and {checkout} is not a source checkout; source the workspace's "
        "setup file or set AMENT_PREFIX_PATH"
    )
