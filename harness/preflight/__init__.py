"""The preflight: `./reproduce.sh cpu|cuda|ascend --check` (`python3 -m harness.preflight PLATFORM`).
 In seconds to a minute it tells whether this host can run the artifact, as one table (check, what was found,
what is needed, verdict), then one line per failure saying what to do; exit 0 only when every row passes.
 The parts, each one job behind a plain contract:

    host.py       probes: runs the commands and reads the files (this host's, and what the expected run
                  recorded), returns their raw text and the facts (a `Host`): every fact a check reads, gathered
                  in one place; records a `Host` to a folder and loads it back (--record, --host-dir, the tests'
                  fixtures), so a recorded host is checked from its folder alone
    parse.py      pure parsers of that text: nvidia-smi, npu-smi info, docker info, podman version, version.info
    versions.py   version strings compared as NVIDIA and Ascend number them
    data.py       the minimums, from cuda.toml / ascend.toml / host.toml (every vendor fact is defined there once,
                  with its source), and the committed measurements the CPU rows quote
    checks_*.py   verdicts: the `Host`'s facts + minimums -> `Row`s (no I/O: no file, program or environment
                  variable is read; tests/test_preflight_recorded.py holds them to it)
    render.py     the table and the failure lines
    step.py       one SGD step of a tiny MLP in one framework on the device (runs in the venv or the image:
                  `python -m harness preflight-step`), and how to launch it

Everything but step.py's training code uses the standard library of Python 3.8 or newer, because the check runs
before any virtual environment exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PASS, NOTE, FAIL, SKIP = "pass", "pass (note)", "FAIL", "skipped"
# What the next step (`./reproduce.sh PLATFORM --build`) makes: not there yet on a fresh host, and no failure. The
# check exits 0 when the host is ready for that step; after the build the same check runs the training steps.
NEXT = "not built"


@dataclass
class Row:
    """One line of the table. `fix` (for FAIL) says what to do; `note` (for NOTE) what to keep in mind; a SKIP
    row could not be checked because of a failure above it and needs no line of its own; a NEXT row is what
    `--build` makes (a .venv, an image), with the training steps that need it. `last`: print this
    failure's line after all others (the line that says there is no device). `cite`: the sources printed
    under the table."""

    check: str
    found: str
    needed: str
    verdict: str
    fix: str = ""
    note: str = ""
    last: bool = False
    cite: list = field(default_factory=list)  # names of [sources.*] in the data files behind `needed`

    def ok(self) -> bool:
        return self.verdict in (PASS, NOTE, NEXT)
