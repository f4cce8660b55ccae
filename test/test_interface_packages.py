"""The ROS interface packages built from third_party/ (control_msgs, controller_manager_msgs;
see their README.md): every type has the RIHS01 type hash a ROS 2 Jazzy install has, the
constants Jazzy has, and messages go through real rclpy serialization and loopback DDS intact.

The reference hashes below are an independent reference, not computed from our definitions:
they were read from a build of the upstream definitions themselves — ros-controls/control_msgs
at commit ``CONTROL_MSGS_COMMIT`` (5.8.0, branch jazzy) and ros2_control's
controller_manager_msgs at ``ROS2_CONTROL_COMMIT`` (branch jazzy, 4.46.0 and later) — with the
Jazzy rosidl of the ros-jazzy-* wheels (rosidl_generator_type_description 4.6.6), in a scratch
folder outside this repository. A type of ours that differs from Jazzy's in any field name,
field type, field order or nested type has another hash (REP 2016), and so would not talk to
MoveIt, `ros2 control` or the spawner. Where a ROS install provides these packages
(tools/setup_env.sh then does not build ours), this checks that install's packages against
the same Jazzy release.
"""

from __future__ import annotations

import ctypes
import importlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import rclpy
from builtin_interfaces.msg import Duration, Time
from control_msgs.action import FollowJointTrajectory, GripperCommand, ParallelGripperCommand
from control_msgs.msg import GripperCommand as GripperCommandMessage
from control_msgs.msg import (
    JointComponentTolerance,
    JointJog,
    JointTolerance,
    JointTrajectoryControllerState,
)
from control_msgs.srv import QueryTrajectoryState
from controller_manager_msgs.msg import (
    ChainConnection,
    ControllerManagerActivity,
    ControllerState,
    HardwareComponentState,
    HardwareInterface,
    NamedLifecycleState,
)
from controller_manager_msgs.srv import (
    CleanupController,
    ConfigureController,
    ListControllers,
    ListControllerTypes,
    ListHardwareComponents,
    ListHardwareInterfaces,
    LoadController,
    ReloadControllerLibraries,
    SetHardwareComponentState,
    SwitchController,
    UnloadController,
)
from geometry_msgs.msg import Transform, Twist, Vector3
from lifecycle_msgs.msg import State
from rclpy.action import ActionServer
from rclpy.node import Node
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from trajectory_msgs.msg import (
    JointTrajectory,
    JointTrajectoryPoint,
    MultiDOFJointTrajectory,
    MultiDOFJointTrajectoryPoint,
)

CONTROL_MSGS_COMMIT = "f901df2662f22a39a06aa04a85a34602c47e3cc0"
ROS2_CONTROL_COMMIT = "9ffbf97fd6798085db22797fed44da59089dc10a"

