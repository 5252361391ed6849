#!/usr/bin/env python3
"""Fails when a user-facing file speaks of how fusetrack was made instead of what it does.

    python3 docs/check_wording.py SOURCE_DIR

The product (README, docs, the library, elements, plugins, the command line, examples, comparisons with
other codes, tests) describes behaviour, physics and sources; the development record (issue numbers,
work sessions) lives in bench/, which is not checked. Prints every offending line as FILE:LINE: TEXT and
exits 1 if there is one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# The same pattern as the review's grep: grep -rniE "issue #?[0-9]+|(first|second|third|[a-z]+th) session"
PATTERN = re.compile(r"issue #?[0-9]+|(first|second|third|[a-z]+th) session", re.IGNORECASE)
CHECKED = ["README.md", "docs", "framework", "elements", "plugins", "cli", "tools", "tests", "examples",
           "validation"]
SKIPPED_DIRS = {".git", "__pycache__", "build", "generated", "corpus"}


def text_files(root: Path):
    for entry in CHECKED:
        path = root / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            for file in sorted(path.rglob("*")):
                if file.is_file() and not SKIPPED_DIRS.intersection(file.relative_to(root).parts):
                    yield file


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(sys.argv[1]).resolve()
    found = 0
    for file in text_files(root):
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            continue  # binary files (images, archives)
        for number, line in enumerate(lines, 1):
            if PATTERN.search(line):
                print(f"{file.relative_to(root)}:{number}: {line.strip()}")
                found += 1
    if found:
        print(f"check_wording: {found} line(s) speak of issues or sessions: say what the code does instead "
              "(the development record belongs in bench/)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
