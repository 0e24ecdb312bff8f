"""The prose of the reviewer's documents cannot drift from what ran, and their links lead somewhere.
 README.md, ARTIFACT.md and docs/platforms/*.md: every number written outside a rendered block (harness.docs.blocks
keeps those equal to the committed runs: tests/test_docs_render.py) must be one of the cited figures of
docs/figures.toml, each listed with its source. A figure whose source is a committed file (`file`) must still be in that
file; one whose source is outside the repository (`cite`: the paper, a vendor's document) names it. A figure no document
uses any more is dropped from the list, so the list stays the set of numbers the prose states.

What counts as a number: a run of digits, with its decimal or version parts (`2.13.0`, `25.5.rc1`) and thousands
separators (`50,000`), or an ISO date. Not counted: single digits (counts such as "2 cores", "8 NPUs"; the defaults
they repeat are rendered and checked against `reproduce.sh --help`), digits glued to a letter or underscore (`C1`,
`sm_90`, `fp32`, `H100`, `x86_64`) or to a name by a hyphen (`CIFAR-10`, `ResNet-50`), and everything inside code
(fenced blocks, inline code), link targets, HTML comments and addresses (`github.com/...`).

Links: every relative link (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`) must name a file or folder of
the repository, and its anchor a heading of the Markdown file it names (GitHub's slugs).
"""

from __future__ import annotations

import re
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIGURES = REPO / "docs" / "figures.toml"
DOCS = ("README.md", "ARTIFACT.md", "docs/platforms/*.md")

RENDERED = re.compile(r"^[ \t]*<!-- rendered:([\w-]+) -->[ \t]*\n.*?^[ \t]*<!-- /rendered:\1 -->[ \t]*$", re.S | re.M)
FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
COMMENT = re.compile(r"<!--.*?-->", re.S)
LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]+)\)")
ADDRESS = re.compile(r"(?:https?://)?(?:[\w-]+\.)+(?:com|org|cn|io|net|dev)(?:/[^\s)\]|,;]*)?")
DATE = r"\d{4}-\d{2}(?:-\d{2})?"
# Not preceded by a word character, a dot or the like (sm_90, A.5, #5066, @4ef930c1, 1/1.49), nor by a name's hyphen
# (CIFAR-10, ResNet-50, Apache-2.0).
NUMBER = re.compile(rf"(?<![\w.#@$^~+/])(?<![A-Za-z]-)"
                    rf"(?:{DATE}|(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.[0-9A-Za-z]+)*)(?![\w])")


def doc_paths(repo: Path = REPO) -> list[Path]:
    return sorted({p for pattern in DOCS for p in repo.glob(pattern)})


def prose(text: str) -> str:
    """The text a reader reads as prose: rendered blocks, code, comments, link targets and addresses blanked (each
    replaced by as many newlines as it held, so line numbers stay)."""
    keep_lines = lambda m: "\n" * m.group(0).count("\n")  # noqa: E731
    for pattern in (RENDERED, FENCE, COMMENT):
        text = pattern.sub(keep_lines, text)
    text = INLINE_CODE.sub(" ", text)
    text = LINK.sub(lambda m: f"[{m.group(1)}]", text)
    return ADDRESS.sub(" ", text)


def numbers(text: str) -> list[tuple[int, str]]:
    """(line, number) of every number the prose states that needs a source (see the module's docstring)."""
    found = []
    for lineno, line in enumerate(prose(text).splitlines(), 1):
        for m in NUMBER.finditer(line):
            if not re.fullmatch(r"\d", m.group(0)):
                found.append((lineno, m.group(0)))
    return found


def load_figures(path: Path = FIGURES) -> list[dict]:
    return tomllib.loads(path.read_text())["figure"]


def figure_problems(figures: list[dict], repo: Path = REPO) -> list[str]:
    """Entries that lack a source, or whose committed file no longer holds their value."""
    out = []
    for f in figures:
        if not f.get("what") or bool(f.get("file")) == bool(f.get("cite")):
            out.append(f"{f.get('values')}: give `what` and one of `file` or `cite`")
            continue
        if f.get("file"):
            path = repo / f["file"]
            if not path.is_file():
                out.append(f"{f['values']}: {f['file']} is not a committed file")
                continue
            held = path.read_text(errors="replace")
            for v in f["values"]:
                if v not in held and v.replace(",", "") not in held and v.replace(",", "_") not in held:
                    out.append(f"{v}: not in {f['file']} any more ({f['what']})")
    return out