# Every type of ours, read from the upstream build named above (its JSON type descriptions,
# share/<package>/<kind>/<Type>.json, "type_hashes"; the hashes compiled into its C type
# support are the same, and this test passes on that build too).
JAZZY_TYPE_HASHES: dict[str, str] = {
    "control_msgs/action/FollowJointTrajectory": (
        "RIHS01_738ebcb7a2d7cfa42f9f1001cc99ce3a4383d1cfe508015d9be8485e4b1c66f6"
    ),
    "control_msgs/action/FollowJointTrajectory_Feedback": (
        "RIHS01_3fd0aaecf71725121ae1ff7f01098a5e0da581e672be18a6b2c286cb43d96b49"
    ),
    "control_msgs/action/FollowJointTrajectory_FeedbackMessage": (
        "RIHS01_80398fcb9674a79081a9906e2ccf0c804dd7cb15e22e362e606ee87186beab71"
    ),
    "control_msgs/action/FollowJointTrajectory_GetResult": (
        "RIHS01_e3ceb38e3e1867c8dc0f46014df26e90eb93422f27e9e97f936e07f94be4bc8b"
    ),
    "control_msgs/action/FollowJointTrajectory_GetResult_Event": (
        "RIHS01_43161a489e52daaa5bbc2fa74f73f1804d099574fcf8f819170807d75472662a"
    ),
    "control_msgs/action/FollowJointTrajectory_GetResult_Request": (
        "RIHS01_ecf7ea8463d3beec7084bca75216d0b01b87b6e1e4e09679bb26093041efcbe9"
    ),
    "control_msgs/action/FollowJointTrajectory_GetResult_Response": (
        "RIHS01_08eefbaa146ce02ba45898d5e99160afd6c4c54a30d159aee0f2ca6035b1580f"
    ),
    "control_msgs/action/FollowJointTrajectory_Goal": (
        "RIHS01_8a9060704b269608f5a340934cc26e66869dd14bdac29e2e7fd9ec8b9882d205"
    ),
    "control_msgs/action/FollowJointTrajectory_Result": (
        "RIHS01_8002e99ed2c14c6faa522f2a93c26d744c5982f254f9e98ff9c6f19789bdb220"
    ),
    "control_msgs/action/FollowJointTrajectory_SendGoal": (
        "RIHS01_b13789dddc325a7a962825c45e28c77d37237ec129dd0c34dc5994562938c57f"
    ),
    "control_msgs/action/FollowJointTrajectory_SendGoal_Event": (
        "RIHS01_906dd566308db02673c73c654f69bdd84738589629c1bc2841ddb49059ed1c6f"
    ),
    "control_msgs/action/FollowJointTrajectory_SendGoal_Request": (
        "RIHS01_179c93691f1f6d1d115881ff88c3917b7cc6eac2ba4bf56766cc7c4389e19ef1"
    ),
    "control_msgs/action/FollowJointTrajectory_SendGoal_Response": (
        "RIHS01_e6a48ba740ae254500129a877f0b071be8663a115da1a539b74599cc97921fbf"
    ),
    "control_msgs/action/GripperCommand": (
        "RIHS01_e17c0e644eccf14bea84a0a93e0977182872c2eb7873ca6694900059b46dbc84"
    ),
    "control_msgs/action/GripperCommand_Feedback": (
        "RIHS01_8f7c520077bab528bb9161ee3b83c81eee1f8aecadb8922ce82c79d667a819c4"
    ),
    "control_msgs/action/GripperCommand_FeedbackMessage": (
        "RIHS01_392ff03fcd872f9dc2405cbeb2897fcf011ad9998458b6aa85c603b8a49e431d"
    ),
    "control_msgs/action/GripperCommand_GetResult": (
        "RIHS01_7e60a7606063d4a2728d21badac099e68b734a196ac3ab42d1d4c668eb0bb3cd"
    ),
    "control_msgs/action/GripperCommand_GetResult_Event": (
        "RIHS01_c6a1f7afeb87bf8b3165bd7b03ec0173ffada35f083a583144ab7ac96edc5a04"
    ),
    "control_msgs/action/GripperCommand_GetResult_Request": (
        "RIHS01_1a3308da3acbc62cd8a3c823de80ba9e5f9b6bb6f6056d1ad6b29f5f285f97ae"
    ),
    "control_msgs/action/GripperCommand_GetResult_Response": (
        "RIHS01_32ed5e1b5906767a3e9914dca4c4aed22529918f6c2360e6fb382363d4df4b45"
    ),
    "control_msgs/action/GripperCommand_Goal": (
        "RIHS01_607d9f41eb241e1922e90f02125e87ae6bfb78f7f64a71dc92630263d01f8b6d"
    ),
    "control_msgs/action/GripperCommand_Result": (
        "RIHS01_bf512d5aa6a0e4fe4d8be22b2ec4a1973c3d250fa1f65e47450322c25c45c0a0"
    ),
    "control_msgs/action/GripperCommand_SendGoal": (
        "RIHS01_6bf8cc4ce80cd499e7dd3258c03c50c3fa6672b469ff8355339ef1df77fcd212"
    ),
    "control_msgs/action/GripperCommand_SendGoal_Event": (
        "RIHS01_5c80eac98bcde7d64faf4b94f77ef69f12e442870dc1eba26d25b4681ef9ac0a"
    ),
    "control_msgs/action/GripperCommand_SendGoal_Request": (
        "RIHS01_1b869b7b4042272dc0f8ed65468c4e57c9e532ea5e53ce74fda0767eefbfa983"
    ),
    "control_msgs/action/GripperCommand_SendGoal_Response": (
        "RIHS01_0c8dda5e9d39ab5e3162b66e79b292a4258659ddfcf8722d39463f718b6c59bc"
    ),
    "control_msgs/action/ParallelGripperCommand": (
        "RIHS01_adfd3c1ebe8abc38ebcc0e454b6423d291d4010dd5697d14eca5b9be4726ae18"
    ),
    "control_msgs/action/ParallelGripperCommand_Feedback": (
        "RIHS01_ed6f7c4e5aea7f960432663c0e762e001a0a1f5cc0130d126e60041412d0543c"
    ),
    "control_msgs/action/ParallelGripperCommand_FeedbackMessage": (
        "RIHS01_c61f4cf99d06c5a3e24bed17c2910bdf66a30d89461e2ac7b5fd538a34b022cc"
    ),
    "control_msgs/action/ParallelGripperCommand_GetResult": (
        "RIHS01_e4c7f0e8a831ce5625ed20abcd13796406d945f92ebc7ad5972e0b0d29b381bd"
    ),
    "control_msgs/action/ParallelGripperCommand_GetResult_Event": (
        "RIHS01_bb81e07fe7a231c5de7b957f0384ea31600b8a808cf83e820e213b7216ebf12e"
    ),
    "control_msgs/action/ParallelGripperCommand_GetResult_Request": (
        "RIHS01_cea82415cadc3288fdfa8aaba509e9939732aaecac6edf9cb954e5a7161646ec"
    ),
    "control_msgs/action/ParallelGripperCommand_GetResult_Response": (
        "RIHS01_c973b1bb9b454de1c3f38a2af9d45bc1930b809f746d6d6ec91bb3c783cb09eb"
    ),
    "control_msgs/action/ParallelGripperCommand_Goal": (
        "RIHS01_412807b6b6acf2bf406fb0cf3b5c8f84286cd4e4d425734155aa1ff41caa0063"
    ),
    "control_msgs/action/ParallelGripperCommand_Result": (
        "RIHS01_51acbcd62aa44097d3877c506eab1146856fa8768628ffbe102c1699152d2afa"
    ),
    "control_msgs/action/ParallelGripperCommand_SendGoal": (
        "RIHS01_567c37373fed1260adbe047415688c73e4f3e94b2e3982761ecc71fd63d710a7"
    ),
    "control_msgs/action/ParallelGripperCommand_SendGoal_Event": (
        "RIHS01_b6164adce06de27a3ebd924f198539baf7f929315c825b266c8827de4ca79384"
    ),
    "control_msgs/action/ParallelGripperCommand_SendGoal_Request": (
        "RIHS01_dc8e5d95c0e15af6f03ff237eb8cfdaac14cc2b09f51b363311e98ec0a8487a0"
    ),
    "control_msgs/action/ParallelGripperCommand_SendGoal_Response": (
        "RIHS01_613e4f060bff03b152eeaba1f8c6baa9d0309527b28b08bc9aae28ece7ef8b47"
    ),
    "control_msgs/msg/GripperCommand": (
        "RIHS01_57eb8f326c9889ca8bb34ead82cc94cc09bf6bc5c3b6c09546dca3a00b589890"
    ),
    "control_msgs/msg/JointComponentTolerance": (
        "RIHS01_739ea7566931944d33830fa10f1bf5e7a7fbdc3172bce7a7eaac642bd6e3ffa4"
    ),
    # JointJog (MoveIt Servo's joint jog, added in session 11): upstream's jazzy JointJog.msg at
    # the same commit built alone in a scratch folder, its JSON type description's hash.
    "control_msgs/msg/JointJog": (
        "RIHS01_ba249455a20f70168a1acb7bf43b776b72ff1f7eb5fc4cfea443f749e963c6e7"
    ),
    "control_msgs/msg/JointTolerance": (
        "RIHS01_c254f9cece0f3b733017b6990fd46d1326e25242d6b8844398c97d9a88e7d648"
    ),
    "control_msgs/msg/JointTrajectoryControllerState": (
        "RIHS01_51d8dd89cc624cbe9daaeeb4d80d6de9b86168ffdc3be41fefc0953e3c26e480"
    ),
    "control_msgs/srv/QueryTrajectoryState": (
        "RIHS01_4a0935dffef18bc5b9e101c9d03d84e681ecd4cebd724b8f11fde008751a325a"
    ),
    "control_msgs/srv/QueryTrajectoryState_Event": (
        "RIHS01_870daa472c1a56f22859cd73e9b008923ecf1e480156c4ddfc91edee98885474"
    ),
    "control_msgs/srv/QueryTrajectoryState_Request": (
        "RIHS01_ec3322824b7a1ee850e03ff951f48b10395cab62a5a5662da32000f8b06aa791"
    ),
    "control_msgs/srv/QueryTrajectoryState_Response": (
        "RIHS01_f7b920129b8d5841312bcb89e6275508e19b3735a371b2df6e417447a44ea5db"
    ),
    "controller_manager_msgs/msg/ChainConnection": (
        "RIHS01_2daecd1da4b171f48b291c79747657a651eb1ab8821b68e38b1c88c736bba91c"
    ),
    "controller_manager_msgs/msg/ControllerManagerActivity": (
        "RIHS01_35b7de5d611b6780e89732de325f2f765eacdb8a7adfe5821a27af4a03a7c244"
    ),
    "controller_manager_msgs/msg/ControllerState": (
        "RIHS01_9a8780ab9814b6032978a07c6c7033cf1a7894ac8d948a6fb72afea07b04cc83"
    ),
    "controller_manager_msgs/msg/HardwareComponentState": (
        "RIHS01_8723f76b60e3ea54920065e3e777d93c68b76fc12839ad6a6ca4e0a6439b384c"
    ),
    "controller_manager_msgs/msg/HardwareInterface": (
        "RIHS01_b4c556991db81ca56a49338b5e8f0675a6707faee54fba161d2bbd4d963d418a"
    ),
    "controller_manager_msgs/msg/NamedLifecycleState": (
        "RIHS01_b7947b6f8df8f7e93d1cb8d115842fb0eeddfa6fb5c7b86cc0f3cafd55be4c1f"
    ),
    "controller_manager_msgs/srv/CleanupController": (
        "RIHS01_0e5e0da84cf97150abbb3a4e2249c67e6f43dba01ed9b7228b4deaab8838ec4b"
    ),
    "controller_manager_msgs/srv/CleanupController_Event": (
        "RIHS01_cafd0b732cfbf29147a195659dc280f4b634daac058deac91c4994c7e6f4c9c0"
    ),
    "controller_manager_msgs/srv/CleanupController_Request": (
        "RIHS01_a741f98a6de71f691fb4828428ff134d5fc2d4dedee351a3f102b4bacf39975d"
    ),
    "controller_manager_msgs/srv/CleanupController_Response": (
        "RIHS01_2d36519f4ef8b8f26ea56c266c6a5d179c046eb8f80a56a7c2b1cf002202f8b7"
    ),
    "controller_manager_msgs/srv/ConfigureController": (
        "RIHS01_b5de498113f4eabc7b932e019ca0498d67304b1ca465fe8a426ea89644865ff9"
    ),
    "controller_manager_msgs/srv/ConfigureController_Event": (
        "RIHS01_c71eef367688ebd83962810741eb7ae65dc1930ebd36c90e077baed6195677fc"
    ),
    "controller_manager_msgs/srv/ConfigureController_Request": (
        "RIHS01_027c272c6b945317d5e057515c83c747725ccaf9d345be6f6941383f6472d3a9"
    ),
    "controller_manager_msgs/srv/ConfigureController_Response": (
        "RIHS01_f22a10e36403ebf6e9a54f5fa76dddb7c0af2e5417f4ff098bb0525bf89a726d"
    ),
    "controller_manager_msgs/srv/ListControllerTypes": (
        "RIHS01_873e8d2bb81b8b5903ca736d299ba959f929efec4b4a18d17354b8b322822e05"
    ),
    "controller_manager_msgs/srv/ListControllerTypes_Event": (
        "RIHS01_077f696f1fd887b099aa7a47b7d53c92932d05365444c9df1b12b72ded56e85b"
    ),
    "controller_manager_msgs/srv/ListControllerTypes_Request": (
        "RIHS01_b6cda89b7e31f5525f7a328119f64f6bf5710db263cecb00f91e59aa9b5d41de"
    ),
    "controller_manager_msgs/srv/ListControllerTypes_Response": (
        "RIHS01_4e924ba35dac47257de06fabd757aaf7bd05f47da99dc878864c9c3f9a3f721e"
    ),
    "controller_manager_msgs/srv/ListControllers": (
        "RIHS01_4f8e36bb1fa5afdeba45c2d56ae6a2097b1493a253f961dd6290c085033bd189"
    ),
    "controller_manager_msgs/srv/ListControllers_Event": (
        "RIHS01_33f64fb8f4d3a7415113d5b6a9fa74f91c732c5f4d491b0077cfe8f7ca15cb2b"
    ),
    "controller_manager_msgs/srv/ListControllers_Request": (
        "RIHS01_fb985bc3dcc9b07c7d3af4b46787afa5a09ac79da6465ea42b5696f9355c1f70"
    ),
    "controller_manager_msgs/srv/ListControllers_Response": (
        "RIHS01_445459f6b387bda67942d8bea4dfee82dedf12388317e68d5bc4513993799b86"
    ),
    "controller_manager_msgs/srv/ListHardwareComponents": (
        "RIHS01_2ff105e609928671af16413362c0fdd089e1dd50c5a49d830db603ba8e4439c8"
    ),
    "controller_manager_msgs/srv/ListHardwareComponents_Event": (
        "RIHS01_80e1680b8315379ca6ea4ef2d93555787e28117112f9e34ab542b0a02e6864f4"
    ),
    "controller_manager_msgs/srv/ListHardwareComponents_Request": (
        "RIHS01_4d528f3bba24425b73c788ebcb6462bf77d40eb194b77682138f079f821faeab"
    ),
    "controller_manager_msgs/srv/ListHardwareComponents_Response": (
        "RIHS01_9607f3bd43ebcfaa25ca4f506701fb2697186a986364f58649b43182d9dd1556"
    ),
    "controller_manager_msgs/srv/ListHardwareInterfaces": (
        "RIHS01_c3e561a6e8cc7b9d577d8065c783038e51f6950cbe9bed67fb117a3e2e04d8f1"
    ),
    "controller_manager_msgs/srv/ListHardwareInterfaces_Event": (
        "RIHS01_6aa711d3eb518aa9b69810354d106a740e43e33191d038c7e825f3c24f001b14"
    ),
    "controller_manager_msgs/srv/ListHardwareInterfaces_Request": (
        "RIHS01_419a204c74b85adb602848d0f288fc756d0216f70bd30ab889c1d9b154ed8098"
    ),
    "controller_manager_msgs/srv/ListHardwareInterfaces_Response": (
        "RIHS01_32da0652393586234856a1f44a039ff1487bdc1905fbf5068d026b77d4252e63"
    ),
    "controller_manager_msgs/srv/LoadController": (
        "RIHS01_e37f7596c50c88cf8cb7a10cd376ff7579850cc63b5e787e9c8f11981f9ab4d2"
    ),
    "controller_manager_msgs/srv/LoadController_Event": (
        "RIHS01_d9fb90df6cc86635447ed4c90b1fdae1b3c6287ddf5b849422431d86e0414a3d"
    ),
    "controller_manager_msgs/srv/LoadController_Request": (
        "RIHS01_7a6624df1a6c972c13c9c5b71f13eda236226b7c08f118feccbbc60ad1829216"
    ),
    "controller_manager_msgs/srv/LoadController_Response": (
        "RIHS01_8ce86b422a67d8150b4a2885fcce601670c39a7fddb8601df8609ed0b931ad76"
    ),
    "controller_manager_msgs/srv/ReloadControllerLibraries": (
        "RIHS01_485cd0040f8a343a9596155b967363e1bc715f034bbb111f795c73d9d8056a9b"
    ),
    "controller_manager_msgs/srv/ReloadControllerLibraries_Event": (
        "RIHS01_acd2b439f4276fc002218ccc57cab080edaf9db9c5d3ceccfca6a73182e119e9"
    ),
    "controller_manager_msgs/srv/ReloadControllerLibraries_Request": (
        "RIHS01_c5ae8813adda2aed0e5e5558031e6f4c7834b941aa871746e86adc1cb745cda8"
    ),
    "controller_manager_msgs/srv/ReloadControllerLibraries_Response": (
        "RIHS01_bea69bb80ebbb4a00023758c51fd0e3eaf308c1ae6640fdf4bbad6793bb967d4"
    ),
    "controller_manager_msgs/srv/SetHardwareComponentState": (
        "RIHS01_940b15846ed3e1fb561ab45edf77a992b811fd59c574f45d5205a84a0deb2f65"
    ),
    "controller_manager_msgs/srv/SetHardwareComponentState_Event": (
        "RIHS01_9a0beabf9d13de743ceeefca3134a94fb3bf1163e38934a36e5658bd6fc30ed7"
    ),
    "controller_manager_msgs/srv/SetHardwareComponentState_Request": (
        "RIHS01_22c9b3e32a02221d411a47dab1fda921003a96ac41e8de7d4d805e2cfd0de21d"
    ),
    "controller_manager_msgs/srv/SetHardwareComponentState_Response": (
        "RIHS01_c230aa244dd97d761e27ccde7b5056ec4e28e0bb804da283e42cd37944c46592"
    ),
    "controller_manager_msgs/srv/SwitchController": (
        "RIHS01_d4ad10aa5da7808bc522d55d4123d8ef79de73d049d165639d7663ac37cc9895"
    ),
    "controller_manager_msgs/srv/SwitchController_Event": (
        "RIHS01_4b6895b5e983daaa9f3fc5adbf26b42a4d0780ece941ac4ca5864c33063cc99d"
    ),
    "controller_manager_msgs/srv/SwitchController_Request": (
        "RIHS01_d258d35c1ce6d7469e0155900202519be21f82c2641393540babd728a09cfa50"
    ),
    "controller_manager_msgs/srv/SwitchController_Response": (
        "RIHS01_b7e90d1a67a2e4e3da7064ffb328cfe3111147a1a55cafaafd73b1d66681a251"
    ),
    "controller_manager_msgs/srv/UnloadController": (
        "RIHS01_4055728e84c041348648d7f808c6681562000e3a9ce9fbb42c3350df25773f16"
    ),
    "controller_manager_msgs/srv/UnloadController_Event": (
        "RIHS01_36594c047dd22e326ee4717f80df62ae5db0452169b84cf5b95d52ba2b4dfbbb"
    ),
    "controller_manager_msgs/srv/UnloadController_Request": (
        "RIHS01_90f14a0b402791210988f4931be46a62edc7f6c90d0551c54c9a7cbce1b56ea1"
    ),
    "controller_manager_msgs/srv/UnloadController_Response": (
        "RIHS01_4636099a7eaa6a9f3b299504878d58d580123f738e235c9df7bc46ef7b8f3461"
    ),
}

