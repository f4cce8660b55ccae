"""ct_controllers.errors: every exception class the package defines derives from CtError and
from the built-in it refines, so callers can catch either."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import ct_controllers
from ct_controllers.errors import CtError

# Modules that start processes or need a display when imported are not needed here: every
# error class lives in a plain module.
SKIPPED = ("ct_controllers.bench", "ct_controllers.ros.control_node")


def _error_classes() -> list[type[BaseException]]:
    found = []
    for module_info in pkgutil.walk_packages(ct_controllers.__path__, "ct_controllers."):
        if module_info.name.startswith(SKIPPED):
            continue
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and value is not CtError
            ):
                found.append(value)
    return found


def test_every_error_class_of_the_package_derives_from_ct_error() -> None:
    """All exception classes defined in ct_controllers (found by walking the package, not
    listed by hand) are CtErrors and also a built-in error kind (ValueError, LookupError,
    RuntimeError...)."""
    classes = _error_classes()
    assert len(classes) >= 12, [c.__name__ for c in classes]
    outside = [c.__qualname__ for c in classes if not issubclass(c, CtError)]
    assert not outside, f"not under CtError: {outside}"
    builtin = (ValueError, LookupError, RuntimeError)
    assert all(issubclass(c, builtin) for c in classes)
