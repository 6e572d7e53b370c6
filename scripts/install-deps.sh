#!/usr/bin/env bash
# Installs, from Debian's packages, whatever pfx needs to build and test that is not there yet.
set -euo pipefail

packages=(cmake make g++ librapidcheck-dev libgtest-dev libbenchmark-dev libboost-dev
          libcli11-dev nlohmann-json3-dev libfmt-dev pybind11-dev python3-dev
          python3-pip python3-venv python3-setuptools python3-wheel python3-numpy python3-torch
          clang libclang-rt-14-dev clang-tidy libopenmpi-dev openmpi-bin)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "pfx: installing ${missing[*]}" >&2
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