# The constants, from the same upstream definitions (not part of the hash: checked apart).
JAZZY_CONSTANTS: list[tuple[Any, str, int]] = [
    (FollowJointTrajectory.Result, "SUCCESSFUL", 0),
    (FollowJointTrajectory.Result, "INVALID_GOAL", -1),
    (FollowJointTrajectory.Result, "INVALID_JOINTS", -2),
    (FollowJointTrajectory.Result, "OLD_HEADER_TIMESTAMP", -3),
    (FollowJointTrajectory.Result, "PATH_TOLERANCE_VIOLATED", -4),
    (FollowJointTrajectory.Result, "GOAL_TOLERANCE_VIOLATED", -5),
    (JointComponentTolerance, "X_AXIS", 1),
    (JointComponentTolerance, "Y_AXIS", 2),
    (JointComponentTolerance, "Z_AXIS", 3),
    (JointComponentTolerance, "TRANSLATION", 4),
    (JointComponentTolerance, "ROTATION", 5),
    (SwitchController.Request, "BEST_EFFORT", 1),
    (SwitchController.Request, "STRICT", 2),
    (SwitchController.Request, "AUTO", 3),
    (SwitchController.Request, "FORCE_AUTO", 4),
]

# One Python class per top-level type (its sub-types are reached from it).
INTERFACES: dict[str, Any] = {
    "control_msgs/msg/GripperCommand": GripperCommandMessage,
    "control_msgs/msg/JointComponentTolerance": JointComponentTolerance,
    "control_msgs/msg/JointJog": JointJog,
    "control_msgs/msg/JointTolerance": JointTolerance,
    "control_msgs/msg/JointTrajectoryControllerState": JointTrajectoryControllerState,
    "control_msgs/srv/QueryTrajectoryState": QueryTrajectoryState,
    "control_msgs/action/FollowJointTrajectory": FollowJointTrajectory,
    "control_msgs/action/GripperCommand": GripperCommand,
    "control_msgs/action/ParallelGripperCommand": ParallelGripperCommand,
    "controller_manager_msgs/msg/ChainConnection": ChainConnection,
    "controller_manager_msgs/msg/ControllerManagerActivity": ControllerManagerActivity,
    "controller_manager_msgs/msg/ControllerState": ControllerState,
    "controller_manager_msgs/msg/HardwareComponentState": HardwareComponentState,
    "controller_manager_msgs/msg/HardwareInterface": HardwareInterface,
    "controller_manager_msgs/msg/NamedLifecycleState": NamedLifecycleState,
    "controller_manager_msgs/srv/CleanupController": CleanupController,
    "controller_manager_msgs/srv/ConfigureController": ConfigureController,
    "controller_manager_msgs/srv/ListControllerTypes": ListControllerTypes,
    "controller_manager_msgs/srv/ListControllers": ListControllers,
    "controller_manager_msgs/srv/ListHardwareComponents": ListHardwareComponents,
    "controller_manager_msgs/srv/ListHardwareInterfaces": ListHardwareInterfaces,
    "controller_manager_msgs/srv/LoadController": LoadController,
    "controller_manager_msgs/srv/ReloadControllerLibraries": ReloadControllerLibraries,
    "controller_manager_msgs/srv/SetHardwareComponentState": SetHardwareComponentState,
    "controller_manager_msgs/srv/SwitchController": SwitchController,
    "controller_manager_msgs/srv/UnloadController": UnloadController,
}
# The sub-types rosidl generates for a service and an action (REP 2011, REP 2016).
SERVICE_PARTS = ("", "_Request", "_Response", "_Event")
ACTION_PARTS = (
    "",
    "_Goal",
    "_Result",
    "_Feedback",
    "_FeedbackMessage",
    *(f"_{service}{part}" for service in ("SendGoal", "GetResult") for part in SERVICE_PARTS),
)


