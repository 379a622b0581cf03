#!/usr/bin/env bash
# Install the pinned CUDA 13.0 nvcc (from PyPI wheels) into <repo>/.tools/nvcc.
# Idempotent: does nothing when the pinned nvcc is already there. Prints the nvcc path last.
#
# `cargo xtask build-kernels` finds it there by itself (after $NVCC, PATH and $CUDA_HOME).
# Only PTX is produced (nvcc -ptx), so no GPU, driver or full toolkit is needed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/.tools/nvcc"
NVCC="$DEST/nvidia/cu13/bin/nvcc"
WANT="V13.0.88"
PKGS=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
)

if [[ -x "$NVCC" ]] && "$NVCC" --version 2>/dev/null | grep -q "$WANT"; then
  echo "$NVCC" && exit 0
fi

PY="${PYTHON:-python3}"
TMP="$DEST.tmp.$$"
trap 'rm -rf "$TMP"' EXIT
rm -rf "$TMP"
echo "installing nvcc $WANT into $DEST" >&2
"$PY" -m pip install --quiet --disable-pip-version-check --no-input --root-user-action=ignore \
  --target "$TMP" "${PKGS[@]}" >&2
"$TMP/nvidia/cu13/bin/nvcc" --version | grep -q "$WANT"
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
mv "$TMP" "$DEST"
echo "$NVCC"
