#!/bin/bash
# Installs fusetrack's build and run dependencies from Debian packages (Debian 12, as root); mkdocs builds
# the documentation site (CTest docs/site).
# The CUDA toolkit (NVRTC, cuFFT headers) is expected under /usr/local/cuda already.
set -euo pipefail
packages=(cmake g++ make pkg-config libboost-dev nlohmann-json3-dev libfmt-dev doctest-dev libcli11-dev
          libzip-dev libfftw3-dev python3-numpy python3-matplotlib libopenmpi-dev openmpi-bin
          pybind11-dev python3-dev python3-pytest mkdocs)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -e /usr/local/cuda/include/nvrtc.h ]; then
  echo "error: the CUDA toolkit (13.x) is needed at /usr/local/cuda (NVRTC headers and library)" >&2
  exit 1
fi
