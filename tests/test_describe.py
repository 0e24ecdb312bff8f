"""`harness models`' describer: each framework's models in one process, one JSON line per model, and a model that
cannot be built is its own error row, not the loss of the others' sizes."""

import json

from harness.config import matrix
from harness.launch import describe


def test_a_model_that_cannot_be_built_is_an_error_row_beside_the_others(capsys):
    describe.main("pytorch", str(matrix.load().path), ["gcn", "no_such_model"])
    gcn, bad = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert gcn == {"model": "gcn", "framework": "pytorch", "parameters": 1433 * 16 + 16 * 7, "layers": 2}
    assert bad == {"model": "no_such_model", "framework": "pytorch", "parameters": None, "layers": None,
                   "error": "'no_such_model'"}


def test_a_framework_process_that_fails_names_its_error_for_every_model_it_left(monkeypatch):
    class Failed:   # each framework's process described gcn, then died
        def __init__(self, cmd, **kw):
            fw = cmd[3]
            self.returncode, self.stderr = 1, f"Traceback ...\nImportError: no {fw} here\n"
            self.stdout = json.dumps({"model": "gcn", "framework": fw, "parameters": 1, "layers": 2}) + "\n"

    monkeypatch.setattr(describe.subprocess, "run", Failed)
    m = matrix.load()
    rows = describe.describe_all(m)
    names, fws = [*m.data["models"], *m.data.get("inference", {})], m.data["axes"]["framework"]
    assert [(r["model"], r["framework"]) for r in rows] == [(n, fw) for n in names for fw in fws]
    assert rows[0] == {"model": "gcn", "framework": "pytorch", "parameters": 1, "layers": 2}
    assert all(r["error"] == f"ImportError: no {r['framework']} here" and r["parameters"] is None
               for r in rows if r["model"] != "gcn")
