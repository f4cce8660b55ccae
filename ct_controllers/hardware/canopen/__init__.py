"""CANopen CiA 402 drives, one node per joint (plugin ``ct_controllers/CanopenCia402System``),
over python-can and the ``canopen`` stack. One concept per module:

- :mod:`.object_dictionary`: the objects both sides use (a drive's dictionary, the master's own
  node, ``MASTER_NODE_ID``);
- :mod:`.configuration`: the backend's parameters (:class:`~.configuration.CanopenConfig`, a
  :class:`~.configuration.DriveConfig` per joint) and how they come from a stack config;
- :mod:`.drive_setup`: configuring one drive by SDO (heartbeats, quick stop, PDO mapping) — the
  only SDO transfers, all at configure;
- :mod:`.process_image`: what the control, cycle and receive threads share, under one lock, and
  the latched faults;
- :mod:`.cycle`: the SYNC/PDO cycle thread and its deadlines (heartbeat, PDO, command);
- :mod:`.scheduling`: the bus threads' real-time scheduling (``SCHED_FIFO``, where permitted);
- :mod:`.receive`: the receive thread's handlers (heartbeats, TPDOs → samples, CAN error frames);
- :mod:`.system`: :class:`~.system.CanopenCia402System`, the plugin: lifecycle, read/write,
  faults, effort limits.
"""