class _TypeHash(ctypes.Structure):
    """rosidl_type_hash_t (rosidl_runtime_c/type_hash.h)."""

    _fields_ = [("version", ctypes.c_uint8), ("value", ctypes.c_uint8 * 32)]


def generated_type_names(top_level: str) -> list[str]:
    kind = top_level.split("/")[1]
    parts = {"msg": ("",), "srv": SERVICE_PARTS, "action": ACTION_PARTS}[kind]
    return [top_level + part for part in parts]


def compiled_type_hash(type_name: str) -> str:
    """The RIHS01 hash compiled into the package's C type support: the
    ``<package>__<kind>__<Type>__get_type_hash`` function of lib<package>__rosidl_generator_c,
    the value the RMW announces in discovery (``ros2 topic info -v`` shows it)."""
    package, kind, name = type_name.split("/")
    module = importlib.import_module(package)
    # <prefix>/lib/python3.X/site-packages/<package>/__init__.py → <prefix>/lib
    library_path = Path(str(module.__file__)).resolve().parents[3] / (
        f"lib{package}__rosidl_generator_c.so"
    )
    assert library_path.is_file(), f"{package}: no {library_path}"
    function = getattr(ctypes.CDLL(str(library_path)), f"{package}__{kind}__{name}__get_type_hash")
    function.restype = ctypes.POINTER(_TypeHash)
    function.argtypes = [ctypes.c_void_p]  # the type support argument is unused
    type_hash = function(None).contents
    return f"RIHS{type_hash.version:02d}_{bytes(type_hash.value).hex()}"


