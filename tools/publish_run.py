"""Publish a run folder into the repository (docs/runs/NAME): what a reader and `python -m harness docs` need, without
what only the host that ran it knows.

    python tools/publish_run.py SRC DEST          copy the run folder SRC to DEST (which must not exist, or be empty)
    python tools/publish_run.py --in-place DIR    scrub a run folder already in the repository

Kept: run.json, env.json, why_crosscheck.json (benchmarks/why_crosscheck.py --out), report/**, and per cell and
repeat r<k>.json (the result), r<k>.spec.json, r<k>.log and r<k>.mllog (r<k>.events.jsonl in schema-1 folders), with
their r<k>.rank<n>.* of multi-process cells. Left out (removed with --in-place): .interpreter/ (shims that exec the run
host's Python), every symlink, results moved aside by a re-run (r<k>.prev<n>.*), the children's scratch files
(r<k>.child.json) and hidden temporary files. Rewritten in the text files (.json .jsonl .log .mllog .html .tex .txt .csv
.md), every other byte kept:
    the run folder (--out, and where the specs' log paths put it)   PATH/x -> x (relative to the folder), PATH -> DIR
    the data folder (--data-dir, the specs' data folders' parent)   -> DATA
    the checkout that ran it (of the matrix path and argv[0]), and this one: PATH/x -> x (repository-relative)
    any other path under /home/USER or /root -> ~, /tmp -> TMP, /work -> WORK
and in run.json's argv (and env.json's command) the values of --out and --data-dir become DIR and DATA.
The results' numbers are never touched: every r<k>.json is compared, as JSON, with its original, all but its strings.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TEXT = {".json", ".jsonl", ".log", ".mllog", ".html", ".tex", ".txt", ".csv", ".md"}
CELL_FILE = re.compile(r"^r\d+(\.rank\d+)?(\.json|\.spec\.json|\.log|\.mllog|\.events\.jsonl)$")
RESULT = re.compile(r"^r\d+\.json$")
ARG_VALUES = {"--out": "DIR", "--data-dir": "DATA"}
LEFT = r"(?<![\w./~-])"                 # a path starts here: not inside a word, a URL or a longer path
GENERIC = [(re.compile(LEFT + r"/(?:home/[^/\s\"'<>`]+|root)(?=/|(?![\w.+-]))"), "~"),
           (re.compile(LEFT + r"/tmp(?=/|(?![\w.+-]))"), "TMP"),  # noqa: S108 - a path to rewrite, not one used
           (re.compile(LEFT + r"/work(?=/|(?![\w.+-]))"), "WORK")]
MACHINE = re.compile(LEFT + r"/(?:home|root|tmp|work)(?:/|(?![\w.+-]))")


class PublishError(Exception):
    pass


def kept(rel: Path) -> bool:
    """Whether a file of the run folder (its path relative to it) is published."""
    if any(part.startswith(".") for part in rel.parts):
        return False
    if rel.parts[0] == "cells":
        return len(rel.parts) > 1 and bool(CELL_FILE.match(rel.name))
    return rel.as_posix() in ("run.json", "env.json", "why_crosscheck.json") or rel.parts[0] == "report"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _absolute(p: Any) -> str | None:
    return p.rstrip("/") if isinstance(p, str) and p.startswith("/") and len(p.strip("/").split("/")) >= 2 else None


def roots(src: Path) -> dict[str, tuple[str, str]]:
    """Machine paths found in the run folder -> (what PATH/x becomes the prefix of, what PATH alone becomes)."""
    meta, env = _read_json(src / "run.json") or {}, _read_json(src / "env.json") or {}
    argvs = [i.get("argv") or [] for i in meta.get("invocations") or [] if isinstance(i, dict)] + [env.get("command")
                                                                                                   or []]
    outs, data, repos = set(), set(), {str(REPO)}
    for argv in argvs:
        for flag, value in zip(argv, argv[1:], strict=False):
            (outs if flag == "--out" else data if flag == "--data-dir" else set()).add(_absolute(value))
        if argv and isinstance(argv[0], str) and argv[0].endswith("/harness/__main__.py"):
            repos.add(argv[0].removesuffix("/harness/__main__.py"))
    for default in ("/harness/config/matrix.toml", "/harness/matrix.toml"):   # the default matrix, where it now is
        if isinstance(meta.get("matrix"), str) and meta["matrix"].endswith(default):   # and where older runs had it
            repos.add(meta["matrix"].removesuffix(default))
    for spec in (src / "cells").rglob("r*.spec.json") if (src / "cells").is_dir() else ():
        s = _read_json(spec) or {}
        for key in ("log", "events", "child_result"):
            if isinstance(s.get(key), str) and "/cells/" in s[key]:
                outs.add(_absolute(s[key].rsplit("/cells/", 1)[0]))
        folder = _absolute(s.get("data_folder"))
        if folder:
            data.add(_absolute(folder.rsplit("/", 1)[0]))
    found = {r: ("", ".") for r in repos if _absolute(r)}
    found |= {d: ("DATA/", "DATA") for d in data if d}
    found |= {o: ("", "DIR") for o in outs if o}
    return found


def scrubber(found: dict[str, tuple[str, str]]):
    """text -> text with every machine path rewritten (the longest known root first, then the generic ones)."""
    names = sorted(found, key=len, reverse=True)
    known = re.compile(LEFT + "(" + "|".join(map(re.escape, names)) + r")(/|(?![\w.+-]))") if names else None

    def scrub(text: str) -> str:
        if known is not None:
            text = known.sub(lambda m: found[m.group(1)][0 if m.group(2) else 1], text)
        for pattern, repl in GENERIC:
            text = pattern.sub(repl, text)
        return text
    return scrub


def _argv(argv: Any) -> Any:
    if not isinstance(argv, list):
        return argv
    return [ARG_VALUES[argv[i - 1]] if i and argv[i - 1] in ARG_VALUES else a for i, a in enumerate(argv)]


def _placeholders(path: Path) -> None:
    """run.json's argv and env.json's command: the --out and --data-dir values become DIR and DATA."""
    obj = _read_json(path)
    if not isinstance(obj, dict):
        return
    for inv in obj.get("invocations") or []:
        if isinstance(inv, dict):
            inv["argv"] = _argv(inv.get("argv"))
            if isinstance(inv.get("command"), str):   # reproduce.sh's command line, as typed
                inv["command"] = shlex.join(_argv(shlex.split(inv["command"])))
    if "command" in obj:
        obj["command"] = _argv(obj["command"])
    path.write_text(json.dumps(obj, indent=1, sort_keys=True, default=str))


def _same_but_strings(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_but_strings(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_but_strings(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def publish(src: Path, dest: Path) -> list[str]:
    """Copy (src != dest) or scrub in place (src == dest); return what was left out or removed."""
    src, dest = Path(src), Path(dest)
    if not (src / "run.json").is_file() or (src / "run.json").is_symlink():
        raise PublishError(f"{src} is not a run folder (no run.json)")
    in_place = src.resolve() == dest.resolve() if dest.exists() else False
    if not in_place and dest.exists() and any(dest.iterdir()):
        raise PublishError(f"{dest} exists and is not empty; remove it first, or scrub it with --in-place")
    scrub, dropped = scrubber(roots(src)), []
    for dirpath, dirnames, filenames in os.walk(src, topdown=True):
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path, rel = here / name, (here / name).relative_to(src)
            if path.is_symlink() or (name in filenames and not kept(rel)) or (name in dirnames and name[0] == "."):
                dropped.append(rel.as_posix() + ("/" if name in dirnames else ""))
                if name in dirnames:
                    dirnames.remove(name)
                if in_place and path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                elif in_place:
                    path.unlink()
                continue
            if name in dirnames:
                continue
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            if path.suffix in TEXT:
                data = scrub(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
            if RESULT.match(name) and rel.parts[0] == "cells":
                before, after = json.loads(path.read_bytes()), json.loads(data)
                if not _same_but_strings(before, after):
                    raise PublishError(f"{rel}: scrubbing would change more than its paths; nothing of it written")
            if data != (out.read_bytes() if out.exists() else None):
                out.write_bytes(data)
            if not in_place:
                shutil.copymode(path, out)
    for meta in ("run.json", "env.json"):
        if (dest / meta).is_file():
            _placeholders(dest / meta)
    return dropped


def leftovers(folder: Path) -> list[str]:
    """Symlinks and machine paths still in a published folder (none after publish())."""
    out = [f"{p.relative_to(folder)}: a symlink" for p in sorted(folder.rglob("*")) if p.is_symlink()]
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.suffix in TEXT:
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                if MACHINE.search(line):
                    out.append(f"{p.relative_to(folder)}:{n}: {line.strip()[:160]}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", type=Path, metavar="SRC")
    p.add_argument("dest", type=Path, metavar="DEST", nargs="?")
    p.add_argument("--in-place", action="store_true", help="scrub SRC, a folder already in the repository")
    a = p.parse_args(argv)
    if a.in_place == (a.dest is not None):
        p.error("give SRC and DEST, or --in-place DIR")
    dest = a.src if a.in_place else a.dest
    try:
        dropped = publish(a.src, dest)
    except (PublishError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    left = leftovers(dest)
    for line in left:
        print(f"error: still machine-specific: {line}", file=sys.stderr)
    print(f"{dest}: published ({'scrubbed in place' if a.in_place else f'from {a.src}'}); "
          f"{len(dropped)} left out: {', '.join(dropped) or 'nothing'}")
    return 2 if left else 0


if __name__ == "__main__":
    sys.exit(main())
