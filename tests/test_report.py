"""The report from recorded results: every cell kind and status, every claim verdict, two hosts merged, escaping,
figures; and, where the tools exist (always in CI), report.tex through pdflatex and report.html in headless
Chromium with no console message and every figure drawn."""

import copy
import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest

from harness.host import platforms
from harness.report import build as report
from tests.helpers import REPO, write_run

FIXTURE = Path(__file__).parent / "fixtures" / "results_quick.json"  # a real quick-profile run on the CI machine
IN_CI = bool(os.environ.get("CI"))


def _fixture_run(tmp_path):
    run = tmp_path / "run"
    ok = {"cell": "model/gcn/pytorch/eager/amp-off/1dev", "kind": "model", "model": "gcn", "framework": "pytorch",
          "mode": "eager", "amp": "off", "devices": 1, "status": "ok", "platform": "cpu", "synthetic": False,
          "throughput_unit": "nodes/s", "first_epoch_throughput": 1000.0, "mean_throughput_other_epochs": 2000.0,
          "time_to_target_s": 1.5, "best_metric": 0.8, "test_metric": 0.81, "metric": "accuracy", "target": 0.7}
    bad = {**ok, "cell": "model/gcn/mindspore/graph/amp-off/1dev", "framework": "mindspore", "mode": "graph",
           "status": "failed", "reason": "exit code 1: RuntimeError: 100% of <script>x_y</script> & $HOME",
           "log_tail": "Traceback\n<b>boom</b> 50% {}"}
    results = [{**ok, "repeat": k, "first_epoch_throughput": first} for k, first in enumerate((1000.0, 3000.0, 2000.0))]
    results.append({**bad, "repeat": 0, "first_epoch_throughput": None})
    return write_run(run, "cpu", {"hostname": "<host>&_%", "cpu": {"model": "x", "cores": 2}}, results,
                      profile="full")


def test_repeats_are_summarised_by_median_and_range(tmp_path):
    rows = {r["cell"]: r for r in report.collect([_fixture_run(tmp_path)])["rows"]}
    first = rows["model/gcn/pytorch/eager/amp-off/1dev"]["first_epoch"]
    assert (first["median"], first["min"], first["max"], first["n"]) == (2000.0, 1000.0, 3000.0, 3)
    assert rows["model/gcn/mindspore/graph/amp-off/1dev"]["status"] == "failed"


def test_html_and_latex_escape_everything_from_a_run(tmp_path):
    run = _fixture_run(tmp_path)
    report.render([run])
    html = (run / "report" / "report.html").read_text()
    assert "<script>x_y" not in html and "&lt;script&gt;x_y&lt;/script&gt;" in html
    assert "&lt;b&gt;boom&lt;/b&gt;" in html and "&lt;host&gt;&amp;_%" in html
    tex = (run / "report" / "report.tex").read_text()
    assert r"100\% of \textless{}script\textgreater{}x\_y\textless{}/script\textgreater{} \& \$HOME" in tex
    assert "1 cell run(s) did not finish ok" in tex


def test_latex_escape_covers_every_special_character_and_non_ascii():
    assert report.latex_escape(r"a_b&c%d$e#f{g}h~i^j\k<l>m|n") == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k\textless{}l\textgreater{}m"
        r"\textbar{}n")
    assert report.latex_escape("Intel® Xeon® – café 5×, 中") == r"Intel(R) Xeon(R) -- cafe 5$\times$, ?"


# --- two hosts: the real quick run (CPU) and a smaller made-up CUDA run -------------------------------------------

