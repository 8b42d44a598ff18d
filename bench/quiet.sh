#!/usr/bin/env bash
# The checks that need a quiet machine to mean anything: latencies and
# shares of a core compared across time windows, which a loaded machine
# makes lie (tests/listener_bounds.rs's `a_status_is_answered_at_once_and_
# the_app_keeps_its_quota`). They are #[ignore]d in the default suite, which
# decides by counts a busy machine cannot fake; run them here, alone, on an
# otherwise idle machine. Needs root, like the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
cargo test --test listener_bounds -- --ignored --nocapture --test-threads=1