def load_type_support(interface: Any) -> None:
    """Import the Python type support of a message, service or action (and so the package's C
    libraries and those of its dependencies), as rclpy does before it first uses the type."""
    type(interface).__import_type_support__()


def test_every_type_has_the_jazzy_type_hash() -> None:
    """Each message, service and action of ours — and every sub-type rosidl generates for them
    (Request/Response/Event, Goal/Result/Feedback, SendGoal, GetResult, FeedbackMessage) — has
    the RIHS01 hash of the upstream Jazzy build, and no type is missing from either side."""
    expected_names = {name for top in INTERFACES for name in generated_type_names(top)}
    assert expected_names == set(JAZZY_TYPE_HASHES), "the reference and the types differ"
    mismatches = {}
    for top_level, interface in INTERFACES.items():
        load_type_support(interface)
        for name in generated_type_names(top_level):
            actual = compiled_type_hash(name)
            if actual != JAZZY_TYPE_HASHES[name]:
                mismatches[name] = actual
    assert not mismatches, f"type hashes that differ from Jazzy's: {mismatches}"


def test_constants_are_jazzys() -> None:
    """The constants (result codes, tolerance components, switch strictness) have Jazzy's
    names and values."""
    for interface, name, value in JAZZY_CONSTANTS:
        assert getattr(interface, name) == value, f"{interface.__name__}.{name}"


