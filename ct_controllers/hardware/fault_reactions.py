"""The fault reactions a backend may offer (``watchdog.fault_reaction``): a leaf, so that the
configuration's schema names them without importing the hardware interface."""

from __future__ import annotations

HOLD = "hold"
DAMP = "damp"
QUICK_STOP = "quick_stop"
DISABLE = "disable"
FAULT_REACTIONS = (DAMP, HOLD, QUICK_STOP, DISABLE)
