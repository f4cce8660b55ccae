"""The base of every error this package raises on purpose.

Each error class also derives from the built-in it refines (``ValueError`` for bad input,
``LookupError``/``KeyError`` for unknown names, ``RuntimeError`` for lifecycle misuse), so a
caller may catch either ``CtError`` (anything of ours) or the built-in (one kind of problem).
A leaf: imports nothing of ours.
"""

from __future__ import annotations


class CtError(Exception):
    """Something ct_controllers refused or could not do, with a message that names it."""


class GainError(CtError, ValueError):
    """A gain set was rejected; the message names the parameter and the problem."""


class ConfigError(CtError, ValueError):
    """A configuration value is missing or invalid; the message names the parameter."""
