#!/bin/bash
# Run from the repository root before building into build-gpu/ on a device machine. The carried tree's
# files keep their commit's time (git archive), older than the outputs a warm machine's earlier build
# left in build-gpu/, so ninja would not rebuild what changed. When the sources differ from those of the
# last build here (a hash of their contents kept in build-gpu/), every source file is touched so that
# the build takes them all (a full rebuild, about 35 s). Exit status 1 when they changed (scripts that build
# only without a binary use it to rebuild a stale one), else 0.
set -u
dirs=(CMakeLists.txt cmake framework elements plugins cli tools tests examples)
mkdir -p build-gpu
hash=$(find "${dirs[@]}" -type f -print0 | sort -z | xargs -0 md5sum | md5sum | cut -d' ' -f1)
if [ "$(cat build-gpu/.sources.md5 2>/dev/null)" != "$hash" ]; then
  find "${dirs[@]}" -type f -exec touch {} +
  echo "$hash" > build-gpu/.sources.md5
  echo "== sources changed since the last build here: all touched"
  exit 1
fi