def _cuda_results(quick: list[dict]) -> list[dict]:
    """The GCN cells only (so scaling and operator claims are `not measured`), with energy and device memory as
    NVML would give them, and one cell of every other status."""
    out = []
    for r in copy.deepcopy(quick):
        if r["kind"] == "model" and r["model"] == "gcn":
            r.update(platform="cuda", peak_device_memory_mb=812.0, peak_rss_mb=2100.0, mean_power_w=61.5,
                     energy_j=240.0, samples_per_joule=2708 * 50 / 240.0, telemetry_source="nvml")
            out.append(r)
    base = {"kind": "model", "model": "gru", "framework": "mindspore", "amp": "off", "devices": 1,
            "platform": "cuda", "repeat": 0}
    out.append({**base, "cell": "model/gru/mindspore/graph/amp-off/1dev", "mode": "graph", "status": "failed",
                "reason": "exit code 1: CUDA out of memory", "log_tail": "Traceback ...\nRuntimeError: OOM"})
    out.append({**base, "cell": "model/gru/mindspore/pynative/amp-off/1dev", "mode": "pynative",
                "status": "timeout", "reason": "timed out after 3600 s", "log_tail": "epoch 3 ..."})
    out.append({**base, "cell": "model/gru/mindspore/graph/amp-O3/1dev", "mode": "graph", "amp": "O3",
                "status": "skipped", "reason": "MindSpore O3 is not supported on this GPU"})
    return out


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    quick = json.loads(FIXTURE.read_text())
    root = tmp_path_factory.mktemp("report")
    cpu = write_run(root / "cpu", "cpu", {"hostname": "ci", "cpu": {"model": "Intel(R) Xeon(R)", "cores": 2},
                                           "packages": {"torch": "2.13.0+cpu", "mindspore": "2.10.0"}}, quick)
    cuda = write_run(root / "cuda", "cuda", {"hostname": "v100-box", "nvidia": {"gpus": [{"name": "Tesla V100"}],
                                                                                 "driver": "535"},
                                              "packages": {"torch": "2.7.1+cu126", "mindspore": "2.10.0"}},
                      _cuda_results(quick))
    html_path = report.render([cpu, cuda], root / "out")
    return root / "out", html_path.read_text(), report.collect([cpu, cuda])


def test_every_cell_kind_and_status_reaches_the_report(two_hosts):
    out, html, data = two_hosts
    kinds = {(r["host"], r["kind"]) for r in data["rows"]}
    assert {("cpu", "model"), ("cpu", "scaling"), ("cpu", "operator"), ("cuda", "model")} <= kinds
    assert [h["label"] for h in data["hosts"]] == ["cpu", "cuda"]
    for status, reason in (("failed", "CUDA out of memory"), ("timeout", "timed out after 3600 s")):
        assert f'status-{status}">{status}</span>' in html and reason in html
    assert "2 cell run(s) did not finish ok (1 failed, 1 timeout)" in html
    # A planned skip is one neutral line naming its rule, not a cell that did not finish.
    assert "1 run(s) skipped as planned on cuda, by the rule: MindSpore O3 is not supported on this GPU" in html
    assert 'status-skipped">skipped</span>' not in html


def _h2_ids(html: str) -> list[str]:
    return re.findall(r'<h2 id="([^"]+)"', html)


def test_the_report_leads_with_the_verdicts_and_its_contents_follow_the_page(two_hosts):
    _, html, _ = two_hosts
    nav = re.search(r"<nav>(.*?)</nav>", html, re.S).group(1)
    listed = re.findall(r'href="#([^"]+)"', nav)
    assert listed == _h2_ids(html), (listed, _h2_ids(html))
    assert listed[0] == "claims"
    assert html.index('<h2 id="claims">') < html.index('<h2 id="environment">')
    assert all(h.startswith('<h2 id="') for h in re.findall(r"<h2[^>]*>", html)), "every section has an anchor"


def test_planned_skips_are_one_line_per_rule_and_raise_no_alarm(tmp_path):
    quick = json.loads(FIXTURE.read_text())
    why = "quick profile on a CPU: mixed precision there is half precision without matrix units"
    skipped = [{**r, "cell": r["cell"].replace("amp-off", f"amp-O{k}"), "amp": f"O{k}", "status": "skipped",
                "reason": why, "repeat": rep} for r in quick if r["kind"] == "model" and r["model"] == "gcn"
               and r["amp"] == "off" and r.get("repeat", 0) == 0 for k in (2, 3) for rep in (0, 1)]
    run = write_run(tmp_path / "run", "cpu", {"hostname": "ci"}, quick + skipped)
    html = report.render([run]).read_text()
    # Said once, above the contents (the claims' collapsed lists still name each cell they could not compare, why).
    assert html.count(f"by the rule: {why}") == 1 and f"{len(skipped)} run(s) skipped as planned, by the rule" in html
    assert html.index("skipped as planned") < html.index("<nav>")
    assert 'class="banner bad"' not in html and 'id="problems"' not in html


