"""What other threads ask of the control loop, picked up at a tick boundary.

The loop is the only writer of hardware commands, so the ROS threads do not act: they post a
request — a motion, a hold, a controller switch, a fault reset, the safe hold's model (a
payload) — and the control thread takes
all that is waiting at the start of its next tick (:meth:`LoopRequests.take`). A newer motion
replaces one not yet taken; a hold drops it. A reset can be waited for: the tick that takes it
acknowledges it once processed (:meth:`LoopRequests.wait_for_reset`).

:attr:`LoopRequests.waiting` is read without the lock by the control thread, once a tick: a
request posted while it reads is taken at the next tick, as it would be after a locked take.
"""

from __future__ import annotations

import threading

import numpy as np

from ct_controllers.controllers.controller import Controller, FloatArray
from ct_controllers.model.robot import RobotModel
from ct_controllers.runtime.motion_requests import MotionRequest, TrajectoryRequest
from ct_controllers.runtime.trajectory_motion import TrajectoryPlan


class LoopRequests:
    """The control loop's inbox (posting: any thread; taking: the control thread)."""

    def __init__(self) -> None:
        self.waiting = False  # something was posted since the last take
        self._lock = threading.Lock()
        self._motion: MotionRequest | TrajectoryRequest | None = None
        self._hold = False
        self._reset = False
        self._controller: Controller | None = None
        self._hold_model: RobotModel | None = None
        self._next_motion_id = 1
        self._reset_done = threading.Condition()
        self._resets_processed = 0

    def post_motion(self, indices: np.ndarray, positions: FloatArray, duration: float) -> int:
        """Queue a checked motion (replacing one not yet taken); returns its id (1, 2, ...)."""
        with self._lock:
            motion_id = self._next_motion_id
            self._next_motion_id += 1
            self._motion = MotionRequest(motion_id, indices, positions, duration)
            self.waiting = True
        return motion_id

    def post_trajectory(self, plan: TrajectoryPlan) -> int:
        """Queue a checked trajectory, as :meth:`post_motion` a motion; returns its id."""
        with self._lock:
            motion_id = self._next_motion_id
            self._next_motion_id += 1
            self._motion = TrajectoryRequest(motion_id, plan)
            self.waiting = True
        return motion_id

    def post_hold(self) -> None:
        """Stop and hold; a motion not yet taken is dropped."""
        with self._lock:
            self._motion = None
            self._hold = True
            self.waiting = True

    def post_controller(self, controller: Controller) -> None:
        with self._lock:
            self._controller = controller
            self.waiting = True

    def post_hold_model(self, model: RobotModel) -> None:
        """The model the safe hold and the fault reactions take g(q) from (a payload's)."""
        with self._lock:
            self._hold_model = model
            self.waiting = True

    def post_reset(self) -> None:
        with self._lock:
            self._reset = True
            self.waiting = True

    def take(
        self,
    ) -> tuple[
        MotionRequest | TrajectoryRequest | None, bool, bool, Controller | None, RobotModel | None
    ]:
        """(motion, hold, reset, controller, hold model) posted since the last take, and the
        inbox empty."""
        with self._lock:
            taken = (self._motion, self._hold, self._reset, self._controller, self._hold_model)
            self._motion, self._hold, self._reset = None, False, False
            self._controller = self._hold_model = None
            self.waiting = False
        return taken

    @property
    def resets_processed(self) -> int:
        """How many taken resets were acknowledged (a mark for :meth:`wait_for_reset`)."""
        with self._reset_done:
            return self._resets_processed

    def acknowledge_reset(self) -> None:
        """The control thread processed a taken reset (cleared or refused)."""
        with self._reset_done:
            self._resets_processed += 1
            self._reset_done.notify_all()

    def wait_for_reset(self, seen: int, timeout: float) -> bool:
        """Wait at most ``timeout`` [s] for a reset acknowledged after mark ``seen``; True if
        one was."""
        with self._reset_done:
            return self._reset_done.wait_for(lambda: self._resets_processed > seen, timeout)

    def wake_waiters(self) -> None:
        """Wake :meth:`wait_for_reset` callers to look again (the loop thread ended)."""
        with self._reset_done:
            self._reset_done.notify_all()