def unlisted(repo: Path = REPO, figures: list[dict] | None = None) -> tuple[list[str], set[str]]:
    """The numbers of the documents that docs/figures.toml does not list ("FILE:LINE: NUMBER: the line"), and the
    numbers the documents use."""
    allowed = {v for f in (load_figures() if figures is None else figures) for v in f["values"]}
    found, used = [], set()
    for path in doc_paths(repo):
        text = path.read_text()
        lines = text.splitlines()
        for lineno, n in numbers(text):
            used.add(n)
            if n not in allowed:
                found.append(f"{path.relative_to(repo)}:{lineno}: {n}: {lines[lineno - 1].strip()[:140]}")
    return found, used


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, inline markup dropped, punctuation but hyphens and spaces dropped,
    spaces to hyphens."""
    text = re.sub(r"`|\*|_(?=\W|$)|(?<=\W)_", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    seen: dict[str, int] = defaultdict(int)
    out = set()
    for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", text, re.M):
        base = slug(m.group(1))
        out.add(base if not seen[base] else f"{base}-{seen[base]}")
        seen[base] += 1
    out |= set(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", text))
    return out


def broken_links(repo: Path = REPO) -> list[str]:
    found = []
    for path in doc_paths(repo):
        text = COMMENT.sub("", FENCE.sub("", path.read_text()))
        text = INLINE_CODE.sub(" ", text)
        for m in LINK.finditer(text):
            target = m.group(2)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):   # http:, https:, mailto:
                continue
            where, _, anchor = target.partition("#")
            dest = (path.parent / where).resolve() if where else path
            rel = path.relative_to(repo)
            if not dest.exists() or repo.resolve() not in (dest, *dest.parents):
                found.append(f"{rel}: [{m.group(1)}]({target}): no such file")
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                shown = dest.relative_to(repo.resolve())
                found.append(f"{rel}: [{m.group(1)}]({target}): no heading #{anchor} in {shown}")
    return found


def test_every_number_in_the_prose_is_rendered_or_cited():
    found, _ = unlisted()
    assert not found, ("numbers in the prose that are neither in a rendered block nor listed in docs/figures.toml "
                       "(render them from a committed run, or list them with their source):\n" + "\n".join(found))


def test_the_cited_figures_have_sources_and_are_used():
    figures = load_figures()
    problems = figure_problems(figures)
    _, used = unlisted(figures=figures)
    problems += [f"{v}: listed in docs/figures.toml ({f['what']}) but no document states it: drop it"
                 for f in figures for v in f["values"] if v not in used]
    values = [v for f in figures for v in f["values"]]
    problems += [f"{v}: listed twice" for v in sorted({v for v in values if values.count(v) > 1})]
    assert not problems, "\n".join(problems)


def test_relative_links_and_anchors_lead_somewhere():
    found = broken_links()
    assert not found, "\n".join(found)


def test_the_limits_of_the_reviewers_documents():
    """ARTIFACT.md is read in one sitting: at most 400 lines; README.md at most 200."""
    for name, limit in (("ARTIFACT.md", 400), ("README.md", 200)):
        n = len((REPO / name).read_text().splitlines())
        assert n <= limit, f"{name} has {n} lines; keep it to {limit}: move detail to docs/ and link it"


@pytest.fixture
def planted(tmp_path):
    """A miniature repository: one platform page with a rendered block, a cited figure, a link and an anchor."""
    (tmp_path / "docs" / "platforms").mkdir(parents=True)
    (tmp_path / "docs" / "lock.txt").write_text("torch==2.13.0\n")
    (tmp_path / "README.md").write_text("# Title\n\nSee [the CPU page](docs/platforms/cpu.md#natively).\n")
    (tmp_path / "ARTIFACT.md").write_text("# Appendix\n\n## A.1 Abstract\n\nPyTorch 2.13.0 ([up](#a1-abstract)).\n")
    (tmp_path / "docs" / "platforms" / "cpu.md").write_text(
        "# CPU\n\n## Natively\n\n<!-- rendered:t -->\ntook 12 min 16 s\n<!-- /rendered:t -->\n\n"
        "`--max-repeats 3` and 2 cores, sm_90, C1-C5, on 2026-11-27 at ResNet50.\n")
    figures = [{"values": ["2.13.0"], "what": "PyTorch on cpu", "file": "docs/lock.txt"},
               {"values": ["2026-11-27"], "what": "a date", "cite": "a calendar"}]
    return tmp_path, figures


def test_the_checks_catch_a_stale_number_and_a_broken_link(planted):
    repo, figures = planted
    assert unlisted(repo, figures)[0] == [] and broken_links(repo) == [] and figure_problems(figures, repo) == []
    page = repo / "docs" / "platforms" / "cpu.md"
    page.write_text(page.read_text() + "\nThe quick run takes 14 minutes; see [why](../methodology/why.md).\n")
    (repo / "README.md").write_text((repo / "README.md").read_text().replace("#natively", "#natively-now"))
    found, _ = unlisted(repo, figures)
    assert found == ["docs/platforms/cpu.md:11: 14: The quick run takes 14 minutes; see [why](../methodology/why.md)."]
    assert sorted(broken_links(repo)) == [
        "README.md: [the CPU page](docs/platforms/cpu.md#natively-now): no heading #natively-now in "
        "docs/platforms/cpu.md",
        "docs/platforms/cpu.md: [why](../methodology/why.md): no such file"]
    (repo / "docs" / "lock.txt").write_text("torch==2.14.0\n")
    assert figure_problems(figures, repo) == ["2.13.0: not in docs/lock.txt any more (PyTorch on cpu)"]


def test_headings_slug_as_github_does():
    assert slug("A.5b On a booked GPU or NPU host (the accelerator profile)") == \
        "a5b-on-a-booked-gpu-or-npu-host-the-accelerator-profile"
    assert slug("torch_npu <-> PyTorch <-> CANN") == "torch_npu---pytorch---cann"
    assert slug("First run on an H100: PTX JIT") == "first-run-on-an-h100-ptx-jit"
