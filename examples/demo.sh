#!/usr/bin/env bash
# The main job, as far as it is built: check the example mesh.
set -euo pipefail
cd "$(dirname "$0")/.."
bin/meshgen check --repo examples/lab
