#!/usr/bin/env bash
# A scratch node_modules with the Foxglove WebSocket protocol's own client
# (`@foxglove/ws-protocol`'s FoxgloveClient) and the `ws` package, for shmbus-foxglove's
# interop tests. Pinned versions; idempotent: when the directory already has them all, it
# only checks and exits.
#
# Usage: scripts/node-interop.sh [DIR]   (default: target/node-interop)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-${CARGO_TARGET_DIR:-target}/node-interop}"
PINS=(@foxglove/ws-protocol@0.8.0 ws@8.23.1)
STAMP="$DIR/.shmbus-pins"

if [ -d "$DIR/node_modules/@foxglove/ws-protocol" ] && [ -d "$DIR/node_modules/ws" ] && [ -f "$STAMP" ] \
   && [ "$(cat "$STAMP")" = "${PINS[*]}" ]; then
  exit 0
fi
command -v npm >/dev/null || { apt-get update && apt-get install -y nodejs npm; }
mkdir -p "$DIR"
# A package.json of its own, so that npm installs here and not into a parent project.
test -f "$DIR/package.json" || echo '{"name":"shmbus-node-interop","private":true}' > "$DIR/package.json"
npm install --prefix "$DIR" --no-audit --no-fund --silent --save-exact "${PINS[@]}"
# The stamp is written last, so an interrupted install is redone next time.
echo "${PINS[*]}" > "$STAMP"
echo "node-interop: $DIR ready (${PINS[*]})"
