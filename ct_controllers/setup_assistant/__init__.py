"""``ct-setup``: the setup assistant that turns an arm's URDF into a configuration for this stack.

One module per responsibility: reading the URDF (:mod:`.urdf_tree`), finding the arm chain, the
TCP and the gripper (:mod:`.chain`), the design model (:mod:`.design_model`), choosing or
checking the home pose (:mod:`.home`), designing the gains (:mod:`.gains`), writing
``controllers.yaml`` (:mod:`.yaml_writer`) and the ``<ros2_control>`` xacro (:mod:`.xacro_writer`),
and the command line (:mod:`.cli`). Plain Python; it imports each installed hardware plugin once,
to read which `backend:` value selects it.
"""