def point(seed: float, joints: int = 2) -> JointTrajectoryPoint:
    values = [seed + 0.1 * i for i in range(joints)]
    return JointTrajectoryPoint(
        positions=values,
        velocities=[v / 2 for v in values],
        accelerations=[v / 4 for v in values],
        effort=[v * 3 for v in values],
        time_from_start=Duration(sec=int(seed), nanosec=250_000_000),
    )


def multi_dof_point(seed: float) -> MultiDOFJointTrajectoryPoint:
    return MultiDOFJointTrajectoryPoint(
        transforms=[Transform(translation=Vector3(x=seed, y=-seed, z=2 * seed))],
        velocities=[Twist(linear=Vector3(x=seed))],
        accelerations=[Twist(angular=Vector3(z=-seed))],
        time_from_start=Duration(sec=1),
    )


def populated_messages() -> list[Any]:
    """One instance of every top-level message and of each service's and action's parts, with
    every field set away from its default (nested arrays included)."""
    header = Header(stamp=Time(sec=12, nanosec=345), frame_id="base_link")
    names = ["joint_1", "joint_2"]
    state = State(id=State.PRIMARY_STATE_ACTIVE, label="active")
    interfaces = [
        HardwareInterface(name="joint_1/position", data_type="double", is_available=True),
        HardwareInterface(name="joint_1/effort", data_type="double", is_claimed=True),
    ]
    controller = ControllerState(
        name="arm_controller",
        state="active",
        type="ct_controllers/JointTrajectoryController",
        is_async=True,
        update_rate=500,
        claimed_interfaces=["joint_1/effort"],
        required_command_interfaces=["joint_1/effort", "joint_2/effort"],
        required_state_interfaces=["joint_1/position", "joint_1/velocity"],
        is_chainable=True,
        is_chained=True,
        exported_state_interfaces=["arm_controller/x"],
        reference_interfaces=["arm_controller/joint_1/position"],
        chain_connections=[ChainConnection(name="pid", reference_interfaces=["pid/joint_1"])],
    )
    component = HardwareComponentState(
        name="mujoco",
        type="system",
        is_async=True,
        rw_rate=1000,
        class_type="",
        plugin_name="ct_controllers/MujocoBackend",
        state=state,
        command_interfaces=interfaces,
        state_interfaces=interfaces[::-1],
    )
    tolerance = JointTolerance(name="joint_1", position=0.01, velocity=0.1, acceleration=-1.0)
    component_tolerance = JointComponentTolerance(
        joint_name="base", component=JointComponentTolerance.ROTATION, position=0.2
    )
    trajectory = JointTrajectory(header=header, joint_names=names, points=[point(0.5), point(1.5)])
    multi_dof = MultiDOFJointTrajectory(
        header=header, joint_names=["base"], points=[multi_dof_point(0.3)]
    )
    gripper_state = JointState(header=header, name=["finger"], position=[0.02], effort=[5.0])
    return [
        FollowJointTrajectory.Goal(
            trajectory=trajectory,
            multi_dof_trajectory=multi_dof,
            path_tolerance=[tolerance],
            component_path_tolerance=[component_tolerance],
            goal_tolerance=[tolerance, tolerance],
            component_goal_tolerance=[component_tolerance],
            goal_time_tolerance=Duration(sec=0, nanosec=500_000_000),
        ),
        FollowJointTrajectory.Result(
            error_code=FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED,
            error_string="joint_1 left its path tolerance by 0.02 rad",
        ),
        FollowJointTrajectory.Feedback(
            header=header,
            joint_names=names,
            desired=point(1.0),
            actual=point(1.1),
            error=point(-0.1),
            multi_dof_joint_names=["base"],
            multi_dof_desired=multi_dof_point(0.1),
            multi_dof_actual=multi_dof_point(0.2),
            multi_dof_error=multi_dof_point(-0.1),
        ),
        GripperCommand.Goal(command=GripperCommandMessage(position=0.04, max_effort=20.0)),
        GripperCommand.Result(position=0.03, effort=19.5, stalled=True, reached_goal=False),
        GripperCommand.Feedback(position=0.035, effort=3.0, stalled=False, reached_goal=True),
        ParallelGripperCommand.Goal(command=gripper_state),
        ParallelGripperCommand.Result(state=gripper_state, stalled=True, reached_goal=True),
        ParallelGripperCommand.Feedback(state=gripper_state),
        JointTrajectoryControllerState(
            header=header,
            joint_names=names,
            reference=point(1.0),
            feedback=point(0.9),
            error=point(0.1),
            output=point(7.0),
            multi_dof_joint_names=["base"],
            multi_dof_reference=multi_dof_point(0.4),
            multi_dof_feedback=multi_dof_point(0.5),
            multi_dof_error=multi_dof_point(-0.1),
            multi_dof_output=multi_dof_point(0.6),
            speed_scaling_factor=0.5,
        ),
        QueryTrajectoryState.Request(time=Time(sec=3, nanosec=7)),
        QueryTrajectoryState.Response(
            success=True,
            message="sampled",
            name=names,
            position=[0.1, 0.2],
            velocity=[0.3, 0.4],
            acceleration=[0.5, 0.6],
        ),
        ControllerManagerActivity(
            header=header,
            controllers=[NamedLifecycleState(name="arm_controller", state=state)],
            hardware_components=[NamedLifecycleState(name="mujoco", state=state)],
        ),
        ListControllers.Response(controller=[controller, controller]),
        ListControllerTypes.Response(
            types=["ct_controllers/JointTrajectoryController"],
            base_classes=["controller_interface::ControllerInterface"],
        ),
        ListHardwareComponents.Response(component=[component]),
        ListHardwareInterfaces.Response(
            command_interfaces=interfaces, state_interfaces=interfaces[:1]
        ),
        LoadController.Request(name="arm_controller"),
        LoadController.Response(ok=True),
        ConfigureController.Request(name="arm_controller"),
        CleanupController.Response(ok=True),
        UnloadController.Request(name="arm_controller"),
        ReloadControllerLibraries.Request(force_kill=True),
        SetHardwareComponentState.Request(name="mujoco", target_state=state),
        SetHardwareComponentState.Response(ok=True, state=state),
        SwitchController.Request(
            activate_controllers=["arm_controller"],
            deactivate_controllers=["joint_impedance"],
            strictness=SwitchController.Request.STRICT,
            activate_asap=True,
            timeout=Duration(sec=5),
        ),
        SwitchController.Response(ok=False, message="arm_controller: unknown controller"),
    ]


