"""The report from recorded results: escaping, failures shown with their log tails."""

import json

from harness import report


def _fixture_run(tmp_path):
    run = tmp_path / "run"
    (run / "cells").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"platform": "cpu", "profile": "full", "invocations": []}))
    (run / "env.json").write_text(json.dumps({"hostname": "<host>&_%", "cpu": {"model": "x", "cores": 2}}))
    ok = {"cell": "model/gcn/pytorch/eager/amp-off/1dev", "kind": "model", "model": "gcn", "framework": "pytorch",
          "mode": "eager", "amp": "off", "devices": 1, "status": "ok", "platform": "cpu", "synthetic": False,
          "throughput_unit": "nodes/s", "first_epoch_throughput": 1000.0, "mean_throughput_other_epochs": 2000.0,
          "time_to_target_s": 1.5, "best_metric": 0.8, "test_metric": 0.81, "metric": "accuracy", "target": 0.7}
    bad = {**ok, "cell": "model/gcn/mindspore/graph/amp-off/1dev", "framework": "mindspore", "mode": "graph",
           "status": "failed", "reason": "exit code 1: RuntimeError: 100% of <script>x_y</script> & $HOME",
           "log_tail": "Traceback\n<b>boom</b> 50% {}"}
    for r, repeats in ((ok, (1000.0, 3000.0, 2000.0)), (bad, (None,))):
        for k, first in enumerate(repeats):
            d = run / "cells" / r["cell"]
            d.mkdir(parents=True, exist_ok=True)
            (d / f"r{k}.json").write_text(json.dumps({**r, "repeat": k, "first_epoch_throughput": first}))
    return run


def test_repeats_are_summarised_by_median_and_range(tmp_path):
    rows = {r["cell"]: r for r in report.collect([_fixture_run(tmp_path)])["rows"]}
    first = rows["model/gcn/pytorch/eager/amp-off/1dev"]["first_epoch"]
    assert (first["median"], first["min"], first["max"], first["n"]) == (2000.0, 1000.0, 3000.0, 3)
    assert rows["model/gcn/mindspore/graph/amp-off/1dev"]["status"] == "failed"


def test_html_and_latex_escape_everything_from_a_run(tmp_path):
    run = _fixture_run(tmp_path)
    report.render([run])
    html = (run / "report" / "report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;x_y&lt;/script&gt;" in html
    assert "&lt;b&gt;boom&lt;/b&gt;" in html and "&lt;host&gt;&amp;_%" in html
    tex = (run / "report" / "report.tex").read_text()
    assert r"100\% of <script>x\_y</script> \& \$HOME" in tex
    assert "1 cell run(s) did not finish ok" in tex


def test_latex_escape_covers_every_special_character():
    assert report.latex_escape(r"a_b&c%d$e#f{g}h~i^j\k") == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k")
