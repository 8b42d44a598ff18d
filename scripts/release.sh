#!/usr/bin/env bash
# Release artifacts from a checkout: the static (musl) drainit for x86_64 and
# aarch64, named as users expect, a SHA256SUMS file, and (with --image) one
# `FROM scratch` image per architecture holding only /drainit.
#
#   scripts/release.sh [--out DIR] [--target-dir DIR] [--image NAME] [--verify] [--allow-dirty]
#
#   --out DIR         where the artifacts go (default: dist)
#   --target-dir DIR  cargo's target dir, emptied first (default: target/dist)
#   --image NAME      also build NAME:<version>-amd64 and NAME:<version>-arm64
#   --verify          build everything a second time into another fresh
#                     target dir and fail unless the bytes are identical
#   --allow-dirty     build even with uncommitted changes (the binaries then
#                     name a commit they do not match: not for release)
#
# Needs: rustup targets x86_64-unknown-linux-musl and aarch64-unknown-linux-musl
# (the arm64 build links with the toolchain's own rust-lld, see
# .cargo/config.toml), C compilers for ring (the Kubernetes client's TLS
# provider): musl-gcc (Debian's musl-tools) and aarch64-linux-gnu-gcc
# (gcc-aarch64-linux-gnu), sha256sum, and a Docker engine for --image.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd -P)

out=dist
target_dir=target/dist
image=
verify=
allow_dirty=
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --target-dir) target_dir=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --verify) verify=1; shift ;;
    --allow-dirty) allow_dirty=1; shift ;;
    *) echo "release.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done

# target triple : artifact name : Docker platform architecture
targets=(
  "x86_64-unknown-linux-musl:drainit-x86_64-linux-musl:amd64"
  "aarch64-unknown-linux-musl:drainit-aarch64-linux-musl:arm64"
)

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  if [ -z "$allow_dirty" ]; then
    echo "release.sh: the checkout has uncommitted changes, and --version would name HEAD anyway; commit them (or pass --allow-dirty for a build that is not a release)" >&2
    exit 1
  fi
  echo "release.sh: warning: uncommitted changes; --version names HEAD anyway" >&2
fi

# Reproducible bytes: nothing of this machine may end up in the binary.
# Panic locations carry source paths, so the registry and the checkout are
# renamed to fixed prefixes (std's are /rustc/<hash> already). This replaces
# .cargo/config.toml's rustflags, so its settings (non-PIE, identical code
# folding) are repeated here.
cargo_home=$(cd "${CARGO_HOME:-$HOME/.cargo}" && pwd -P)
# The whole cargo home, not its registry folders: on a fresh machine those
# do not exist until the build downloads the crates.
flags=(-C relocation-model=static -C link-arg=--icf=all "--remap-path-prefix=$root=/drainit"
  "--remap-path-prefix=$cargo_home=/cargo")
CARGO_ENCODED_RUSTFLAGS=$(IFS=$'\x1f'; echo "${flags[*]}")
export CARGO_ENCODED_RUSTFLAGS
unset RUSTFLAGS

# ring's C and assembly: a fixed compiler per target, and no path of this
# machine in the objects (the same renaming as for Rust; the build dirs
# differ between the two --verify builds).
export CC_x86_64_unknown_linux_musl=musl-gcc
export AR_x86_64_unknown_linux_musl=ar
export CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
export AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar
cflags="-ffile-prefix-map=$root=/drainit -ffile-prefix-map=$cargo_home=/cargo"
export CFLAGS_x86_64_unknown_linux_musl="$cflags"
export CFLAGS_aarch64_unknown_linux_musl="$cflags"
unset CFLAGS CC AR
for tool in "$CC_x86_64_unknown_linux_musl" "$CC_aarch64_unknown_linux_musl"; do
  command -v "$tool" >/dev/null || {
    echo "release.sh: $tool is missing (apt-get install musl-tools gcc-aarch64-linux-gnu)" >&2
    exit 1
  }
done

build_all() { # target dir, output dir
  local dir=$1 dest=$2 spec triple name
  rm -rf "$dir" "$dest"
  mkdir -p "$dest"
  for spec in "${targets[@]}"; do
    IFS=: read -r triple name _ <<<"$spec"
    cargo build --locked --release --bin drainit --target "$triple" --target-dir "$dir"
    cp "$dir/$triple/release/drainit" "$dest/$name"
  done
  (cd "$dest" && sha256sum drainit-* >SHA256SUMS)
  # What built them: the same commit and toolchain give the same bytes.
  rustc -vV >"$dest/TOOLCHAIN"
}

# Same commit + same toolchain = same bytes: say which toolchain this was.
echo "toolchain: $(rustc -V)"
build_all "$target_dir" "$out"
for spec in "${targets[@]}"; do
  IFS=: read -r _ name _ <<<"$spec"
  size=$(stat -c %s "$out/$name")
  echo "$name: $size bytes"
  [ "$size" -le 2097152 ] || { echo "release.sh: $name is over its 2 MiB budget" >&2; exit 1; }
done

if [ -n "$verify" ]; then
  build_all "$target_dir-again" "$out-again"
  if ! cmp "$out/SHA256SUMS" "$out-again/SHA256SUMS"; then
    echo "release.sh: NOT reproducible: a second build into a fresh target dir differs" >&2
    diff "$out/SHA256SUMS" "$out-again/SHA256SUMS" >&2 || true
    exit 1
  fi
  rm -rf "$target_dir-again" "$out-again"
  echo "reproducible: two fresh builds gave identical bytes"
fi

if [ -n "$image" ]; then
  commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  for spec in "${targets[@]}"; do
    IFS=: read -r _ name arch <<<"$spec"
    cp "$out/$name" "$context/drainit"
    # --no-cache: a cached step of one architecture must not end up under
    # the other's image (the legacy builder matches cache by content).
    docker build -q --no-cache --platform "linux/$arch" -f scripts/scratch.Dockerfile \
      --build-arg "VERSION=$version" --build-arg "REVISION=$commit" \
      -t "$image:$version-$arch" "$context" >/dev/null
    echo "$image:$version-$arch: $(docker image inspect -f '{{.Size}}' "$image:$version-$arch") bytes"
  done
fi
echo "artifacts in $out/:"
(cd "$out" && ls -l && cat SHA256SUMS)
