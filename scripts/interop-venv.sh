#!/usr/bin/env bash
# A scratch virtualenv with other projects' codecs, for shmbus-codec's interop tests:
# rosbags (CDR + ros2msg), protobuf (FileDescriptorSet + binary protobuf), and the MCAP
# libraries with their ROS 2 and protobuf support. Pinned versions; idempotent: when the
# virtualenv already has them all, it only checks and exits.
#
# Usage: scripts/interop-venv.sh [VENV_DIR]   (default: target/interop-venv)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-${CARGO_TARGET_DIR:-target}/interop-venv}"
PINS=(rosbags==0.11.9 protobuf==7.36.2 mcap==1.6.0 mcap-ros2-support==0.6.0 mcap-protobuf-support==0.6.0 pypng==0.20220715.0)
STAMP="$VENV/.shmbus-pins"

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PINS[*]}" ]; then
  exit 0
fi
python3 -c 'import venv, ensurepip' 2>/dev/null || { apt-get update && apt-get install -y python3-venv; }
test -x "$VENV/bin/python" || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "${PINS[@]}"
# The stamp is written last, so an interrupted install is redone next time.
echo "${PINS[*]}" > "$STAMP"
echo "interop-venv: $VENV ready (${PINS[*]})"
