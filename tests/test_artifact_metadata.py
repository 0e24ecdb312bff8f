"""LICENSE, CITATION.cff, .zenodo.json and the Dockerfiles' license labels say the same thing, and tools/licenses.py
reads the licenses of what an image bundles from the packages themselves."""

import json
import re
import subprocess
import sys

from tests.helpers import REPO

CITATION = (REPO / "CITATION.cff").read_text()
ZENODO = json.loads((REPO / ".zenodo.json").read_text())


def _cff(key: str) -> str:
    m = re.search(rf"^{key}: (.+)$", CITATION, re.M)
    assert m, key
    return m.group(1).strip()


def test_one_license_everywhere():
    license_text = (REPO / "LICENSE").read_text()
    assert license_text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert _cff("license") == ZENODO["license"] == "Apache-2.0"
    for dockerfile in sorted(REPO.glob("Dockerfile.*")):
        assert 'org.opencontainers.image.licenses="Apache-2.0"' in dockerfile.read_text(), dockerfile.name


def test_the_artifact_cites_the_study_in_both_files():
    doi = re.search(r"^\s+doi: (\S+)$", CITATION, re.M).group(1)
    assert [r["identifier"] for r in ZENODO["related_identifiers"] if r["relation"] == "cites"] == [doi]
    assert _cff("cff-version") == "1.2.0" and _cff("type") == "software"
    assert ZENODO["upload_type"] == "software" and ZENODO["access_right"] == "open"
    assert "Performance Evaluation of PyTorch and MindSpore Frameworks for Ascend NPU" in ZENODO["title"]


def test_licenses_tool_reads_the_installed_frameworks_metadata():
    p = subprocess.run([sys.executable, str(REPO / "tools" / "licenses.py")], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    rows = {line.split(" | ")[0].lstrip("| "): line for line in p.stdout.splitlines()[2:]}
    assert "Apache 2.0" in rows["mindspore"]
    assert rows["torch"].split(" | ")[2] not in ("", "not declared")
