#!/usr/bin/env bash
# Installs what tools/kjv/train.py needs (Debian 12 packages): PyTorch, OpenBLAS for it (Debian's
# torch uses whatever libblas.so.3 points to: the reference BLAS would make training ~20x
# slower), SentencePiece, NumPy and the King James Bible. Not needed to build or test daisy: the
# trained models are committed (models/kjv).
set -euo pipefail
PACKAGES=(python3-torch python3-numpy python3-sentencepiece libopenblas0-pthread bible-kjv bible-kjv-text)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "tools/kjv/setup.sh: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# OpenBLAS must be the BLAS torch loads.
blas=$(readlink -f "$(ldconfig -p | awk '/libblas.so.3 / {print $NF; exit}')")
case "$blas" in
  *openblas*) ;;
  *) echo "tools/kjv/setup.sh: libblas.so.3 is $blas, not OpenBLAS; run: update-alternatives --config libblas.so.3-$(dpkg --print-architecture)-linux-gnu" >&2
     exit 1 ;;
esac
