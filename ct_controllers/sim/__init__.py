"""Rigs shared by tests and benches, never imported by the product: the whole stack on each
backend with its plant (MuJoCo, the ros2_control bridge against its plant process, CANopen
against simulated drives; :mod:`.rigs`, :mod:`.gains`), the simulated CiA 402 drives
(:mod:`.drives`; in a process of their own, :mod:`.drives_process`, over the cross-process
virtual CAN link, :mod:`.can_link`), the bridge's plant process (:mod:`.ros2_control_plant`),
the object between the plants' fingers (:mod:`.object_contact`), sensor fault injection
(:mod:`.fault_injection`) and the tracking benchmark's plants (:mod:`.plants`,
:mod:`.mujoco_plant`)."""