def test_every_verdict_is_rendered_with_its_evidence(two_hosts):
    _, html, data = two_hosts
    verdicts = {c.verdict for claims in data["claims"].values() for c in claims}
    assert verdicts == {"supported", "contradicted", "mixed", "not measured"}
    for v in verdicts:
        assert f"verdict-{v.replace(' ', '-')}" in html
    # the CUDA host has no scaling cell: C5 says so rather than guessing
    c5 = next(c for c in data["claims"]["cuda"] if c.id == "C5")
    assert c5.verdict == "not measured" and c5.reason in unescape(html)


def test_table1_has_a_column_group_per_host_and_memory_and_power(two_hosts):
    _, html, data = two_hosts
    assert '<th class="group" colspan="7">cpu</th><th class="group" colspan="7">cuda</th>' in html
    gcn = next(line for line in data["table1"] if line["model"] == "gcn" and line["framework"] == "pytorch"
               and line["mode"] == "eager" and line["amp"] == "off")
    assert set(gcn["by_host"]) == {"cpu", "cuda"}
    assert gcn["by_host"]["cuda"]["peak_device_memory_mb"]["median"] == 812.0
    assert ">812<" in html and "61.5" in html


def test_each_platforms_pinned_pytorch_and_why_are_in_the_environment_table(two_hosts):
    _, html, data = two_hosts
    pinned = next(e for e in data["env_rows"] if e["what"] == "PyTorch pinned")
    assert pinned["hosts"][0].startswith("2.13.0 for cpu: its CPU build")
    assert pinned["hosts"][1].startswith("2.7.1 for cuda: PyPI's Linux x86_64 wheel of it is the CUDA 12.6 build")
    assert "this host ran" not in " ".join(pinned["hosts"])  # each ran its platform's pin
    assert "<th>PyTorch pinned</th><td>–</td><td>2.13.0 for cpu: " in html


def test_a_merged_report_says_the_hosts_ran_different_framework_versions_beside_table_1(two_hosts):
    out, html, data = two_hosts
    note = ("The hosts ran different framework versions: PyTorch 2.13.0+cpu (cpu), 2.7.1+cu126 (cuda). A difference "
            "between their columns is the hardware and the framework build together, not the hardware alone")
    assert data["version_note"].startswith(note)
    table1 = html[html.index('<h2 id="table1">'):html.index('<h2 id="ttt">')]
    assert '<div class="banner" id="version-note">' + note in table1  # beside the comparison, not elsewhere
    assert "2.13.0+cpu (cpu), 2.7.1+cu126 (cuda)" in (out / "tables" / "table1.tex").read_text()


def test_one_host_or_the_same_versions_need_no_note(tmp_path):
    env = {"hostname": "a", "packages": {"torch": "2.13.0+cpu", "mindspore": "2.10.0"}}
    one = write_run(tmp_path / "a", "cpu", env, [])
    two = write_run(tmp_path / "b", "cpu", {**env, "hostname": "b"}, [])
    assert report.version_note(report.collect([one])["hosts"]) is None
    assert report.version_note(report.collect([one, two])["hosts"]) is None
    older = write_run(tmp_path / "c", "cpu", {**env, "hostname": "c", "packages": {"torch": "2.12.0+cpu"}}, [])
    hosts = report.collect([one, older])["hosts"]
    assert report.version_note(hosts).startswith("The hosts ran different framework versions: PyTorch 2.13.0+cpu "
                                                 "(cpu (a)), 2.12.0+cpu (cpu (c)); MindSpore 2.10.0 (cpu (a)), not "
                                                 "recorded (cpu (c)).")
    pinned = next(e for e in report.environment_rows(hosts) if e["what"] == "PyTorch pinned")
    assert pinned["hosts"][1].endswith("; this host ran 2.12.0+cpu instead")


def _claims_section(html: str) -> str:
    return unescape(html[html.index('<h2 id="claims">'):html.index('<h2 id="table1">')])


def _claim_row(section: str, cid: str) -> str:
    start = section.index(f"<tr><td><strong>{cid}</strong>")
    return section[start:section.index("</tr>", start)]


