#!/usr/bin/env bash
# Side-by-side benchmarks: drainit against tini, dumb-init and catatonit.
# Installs the other inits from Debian if absent, builds drainit and the
# helpers static (musl), and prints a Markdown table (see README
# "Performance"). Needs root (PID namespaces). Pass --quick for a short run.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
[ -x /usr/bin/tini-static ] || missing+=(tini)
command -v dumb-init >/dev/null || missing+=(dumb-init)
command -v catatonit >/dev/null || missing+=(catatonit)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
rustup target add x86_64-unknown-linux-musl >/dev/null
cargo build --release --target x86_64-unknown-linux-musl --bins --examples
out=target/x86_64-unknown-linux-musl/release
echo "machine: $(nproc) cores, $(uname -r), $(date -u +%Y-%m-%d)" >&2
exec "$out/examples/bench" "$PWD/$out/drainit" "$PWD/$out/examples/stress" "$@"