def test_messages_round_trip_through_rclpy_serialization() -> None:
    """Every populated message serializes to CDR with rclpy's (the RMW's) type support and
    deserializes to an equal message; its CDR differs from the default message's, so the set
    fields are really on the wire."""
    for message in populated_messages():
        data = serialize_message(message)
        assert deserialize_message(data, type(message)) == message, type(message).__name__
        assert data != serialize_message(type(message)()), type(message).__name__


@pytest.fixture
def nodes() -> Iterator[tuple[Node, Node]]:
    """rclpy in this process with two nodes, destroyed when done (their DDS participants would
    otherwise outlive the test)."""
    rclpy.init()
    try:
        server = rclpy.create_node("ct_interface_server")
        client = rclpy.create_node("ct_interface_client")
        try:
            yield server, client
        finally:
            client.destroy_node()
            server.destroy_node()
    finally:
        rclpy.shutdown()


def spin_until(nodes: tuple[Node, Node], condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in nodes:
            rclpy.spin_once(node, timeout_sec=0.01)
        if condition():
            return True
    return False


def test_dds_announces_the_jazzy_hashes_and_carries_the_messages(
    nodes: tuple[Node, Node],
) -> None:
    """Over loopback DDS: the publishers of a JointTrajectoryControllerState topic, of a
    ControllerManagerActivity topic and of the three actions' feedback topics (an rclpy
    ActionServer of each) announce Jazzy's type hashes, as `ros2 topic info -v` shows them;
    a subscriber receives the populated messages equal; and a SwitchController service call
    goes there and back with its request intact."""
    server, client = nodes
    messages = {type(m): m for m in populated_messages()}
    received: dict[str, list[Any]] = {"state": [], "activity": []}
    topics = {
        "/ct_test/controller_state": (JointTrajectoryControllerState, "state"),
        "/ct_test/activity": (ControllerManagerActivity, "activity"),
    }
    publishers = {}
    for topic, (kind, key) in topics.items():
        publishers[topic] = server.create_publisher(kind, topic, 10)
        client.create_subscription(kind, topic, received[key].append, 10)
    action_servers = [
        ActionServer(server, action, f"/ct_test/{name}", lambda handle: None)
        for name, action in (
            ("follow_joint_trajectory", FollowJointTrajectory),
            ("gripper_cmd", GripperCommand),
            ("parallel_gripper_cmd", ParallelGripperCommand),
        )
    ]
    requests: list[SwitchController.Request] = []

    def switch(request: Any, response: Any) -> Any:
        requests.append(request)
        response.ok, response.message = True, f"activated {list(request.activate_controllers)}"
        return response

    server.create_service(SwitchController, "/ct_test/switch_controller", switch)
    announced = {
        "/ct_test/controller_state": "control_msgs/msg/JointTrajectoryControllerState",
        "/ct_test/activity": "controller_manager_msgs/msg/ControllerManagerActivity",
        "/ct_test/follow_joint_trajectory/_action/feedback": (
            "control_msgs/action/FollowJointTrajectory_FeedbackMessage"
        ),
        "/ct_test/gripper_cmd/_action/feedback": (
            "control_msgs/action/GripperCommand_FeedbackMessage"
        ),
        "/ct_test/parallel_gripper_cmd/_action/feedback": (
            "control_msgs/action/ParallelGripperCommand_FeedbackMessage"
        ),
    }
    for topic, type_name in announced.items():

        def discovered(topic: str = topic) -> bool:
            return bool(client.get_publishers_info_by_topic(topic))

        assert spin_until((server, client), discovered, 10.0), f"no publisher of {topic} seen"
        hashes = {str(p.topic_type_hash) for p in client.get_publishers_info_by_topic(topic)}
        assert hashes == {JAZZY_TYPE_HASHES[type_name]}, topic

    state = messages[JointTrajectoryControllerState]
    activity = messages[ControllerManagerActivity]
    assert spin_until(
        (server, client),
        lambda: (
            publishers["/ct_test/controller_state"].get_subscription_count() > 0
            and publishers["/ct_test/activity"].get_subscription_count() > 0
        ),
        10.0,
    )
    publishers["/ct_test/controller_state"].publish(state)
    publishers["/ct_test/activity"].publish(activity)
    assert spin_until((server, client), lambda: all(received.values()), 10.0)
    assert received["state"] == [state] and received["activity"] == [activity]

    switch_client = client.create_client(SwitchController, "/ct_test/switch_controller")
    assert switch_client.wait_for_service(timeout_sec=10.0)
    request = messages[SwitchController.Request]
    future = switch_client.call_async(request)
    assert spin_until((server, client), future.done, 10.0)
    assert requests == [request]
    assert future.result() == SwitchController.Response(
        ok=True, message="activated ['arm_controller']"
    )
    for action_server in action_servers:
        action_server.destroy()