def test_each_run_wide_caveat_is_said_once_and_a_claims_own_under_it(tmp_path):
    """The quick fixture on a CPU host: what holds for every claim (platform, profile, one repeat, versions) is said
    once above the claims, in report.html and report.tex; a claim's own caveat (C1's synthetic ResNet50) in its row."""
    quick = json.loads(FIXTURE.read_text())
    run = write_run(tmp_path / "run", "cpu", {"hostname": "ci", "packages": {"torch": "2.13.0+cpu"}}, quick)
    data = report.collect([run])
    run_wide, found = data["run_caveats"]["cpu"], data["claims"]["cpu"]
    assert len(found) > 5 and [x.split(":")[0].split(";")[0] for x in run_wide] == [
        "measured on cpu, not on the Ascend 910 NPUs of the paper", "quick profile", "one repeat per cell",
        "framework versions mindspore 2.10.0, torch 2.13.0+cpu"]
    report.render([run])
    html = unescape((run / "report" / "report.html").read_text())
    tex = (run / "report" / "report.tex").read_text()
    for caveat in run_wide:
        assert html.count(caveat) == 1, caveat
        assert tex.count(report.latex_escape(caveat)) == 1, caveat
        assert not any(caveat in x for c in found for x in c.caveats)
    assert html.index("For every claim on cpu:") < html.index("<strong>C1</strong>")
    own = "synthetic data for ResNet50 (cifar10): throughput is comparable, accuracy and time to target are not"
    c1 = next(c for c in found if c.id == "C1")
    assert own in c1.caveats
    assert f'<div class="caveat">{own}</div>' in _claim_row(_claims_section(html), "C1")
    with_it = [c.id for c in found if own in c.caveats]
    assert html.count(own) == len(with_it) and "O1" not in with_it  # each claim that used ResNet50, no other
    c1_tex = next(line for line in tex.splitlines() if line.startswith("C1 & "))
    assert "Caveats: " + report.latex_escape(own) in c1_tex


def test_two_hosts_have_their_run_wide_caveats_once_each(two_hosts):
    out, html, data = two_hosts
    section = _claims_section(html)
    tex = (out / "tables" / "claims.tex").read_text()
    for host in ("cpu", "cuda"):
        assert section.count(f"For every claim on {host}:") == 1
        assert section.count(f"measured on {host}, not on the Ascend 910 NPUs of the paper") == 1
        assert tex.count(f"For every claim on {host}: measured on {host}, not on the Ascend 910") == 1
    quick = next(x for x in data["run_caveats"]["cpu"] if x.startswith("quick profile"))
    assert section.count(quick) == 2 and tex.count(report.latex_escape(quick)) == 2  # once per host
    assert not any(x in c.caveats for cs in data["claims"].values() for c in cs for x in data["run_caveats"]["cpu"])


@pytest.mark.parametrize("platform", sorted(platforms.PYTORCH_PINS))
def test_the_pinned_pytorch_is_the_one_the_lock_and_the_dockerfile_pin(platform):
    version, _ = platforms.PYTORCH_PINS[platform]
    lock_in = (REPO / "requirements" / f"{platform}.in").read_text()
    assert re.search(rf"^torch=={re.escape(version)}\s", lock_in, re.M), platform
    assert f"ARG TORCH_VERSION={version}\n" in (REPO / f"Dockerfile.{platform}").read_text()


def test_time_to_target_shows_the_papers_ratios(two_hosts):
    _, html, data = two_hosts
    paper = {t["model"]: t["paper_ratio"] for t in data["time_to_target"]["cpu"]}
    assert paper["resnet50"] == pytest.approx(5.03) and paper["gcn"] == pytest.approx(1 / 1.49)
    assert ">5.03<" in html and ">0.67<" in html and ">0.47<" in html


def test_figures_are_inline_svg_and_pdf_files(two_hosts):
    out, html, _ = two_hosts
    for name in ("fig3-cpu", "fig4-cpu", "fig5-cpu", "fig3-cuda", "energy-cuda"):
        assert (out / "figures" / f"{name}.pdf").stat().st_size > 1000
        assert re.search(rf'<figure id="{name}"><svg', html), name
    assert not (out / "figures" / "fig4-cuda.pdf").exists()
    assert "cuda: not drawn: no multi-device (scaling) cell finished ok" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # self-contained: nothing fetched


def test_latex_fragments_are_booktabs_tables(two_hosts):
    out, _, _ = two_hosts
    for name in report.TABLES:
        tex = (out / "tables" / f"{name}.tex").read_text()
        assert r"\toprule" in tex and r"\bottomrule" in tex, name
    assert r"\multicolumn{6}{c}{cpu}" in (out / "tables" / "table1.tex").read_text()


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is not installed: CI installs it with tools/install_system_packages.sh")
        pytest.skip(f"{name} is not installed (tools/install_system_packages.sh installs it)")
    return path


