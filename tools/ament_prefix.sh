#!/usr/bin/env bash
# The venv as an ament prefix for ct_controllers, laid out as colcon installs it (setup.py's
# data_files and setup.cfg's install_scripts): the ament index entry, share/ct_controllers/
# (package.xml, launch/*.py, config/*.yaml, urdf/*.xacro) and lib/ct_controllers/ (where
# `ros2 run` and launch_ros's Node look for ct_control_node). pip's editable install makes none
# of them. Each file is a link into the checkout, as `colcon build --symlink-install` makes it,
# so edits show at once; the Makefile re-runs this script when a file is added to or removed
# from those folders (their modification times). share/ct_controllers is laid anew each time,
# so a removed file leaves no stale link. (Whole-folder links would not do: `ros2 launch` walks
# the share folder without following links to folders.) test/test_install.py checks that this
# layout is the one colcon installs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
SHARE=$VENV/share/ct_controllers

mkdir -p "$VENV/share/ament_index/resource_index/packages" "$VENV/lib/ct_controllers"
ln -sfn "$ROOT/resource/ct_controllers" "$VENV/share/ament_index/resource_index/packages/ct_controllers"
rm -rf "$SHARE"
mkdir -p "$SHARE/launch" "$SHARE/config" "$SHARE/urdf"
ln -s "$ROOT/package.xml" "$SHARE/package.xml"
for file in launch/*.py config/*.yaml urdf/*.xacro; do
  ln -s "$ROOT/$file" "$SHARE/$file"
done
for script in ct_control_node ct-bringup ct-sim ct-bench ct-setup; do
  ln -sfn "../../bin/$script" "$VENV/lib/ct_controllers/$script"
done
[ -x "$VENV/lib/ct_controllers/ct_control_node" ] \
  || { echo "ament_prefix: $VENV/lib/ct_controllers/ct_control_node is not executable" >&2; exit 1; }
