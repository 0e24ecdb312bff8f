#!/usr/bin/env python3
"""The licenses of what the images bundle, read from the packages themselves (LICENSES.md).

    python tools/licenses.py                      the distributions installed in this Python (.venv: the CPU lock)
    python tools/licenses.py --wheels DIR         every wheel in DIR (e.g. wheelhouse/cuda), METADATA read from the zip
    python tools/licenses.py --debian PKG [PKG]   the License: fields of /usr/share/doc/PKG/copyright on this host
 One Markdown row per package: name, version, the license as its metadata declares it (License-Expression, else the
first line of License, else the License :: classifiers), and the license files it ships. Standard library only.
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import importlib.metadata as md
import sys
import zipfile
from email.message import Message
from pathlib import Path


def declared(meta: Message) -> str:
    """The license a package's metadata declares, in the most precise form it gives."""
    expression = meta.get("License-Expression")
    if expression:
        return str(expression)
    text = str(meta.get("License") or "").strip()
    classifiers = [str(c).split("::")[-1].strip() for c in meta.get_all("Classifier") or []
                   if str(c).startswith("License ::")]
    first = text.splitlines()[0].strip() if text else ""
    # A license's whole text pasted into License: (a copyright line, a heading rule): the classifiers name it.
    if classifiers and (not any(c.isalpha() for c in first) or len(first) > 40 or first.startswith("Copyright")):
        return "; ".join(classifiers)
    return first or "; ".join(classifiers) or "not declared"


def _files(names: list[str]) -> list[str]:
    """The license files among a dist-info's file names, each name once with how often it occurs."""
    found: dict[str, int] = {}
    for n in names:
        if ".dist-info/" in n and Path(n).name.upper().startswith(("LICEN", "COPYING", "NOTICE")) and "." in n:
            found[Path(n).name] = found.get(Path(n).name, 0) + 1
    return [name if k == 1 else f"{name} (x{k})" for name, k in found.items()]


def _row(meta: Message, files: list[str]) -> tuple[str, str, str, str]:
    return str(meta["Name"]), str(meta["Version"]), declared(meta), ", ".join(sorted(files)) or "-"


def installed() -> list[tuple[str, str, str, str]]:
    rows = []
    for dist in md.distributions():
        rows.append(_row(dist.metadata, _files([str(f) for f in dist.files or []])))
    return rows


def wheels(folder: Path) -> list[tuple[str, str, str, str]]:
    rows = []
    for wheel in sorted(folder.glob("*.whl")):
        with zipfile.ZipFile(wheel) as z:  # only the central directory and METADATA are read
            names = z.namelist()
            meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
            meta = email.parser.BytesParser(policy=email.policy.compat32).parsebytes(z.read(meta_name))
        rows.append(_row(meta, _files(names)))
    return rows


# Names in a Debian copyright file that is not machine-readable, and the license each one means.
FREE_TEXT = (("PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2", "PSF-2.0"),
             ("GCC RUNTIME LIBRARY EXCEPTION", "GPL-3.0+ WITH GCC-exception-3.1 (its runtime libraries)"),
             ("GNU Lesser General Public License", "LGPL"), ("GNU General Public License", "GPL"))


def debian(packages: list[str]) -> list[tuple[str, str, str, str]]:
    rows = []
    for pkg in packages:
        path = Path("/usr/share/doc") / pkg / "copyright"
        if not path.is_file():
            rows.append((pkg, "-", f"no {path} on this host", "-"))
            continue
        text = path.read_text(errors="replace")
        if text.startswith("Format:"):  # machine-readable (DEP-5): its License: short names
            licenses = list(dict.fromkeys(line[8:].strip() for line in text.splitlines()
                                          if line.startswith("License:") and line[8:].strip()))
        else:  # free text: the licenses it names (words may wrap across lines)
            flat = " ".join(text.split())
            licenses = [name for words, name in FREE_TEXT if words in flat]
        rows.append((pkg, "-", "; ".join(licenses) or "see the file", str(path)))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--wheels", type=Path, metavar="DIR", help="read the wheels in DIR instead of this Python")
    p.add_argument("--debian", nargs="+", metavar="PKG", help="read Debian copyright files instead")
    args = p.parse_args(argv)
    if args.wheels is not None and not args.wheels.is_dir():
        print(f"error: {args.wheels} is not a folder of wheels (tools/wheelhouse.sh PLATFORM makes one)",
              file=sys.stderr)
        return 2
    rows = debian(args.debian) if args.debian else wheels(args.wheels) if args.wheels else installed()
    print("| package | version | license (as declared) | license files |")
    print("| --- | --- | --- | --- |")
    for row in sorted(rows, key=lambda r: r[0].lower()):
        print("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