def test_report_tex_compiles_with_pdflatex(two_hosts, tmp_path):
    pdflatex = _tool("pdflatex")
    out, _, _ = two_hosts
    shutil.copytree(out, tmp_path / "r")
    for _ in range(2):  # longtable settles its column widths on the second pass
        done = subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error", "report.tex"],
                              cwd=tmp_path / "r", capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-3000:]
    assert (tmp_path / "r" / "report.pdf").stat().st_size > 10_000
    assert "LaTeX Warning: File" not in done.stdout  # every figure PDF was found


def test_report_html_loads_in_headless_chromium_without_console_messages(two_hosts, tmp_path):
    chromium = _tool("chromium")
    out, _, _ = two_hosts
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                           "--dump-dom", (out / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "net::ERR" in line]
    assert console == []  # the page logs nothing: any line here is a script error or a fetch
    dom = done.stdout
    figures = re.findall(r'<figure id="([^"]+)"><svg.*?</svg>', dom, flags=re.S)
    assert sorted(figures) == ["energy-cuda", "fig3-cpu", "fig3-cuda", "fig4-cpu", "fig5-cpu"]
    assert all(dom.count(f'id="{f}-') > 5 for f in figures)  # each SVG drawn with its own elements


def test_each_framework_at_its_best_table_comes_from_the_run_folders_benchmark(tmp_path):
    """benchmarks/reference_gap.py --out RUN/reference_gap.json: the report shows its ratios, flags those under 0.95,
    and leaves the section out where a run folder has no such file."""
    run = _fixture_run(tmp_path)
    assert "Each framework at its best" not in report.render([run]).read_text()
    rows = [{"status": "ok", "model": "resnet50", "framework": "mindspore", "mode": "graph", "amp": "off",
             "harness": 11.2, "reference": 11.0, "ratio": 1.018, "ratios": [1.01, 1.02], "unit": "images/s"},
            {"status": "ok", "model": "gru", "framework": "pytorch", "mode": "eager", "amp": "off",
             "harness": 700.0, "reference": 800.0, "ratio": 0.875, "ratios": [0.87, 0.88], "unit": "sentence pairs/s"},
            {"status": "failed", "cell": "model/gcn/pytorch/eager/amp-off/1dev", "error": "boom"}]
    (run / "reference_gap.json").write_text(json.dumps({"measured_at": "2026-11-23T10:00:00+00:00",
                                                        "command": "benchmarks/reference_gap.py", "rows": rows}))
    html = report.render([run]).read_text()
    section = html.split('id="at-best"', 1)[1].split("<h2", 1)[0]
    assert "1.018" in section and "0.875 (under 0.95)" in section and "1.018 (under" not in section
    assert "boom" not in section


def test_at_its_best_shows_the_process_level_beside_the_in_process_one(tmp_path):
    """benchmarks/process_gap.py --out RUN/process_gap.json: a second table, labelled process level, with each row's
    batch and the allocator the harness cell got."""
    run = _fixture_run(tmp_path)
    base = {"status": "ok", "model": "resnet50", "framework": "pytorch", "mode": "eager", "amp": "off",
            "unit": "images/s"}
    (run / "reference_gap.json").write_text(json.dumps({"measured_at": "2026-11-23T10:00:00+00:00", "command": "a",
                                                        "rows": [base | {"harness": 10.0, "reference": 10.0,
                                                                         "ratio": 1.0, "ratios": [1.0]}]}))
    (run / "process_gap.json").write_text(json.dumps({"measured_at": "2026-11-24T10:00:00+00:00", "command": "b",
                                                      "rows": [base | {"batch": 128, "allocator": "jemalloc",
                                                                       "harness": 9.1, "reference": 12.0,
                                                                       "ratio": 0.758, "ratios": [0.75, 0.76]}]}))
    section = report.render([run]).read_text().split('id="at-best"', 1)[1].split("<h2", 1)[0]
    first, second = section.split("process level", 1) if "in one process" in section else ("", "")
    assert "in one process" in first and "1.000" in first and "jemalloc" not in first
    assert "<td>128</td><td>jemalloc</td>" in second and "0.758 (under 0.95)" in second
