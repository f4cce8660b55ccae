# ct_controllers: `make setup`, `make sim`, `make test`. Every target sets up the environment
# first (idempotent) and keeps DDS on loopback.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.setup-stamp
# The venv's ament prefix entries (tools/ament_prefix.sh) link each data file into the checkout:
# re-laid when a file is added to or removed from these folders (their modification times).
AMENT_STAMP := $(VENV)/.ament-stamp
AMENT_INPUTS := tools/ament_prefix.sh resource launch config urdf
SETUP_INPUTS := requirements.txt setup.py setup.cfg package.xml tools/setup_env.sh \
	$(wildcard ct_interfaces/*.txt ct_interfaces/*.xml ct_interfaces/*/*) \
	$(wildcard third_party/*/*.txt third_party/*/*.xml third_party/*/*/*)

export RMW_IMPLEMENTATION := rmw_fastrtps_cpp
export ROS_AUTOMATIC_DISCOVERY_RANGE := SYSTEM_DEFAULT
export FASTRTPS_DEFAULT_PROFILES_FILE := $(CURDIR)/ct_controllers/ros/fastdds_loopback.xml
export FASTDDS_DEFAULT_PROFILES_FILE := $(CURDIR)/ct_controllers/ros/fastdds_loopback.xml

.PHONY: setup sim test lint typecheck unit clean

setup: $(STAMP) $(AMENT_STAMP)

$(STAMP): $(SETUP_INPUTS)
	bash tools/setup_env.sh
	touch $@

$(AMENT_STAMP): $(STAMP) $(AMENT_INPUTS)
	bash tools/ament_prefix.sh
	touch $@

sim: setup
	$(BIN)/ct-sim

lint: setup
	$(BIN)/ruff check ct_controllers test launch
	$(BIN)/ruff format --check ct_controllers test launch
	$(BIN)/lint-imports

typecheck: setup
	$(BIN)/mypy ct_controllers

# --reruns 1: a failed test runs once more, reported as R (the summary counts reruns). Debt:
# three fresh-clone runs in session 10 each had 1-4 failures of real-time rig tests (CANopen
# and bridge deadlines of 200 ms against threads of the test process on this 2-core VM), each
# passing alone and in the other runs; a deterministic failure still fails both times.
# tools/run_tests.sh: the realtime tests in a session of their own, the rest in two workers.
unit: setup
	bash tools/run_tests.sh

test: lint typecheck unit

clean:
	rm -rf $(VENV) build
