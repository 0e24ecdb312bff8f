"""The documentation and the committed run folders carry findings, not the diary of how they were made.
 Two scans, each failing with every offending file and line:

* Markdown (every `*.md` git knows or would add: tracked, plus untracked files not ignored; `third_party/` left out):
  no issue or stop numbers, no "(honestly)", no commit hashes of this repository ("commit 6931724"), no words about
  how the work was organised, and no machine paths (`/work/`, `/root/`, `/home/`, `../shared`). `/tmp/` is allowed
  only inside code (a fenced block or an inline code span), where it names a path inside a container
  (`TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor`); in prose it is a path of the machine the text was written on.
  sha256 pins and a vendor repository's `owner/name@<hex>` in a table are data and are not matched: the hash rule
  is only "commit <hex>".
* Run folders (`docs/**/run*/...` and `docs/runs/...`, text files only): no absolute host paths (`/work/`,
  `/home/`, `/root/`) and no symlinks (a run's `.interpreter/` links point into the machine that made it).
 Add a word or a path by extending MARKDOWN_RULES, MARKDOWN_PROSE_RULES or RUN_FOLDER_RULES.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (name, pattern): matched anywhere in a Markdown line, code included.
MARKDOWN_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("issue number", re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)),
    ("stop number", re.compile(r"\bstops?\s+\d+", re.IGNORECASE)),
    ("(honestly)", re.compile(r"\(honestly\)", re.IGNORECASE)),
    ("commit hash", re.compile(r"\bcommit\s+`?[0-9a-f]{7,40}\b", re.IGNORECASE)),
    ("how the work was organised", re.compile(
        r"\bhelper sessions?\b|\ban earlier version of this (?:appendix|page|README)\b|\bthis session\b",
        re.IGNORECASE)),
    ("local path", re.compile(r"/work/|/root/|/home/|\.\./shared\b")),
)
# Matched only outside code (fenced blocks and inline code spans are blanked first).
MARKDOWN_PROSE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("local path", re.compile(r"(?<![\w.])/tmp/")),
)
RUN_FOLDER_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("absolute host path", re.compile(r"/work/|/home/|/root/")),
)
RUN_FOLDER_TEXT = (".json", ".log", ".md", ".txt", ".html", ".tex", ".mllog")
INLINE_CODE = re.compile(r"`[^`]*`")


def _files(*pathspecs: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *pathspecs],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    return sorted(set(out.splitlines()))


def _markdown_files() -> list[str]:
    return [f for f in _files("*.md") if not f.startswith("third_party/") and (REPO / f).is_file()]


def _run_folder_files() -> list[str]:
    def in_run_folder(path: str) -> bool:
        parts = path.split("/")
        return parts[0] == "docs" and (parts[1:2] == ["runs"] or any(p.startswith("run") for p in parts[1:-1]))
    return [f for f in _files("docs") if in_run_folder(f)]


def markdown_findings(path: str, text: str) -> list[str]:
    found = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        for name, pattern in MARKDOWN_RULES:
            if pattern.search(line):
                found.append(f"{path}:{number}: {name}: {line.strip()[:160]}")
        prose = "" if fenced or line.lstrip().startswith(("```", "~~~")) else INLINE_CODE.sub("``", line)
        for name, pattern in MARKDOWN_PROSE_RULES:
            if pattern.search(prose):
                found.append(f"{path}:{number}: {name} outside code: {line.strip()[:160]}")
    return found


def test_markdown_has_no_development_words_or_machine_paths():
    found = []
    for path in _markdown_files():
        found += markdown_findings(path, (REPO / path).read_text(encoding="utf-8", errors="replace"))
    assert not found, "\n".join(found)


def test_committed_run_folders_hold_no_host_paths_or_symlinks():
    """Expected to fail on docs/target/run-2026-11-2[35]-cpu until they are scrubbed (run.json argv, the
    r*.spec.json paths, the .interpreter/ symlinks)."""
    found = []
    for path in _run_folder_files():
        full = REPO / path
        if full.is_symlink():
            found.append(f"{path}: symlink to {full.readlink()}")
            continue
        if not full.is_file() or not path.endswith(RUN_FOLDER_TEXT):
            continue
        for number, line in enumerate(full.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for name, pattern in RUN_FOLDER_RULES:
                if pattern.search(line):
                    found.append(f"{path}:{number}: {name}: {line.strip()[:160]}")
    assert not found, "\n".join(found[:200]) + (f"\n... and {len(found) - 200} more" if len(found) > 200 else "")


def test_the_rules_catch_what_they_are_for():
    bad = ["as issue 29 asked", "stop 36 wrote", "the locks (honestly)", "before commit 6931724",
           "from no helper sessions", "an earlier version of this appendix said", "--data-dir ../shared/data",
           "out /work/runs/x", "in /tmp/scratch"]
    for line in bad:
        assert markdown_findings("x.md", line), line
    good = ["`TORCHINDUCTOR_CACHE_DIR=/tmp/torchinductor`", "NVIDIA/apex@4ef930c1 `0c74fd12…139f`",
            "| sha256 | 4ecd8ecd0f1e2d3c |", "`run_stop` before `test_metric`", "the first 512 pairs",
            "```\nHOME=/tmp/x\n```"]
    for text in good:
        assert not markdown_findings("x.md", text), text
