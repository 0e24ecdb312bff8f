"""harness/preflight/ascend.toml, the Ascend chips and the stack the image uses for each (with the minimum HDK
driver and the sources), against what the build really uses: Dockerfile.ascend's ARGs and base tag, the lock and
requirements/ascend.in, reproduce.sh's chip pick from `npu-smi info` and its build arguments, and the table of
docs/platforms/ascend.md. A chip whose stack differs from the others needs per-chip ARGs in all of them; these
tests say where."""

import re
import shlex
import tomllib

import pytest

from tests.helpers import NPUSMI_FIXTURES, REPO, ascend_dry_run, dockerfile_arg, lock, one_line_error

TABLE = tomllib.loads((REPO / "harness" / "preflight" / "ascend.toml").read_text())
CHIPS = TABLE["chip"]
STACK_KEYS = {"cann": "CANN_VERSION", "torch": "TORCH_VERSION", "torch_npu": "TORCH_NPU_VERSION",
              "mindspore": "MINDSPORE_VERSION"}
DOCKERFILE = (REPO / "Dockerfile.ascend").read_text()


def _in_pins() -> dict[str, str]:
    text = (REPO / "requirements" / "ascend.in").read_text()
    return {m.group(1).lower(): m.group(2) for m in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+)", text, re.M)}


def test_one_table_per_chip_the_image_accepts_with_every_key():
    dockerfile_chips = re.search(r'case "\$\{ASCEND_CHIP\}" in \\\n\s+([^)]+)\) ;;', DOCKERFILE).group(1).split("|")
    assert sorted(CHIPS) == sorted(dockerfile_chips)  # reproduce.sh builds the table's chips: the dry runs below
    for chip, row in CHIPS.items():
        for key in (*STACK_KEYS, "min_driver", "min_firmware"):
            assert isinstance(row[key], str), f"{chip}.{key}"
        assert isinstance(row["supported"], bool) and isinstance(row["note"], str), chip
        assert row["npu_smi_names"] and all(isinstance(n, str) for n in row["npu_smi_names"]), chip
        # The form `npu-smi info` prints its driver version in: 25.2.0, 25.3.rc1, 25.0.rc1.1
        assert re.fullmatch(r"\d+\.\d+\.(\d+|rc\d+)(\.\d+)?", row["min_driver"]), row["min_driver"]
        assert row["min_firmware"] == "" or re.fullmatch(r"\d+(\.\d+){2,4}", row["min_firmware"])
        assert len(row["sources"]) >= 5, chip
        for source in row["sources"]:
            what, sep, where = source.partition(" — ")
            assert sep and what.strip() and where.strip(), f"{chip}: a source is 'what — where': {source!r}"
        if row["min_firmware"] == "":
            assert any("firmware" in s and "not found" in s for s in row["sources"]), f"{chip}: say it was not found"
    names = [n for row in CHIPS.values() for n in row["npu_smi_names"]]
    assert len(names) == len(set(names)), "an npu-smi name belongs to one chip"


@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_chip_stack_is_what_the_image_installs(chip):
    row = CHIPS[chip]
    pins, in_pins = {k: v for k, (v, _) in lock("ascend.txt").items()}, _in_pins()
    for key, arg in STACK_KEYS.items():
        default = dockerfile_arg("Dockerfile.ascend", arg)
        assert row[key] == default, (
            f"ascend.toml [{chip}] {key}={row[key]} but Dockerfile.ascend ARG {arg}={default}: a per-chip "
            "stack needs per-chip ARGs in Dockerfile.ascend, passed by reproduce.sh, and a lock of its own")
    for key in ("torch", "torch_npu", "mindspore"):
        pkg = key.replace("_", "-")
        assert pins[pkg] == row[key], f"requirements/ascend.txt pins {pkg}=={pins[pkg]}, [{chip}] says {row[key]}"
        assert in_pins[pkg] == row[key], f"requirements/ascend.in pins {pkg}=={in_pins[pkg]}"
    base = dockerfile_arg("Dockerfile.ascend", "BASE_IMAGE").replace("${ASCEND_CHIP}", chip)
    assert f"cann:{row['cann']}-{chip}-" in base, base


def test_reproduce_passes_no_per_chip_stack_so_every_chip_gets_the_dockerfile_defaults(tmp_path):
    proc = ascend_dry_run(tmp_path, "910prob_info.txt")
    assert proc.returncode == 0, proc.stderr
    build = shlex.split(next(line for line in proc.stdout.splitlines() if " build -f " in line))
    build_args = sorted(build[i + 1].split("=", 1)[0] for i, a in enumerate(build) if a == "--build-arg")
    assert build_args == ["ASCEND_CHIP", "REVISION"], (
        "reproduce.sh now passes stack ARGs: make test_chip_stack_is_what_the_image_installs read them per chip")


def test_a_name_the_table_does_not_list_picks_no_chip(tmp_path):
    """reproduce.sh picks the chip from the table's names alone: a name one letter longer than a chip's first name
    gets no image, in one line."""
    text = (NPUSMI_FIXTURES / "910prob_info.txt").read_text()
    for chip, row in sorted(CHIPS.items()):
        name = f"{row['npu_smi_names'][0]}X"
        assert all(name not in other["npu_smi_names"] for other in CHIPS.values())
        (tmp_path / chip).mkdir()
        fixture = tmp_path / chip / "info.txt"
        fixture.write_text(text.replace("910ProB            ", f"{name:<19}"))
        line = one_line_error(ascend_dry_run(tmp_path / chip, str(fixture)))
        assert line.startswith(f"reproduce.sh: chip {name} (npu-smi info) has no image here"), line


@pytest.mark.parametrize("chip, name", [(c, n) for c, row in sorted(CHIPS.items()) for n in row["npu_smi_names"]])
def test_reproduce_builds_the_tables_chip_for_each_npu_smi_name(tmp_path, chip, name):
    """An 8-NPU `npu-smi info` (the 910ProB fixture's layout) with this name in every Name cell."""
    fixture = tmp_path / f"{name}_info.txt"
    text = (NPUSMI_FIXTURES / "910prob_info.txt").read_text()
    fixture.write_text(text.replace("910ProB            ", f"{name:<19}"))
    proc = ascend_dry_run(tmp_path, str(fixture))
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"# ascend chip: {chip} (npu-smi info: {name} x8); "), first
    assert f"cann:{CHIPS[chip]['cann']}-{chip}-" in first


def test_artifact_table_shows_each_chips_stack_and_driver():
    text = (REPO / "docs" / "platforms" / "ascend.md").read_text()
    start = text.index("## Ascend 910 and 910B: what each stack supports")
    section = text[start:text.index("\n## ", start + 1)]
    for chip, row in CHIPS.items():
        line = next((ln for ln in section.splitlines() if ln.startswith(f"| `{chip}`")), None)
        assert line, f"docs/platforms/ascend.md's table has no row for `{chip}`"
        for value in (row["cann"], row["torch"], row["torch_npu"], row["mindspore"], row["min_driver"]):
            assert value in line, f"`{chip}` row lacks {value}"
        assert ("yes" in line.lower()) == row["supported"], line

