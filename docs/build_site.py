#!/usr/bin/env python3
"""Builds the documentation site from a fusetrack build tree, without writing into the source tree.

    python3 docs/build_site.py BUILD_DIR [--site DIR]

1. copies docs/mkdocs.yml and docs/pages into BUILD_DIR/docs/ (the staged sources);
2. writes the generated reference pages and the worked examples' pages (examples/<topic>/README.md)
   into the staged pages (docs/generate_reference.py), the examples also into the staged nav;
3. checks the Markdown for constructs that Python-Markdown silently renders wrongly (``lint``) and
   that the README's relative links point at existing files;
4. runs ``mkdocs build --strict`` into the site directory (default BUILD_DIR/docs/site): every MkDocs
   warning, a link to a page that does not exist among them, fails the build;
5. checks that the anchor of every internal link (``page.html#anchor``) exists in its page.

Exit status: 0 built; 1 a warning, a lint finding or a generation error; 77 MkDocs is not installed
(CTest reports the test as skipped; tools/install_deps.sh installs the Debian package `mkdocs`).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SKIPPED = 77

sys.path.insert(0, str(HERE))
import generate_reference  # noqa: E402


def mkdocs_command() -> list[str] | None:
    """How to run MkDocs here: the `mkdocs` program, else the module of this interpreter."""
    program = shutil.which("mkdocs")
    if program:
        return [program]
    try:
        import mkdocs  # noqa: F401, PLC0415
    except ImportError:
        return None
    return [sys.executable, "-m", "mkdocs"]


LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+\.) ")


def lint(path: Path, relative: str) -> list[str]:
    """Findings that MkDocs does not warn about but that break the rendered page:

    - a list that starts right after a paragraph line (Python-Markdown needs a blank line, otherwise
      the items run into the paragraph);
    - a list item nested by fewer than four spaces (Python-Markdown flattens it);
    - a list item inside a block (lines between blank lines) that starts indented: Python-Markdown
      gives the whole block to the previous item, so the item becomes text of its paragraph;
    - `\\|` inside a code span: Python-Markdown renders the backslash (a pipe in a code span needs no
      escape, even in a table);
    - an unclosed code fence.
    """
    findings = []
    lines = path.read_text().splitlines()
    in_fence = False
    fence_line = 0
    previous = ""
    block_indent = -1  # indentation of the first line of the current block, -1: it starts with an item
    list_indents: list[int] = []
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            fence_line = number
            previous = line
            continue
        if in_fence:
            continue
        if re.search(r"`[^`]*\\\|[^`]*`", line):
            findings.append(f"{relative}:{number}: `\\|` inside a code span (Python-Markdown keeps the backslash; "
                            "write | there, tables allow it)")
        item = LIST_ITEM.match(line)
        if not previous.strip() or previous.lstrip().startswith("```"):
            block_indent = len(line) - len(line.lstrip()) if line.strip() and not item else -1
        elif item and 0 <= len(item[1]) < block_indent:
            findings.append(f"{relative}:{number}: a list item inside an indented block (add a blank line before it)")
        if not line.strip():
            pass
        elif item:
            indent = len(item[1])
            previous_is_text = (previous.strip() and not LIST_ITEM.match(previous) and not previous.startswith(" ")
                                and not previous.startswith(("|", "#", "<!--")))
            if previous_is_text and not list_indents:
                findings.append(f"{relative}:{number}: a list right after a paragraph line (add a blank line)")
            if 0 < indent < 4 and list_indents and list_indents[-1] == 0:
                findings.append(f"{relative}:{number}: a nested list item indented by {indent} spaces (use 4)")
            list_indents = [i for i in list_indents if i <= indent]
            if not list_indents or list_indents[-1] != indent:
                list_indents.append(indent)
        elif not line.startswith(" "):
            list_indents = []
        previous = line
    if in_fence:
        findings.append(f"{relative}:{fence_line}: a code fence that is never closed")
    return findings


HREF = re.compile(r'href="([^"#:]*)#([^"]+)"')
HTML_ID = re.compile(r'\sid="([^"]+)"')


def check_anchors(site: Path) -> list[str]:
    """Internal links to `page.html#anchor`: the anchor must exist in the page (MkDocs checks the
    pages of links, not their anchors)."""
    ids: dict[Path, set[str]] = {}

    def ids_of(page: Path) -> set[str]:
        if page not in ids:
            ids[page] = set(HTML_ID.findall(page.read_text(errors="replace"))) if page.is_file() else set()
        return ids[page]

    findings = []
    for page in sorted(site.rglob("*.html")):
        if page.relative_to(site).parts[0] in ("search", "css", "js", "fonts", "img"):
            continue
        for target, fragment in HREF.findall(page.read_text(errors="replace")):
            target_page = (page.parent / target).resolve() if target else page
            if fragment not in ids_of(target_page):
                findings.append(f"{page.relative_to(site)}: a link to {target or '(this page)'}#{fragment}: "
                                "no such anchor")
    return findings


MD_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def check_readme_links() -> list[str]:
    """The README's relative links (into docs/pages, plugins/...) point at files that exist: GitHub
    renders them, MkDocs never sees them."""
    readme = HERE.parent / "README.md"
    findings = []
    for number, line in enumerate(readme.read_text().splitlines(), 1):
        for target in MD_LINK.findall(line):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (readme.parent / target).exists():
                findings.append(f"README.md:{number}: a link to {target}, which does not exist")
    return findings


def stage(build_dir: Path) -> Path:
    staged = build_dir / "docs"
    pages = staged / "pages"
    if pages.exists():
        shutil.rmtree(pages)
    staged.mkdir(parents=True, exist_ok=True)
    shutil.copytree(HERE / "pages", pages, ignore=shutil.ignore_patterns("generated", "examples"))
    shutil.copy2(HERE / "mkdocs.yml", staged / "mkdocs.yml")
    return staged


EXAMPLES_NAV = "      - Overview: examples/index.md\n"


def add_examples_to_nav(staged: Path) -> None:
    """Lists the worked examples' pages in the staged mkdocs.yml, after the examples' overview."""
    config = staged / "mkdocs.yml"
    text = config.read_text()
    if EXAMPLES_NAV not in text:
        raise generate_reference.GenerationError(f"docs/mkdocs.yml: no nav line {EXAMPLES_NAV.strip()!r}")
    entries = []
    for page in sorted((staged / "pages" / "examples").glob("*.md")):
        if page.name == "index.md":
            continue
        title = next((line[2:].strip() for line in page.read_text().splitlines() if line.startswith("# ")),
                     page.stem)
        entries.append(f"      - {json.dumps(title)}: examples/{page.name}\n")
    config.write_text(text.replace(EXAMPLES_NAV, EXAMPLES_NAV + "".join(entries)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path, help="fusetrack build tree (holds bin/fusetrack)")
    parser.add_argument("--site", type=Path, help="output directory of the site (default BUILD_DIR/docs/site)")
    parser.add_argument("--python", default="", help="interpreter of the built Python module")
    args = parser.parse_args()
    build_dir = args.build_dir.resolve()

    mkdocs = mkdocs_command()
    if mkdocs is None:
        print("build_site: mkdocs is not installed (Debian package `mkdocs`, tools/install_deps.sh): "
              "the site was not built", file=sys.stderr)
        return SKIPPED

    staged = stage(build_dir)
    python = args.python or generate_reference.build_python(build_dir) or sys.executable
    try:
        written = generate_reference.generate(build_dir, staged / "pages", python)
        for path in written:
            print(f"generated {path.relative_to(build_dir)}")
        add_examples_to_nav(staged)
    except generate_reference.GenerationError as error:
        print(f"build_site: error: {error}", file=sys.stderr)
        return 1

    findings = check_readme_links()
    for path in sorted((staged / "pages").rglob("*.md")):
        findings += lint(path, str(path.relative_to(staged / "pages")))
    for finding in findings:
        print(f"build_site: {finding}", file=sys.stderr)
    if findings:
        return 1

    site = (args.site or staged / "site").resolve()
    result = subprocess.run(mkdocs + ["build", "--strict", "--clean", "-f", str(staged / "mkdocs.yml"),
                                      "-d", str(site)])
    if result.returncode != 0:
        print(f"build_site: mkdocs build --strict failed (exit {result.returncode})", file=sys.stderr)
        return 1
    anchors = check_anchors(site)
    for finding in anchors:
        print(f"build_site: {finding}", file=sys.stderr)
    if anchors:
        return 1
    print(f"build_site: the site is in {site} (open {site / 'index.html'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
