#!/usr/bin/env bash
# Installs everything daisy needs on Debian 12: build tools and libraries (apt), and the test
# tooling (npm ci: node-llama-cpp as the reference implementation, real tokenizer files).
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake ninja-build pkg-config git
              libcli11-dev libpcre2-dev nlohmann-json3-dev libgtest-dev libgmock-dev
              libbenchmark-dev libssl-dev libxxhash-dev libtomlplusplus-dev
              python3 python3-jinja2 clang libclang-rt-14-dev openssl)
# Node.js may come from outside Debian's packages (a newer release): any node + npm on PATH will do.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  APT_PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci (node-llama-cpp, tokenizer files)" >&2
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
fi
