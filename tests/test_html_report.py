"""The HTML report: self-contained pages with tables and inline SVG figures, an index built from the
studies' records, figures as files on request; loaded at 1,280 px in headless Chromium (Debian's
``chromium``, which .ci/run installs; skipped, with the reason, where /usr/bin/chromium is absent), with
screenshots kept (in STATETRACK_SCREENSHOTS when set). Also the plots' fixed defects."""
import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from statetrack.cli import main

STUDY = textwrap.dedent("""
    name: tiny
    title: tiny study
    source: test
    task: parity
    published_columns: {extrapolation: "extrap."}
    compare: {extrapolation: [8, 30]}
    train: {batch_size: 16, eval_every: 10, val_sequences: 32, lr: 0.01}
    models:
      - label: RNN
        model: {layers: rnn, d_model: 2, d_state: 4}
        train_lengths: [4, 6]
        published: {extrapolation: 1.0}
      - label: Negative Mamba (trained on lengths 1-40)
        model: {layers: "mamba(conv=0)", d_model: 4, d_state: 4}
        train_lengths: [4, 4]
    notes: "Notes <with> markup-like text & an ampersand."
    scales:
      quick: {seeds: 2, steps: 20, eval_batch: 8, test_lengths: [8, 30]}
""")
#: a study whose table is wider than a 1,280-pixel window: many test lengths and two paper columns
WIDE = STUDY.replace("name: tiny", "name: wide").replace("title: tiny study", "title: a wide table") \
    .replace('{extrapolation: "extrap."}', '{extrapolation: "extrapolation (8-30)", validation: "validation"}') \
    .replace("compare: {extrapolation: [8, 30]}", "compare: {extrapolation: [8, 30], validation: validation}") \
    .replace("published: {extrapolation: 1.0}", "published: {extrapolation: 1.0, validation: 1.0}") \
    .replace("test_lengths: [8, 30]", "test_lengths: [8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36]")

CHECK = """<script>
window.addEventListener("load", () => {
  const svgs = [...document.querySelectorAll("figure svg")].map(s => s.getBoundingClientRect())
    .map(r => [r.width, r.height]);
  const tables = [...document.querySelectorAll("table")].map(t => [t.rows.length, t.getBoundingClientRect().height]);
  const scrolled = [...document.querySelectorAll("table")].filter(t => {
    const box = t.parentElement; return box.scrollWidth > box.clientWidth + 1
      || t.getBoundingClientRect().right > document.documentElement.clientWidth + 1; }).length;
  const images = [...document.querySelectorAll("img")].map(i => [i.complete && i.naturalWidth > 0, i.src]);
  const page = document.documentElement.scrollWidth > document.documentElement.clientWidth;
  document.body.setAttribute("data-check", JSON.stringify({svgs, tables, scrolled, images, page,
                                                            width: window.innerWidth}));
});
</script></body>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    (d / "tiny.yaml").write_text(STUDY)
    (d / "wide.yaml").write_text(WIDE)
    db, out = str(d / "runs.db"), d / "reports"
    assert main(["reproduce", str(d / "tiny.yaml"), "--db", db, "--workers", "1", "--out", "",
                 "--json"]) == 0
    assert main(["report", str(d / "tiny.yaml"), "--db", db, "--out", str(out), "--html",
                 "--figures", "svg,pdf"]) == 0
    # the wide study: only the RNN row is run, so its page is a partial report
    assert main(["reproduce", str(d / "wide.yaml"), "--db", db, "--workers", "1", "--out", "", "--json",
                 "--model", "RNN"]) == 0
    assert main(["report", str(d / "wide.yaml"), "--db", db, "--out", str(out), "--html", "--figures", ""]) == 0
    return out


def test_page_and_index(report):
    page = (report / "tiny.html").read_text()
    # the study table, its learning table and every run's intervals; figures: accuracy vs length, learning curves
    assert page.count("<table>") == 3 and page.count("<svg") == 2 and "95% intervals" in page
    assert "<td>RNN</td>" in page and "<td>Negative Mamba (trained on lengths 1-40)</td>" in page
    assert '<th class="paper">paper: extrap.</th>' in page
    assert 'class="paper differs"' in page  # RNN is far from the paper's 100% on this tiny budget
    assert "Notes &lt;with&gt; markup-like text &amp; an ampersand." in page
    assert "<dt>Command</dt><dd><code>statetrack report " in page and "<dt>Runs ran on</dt>" in page
    assert "<figcaption>Accuracy of each model on parity against the test length" in page
    assert 'class="status' not in page  # complete: no warning
    # self-contained: nothing is fetched (the SVG namespaces are names, not requests)
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page) and "<link" not in page
    assert not re.search(r"url\((?!#)", page)
    assert sorted(p.name for p in (report / "tiny").iterdir()) == [
        "curves-main-parity.pdf", "curves-main-parity.svg", "length-main-parity.pdf", "length-main-parity.svg",
        "thumbnail.png"]
    assert "![length-main-parity](tiny/length-main-parity.svg)" in (report / "tiny.md").read_text()


def test_index_is_built_from_the_records(report):
    records = json.loads((report / "index.json").read_text())
    assert sorted(records) == ["tiny", "wide"]
    tiny, wide = records["tiny"], records["wide"]
    assert (tiny["runs"], tiny["complete"], tiny["missing"]) == (4, 4, 0)
    assert (wide["runs"], wide["complete"], wide["missing"]) == (4, 2, 2)
    assert tiny["cells_compared"] == 1 and 0 <= tiny["cells_agree"] <= 1 and tiny["devices"] == ["cpu"]
    assert tiny["run_time_s"] > 0 and tiny["thumbnail"] == "tiny/thumbnail.png"
    index = (report / "index.html").read_text()
    assert '<a href="tiny.html"><strong>tiny</strong></a><br>tiny study' in index
    assert "2 of 4 complete, <strong>2 missing</strong>" in index and 'src="wide/thumbnail.png"' in index
    # the index is the records' rendering: a page renamed on disk does not change it
    (report / "tiny.html").rename(report / "renamed.html")
    try:
        from statetrack.report.html import write_index

        assert write_index(report).read_text() == index
    finally:
        (report / "renamed.html").rename(report / "tiny.html")


def test_partial_and_wide_tables(report):
    page = (report / "wide.html").read_text()
    assert '<p class="status partial">Partial report: 2 of 4 runs of this grid are complete' in page
    # too wide for 1,280 px: split, the model column repeated, both paper columns kept whole
    parts = int(re.search(r"part 1 of (\d+)", page)[1])
    assert parts >= 2
    last = page[page.index(f"part {parts} of {parts}"):]
    last = last[:last.index("</table>")]
    assert "<td>RNN</td>" in last and "paper: extrapolation (8-30)" in last and "paper: validation" in last


def test_empty_report_says_so(tmp_path):
    from statetrack.report.html import status_html
    from statetrack.report.writer import Report

    class Study:
        name = "s"

    rep = Report(Study(), "quick", [], [(None, None)] * 3)
    assert "Empty report: none of the 3 runs" in status_html(rep)


def test_figure_legends_stay_clear_of_the_data(report):
    """Every legend of the length and curve figures lies outside the plotting area."""
    from statetrack.experiments import load_study
    from statetrack.report.plots import close
    from statetrack.report.writer import collect, report_figures

    rep = collect(load_study(str(report.parent / "tiny.yaml")), str(report.parent / "runs.db"))
    figs = report_figures(rep)
    try:
        assert [f.stem for f in figs] == ["length-main-parity", "curves-main-parity"]
        for f in figs:
            f.fig.canvas.draw()
            r = f.fig.canvas.get_renderer()
            legends = [ax.get_legend() for ax in f.fig.axes if ax.get_legend()] + list(f.fig.legends)
            assert legends, f.stem
            for leg in legends:
                box = leg.get_window_extent(r)
                for ax in f.fig.axes:
                    if ax.get_visible():
                        assert not box.overlaps(ax.get_window_extent(r)), f.stem
            assert f.caption.endswith(".") and " " in f.caption
    finally:
        for f in figs:
            close(f.fig)


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def chromium():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is absent (.ci/run installs the Debian packages chromium and chromium-driver)")
    return CHROMIUM


def _run_chromium(chromium, tmp_path, *args):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def _shots_dir(tmp_path) -> Path:
    keep = os.environ.get("STATETRACK_SCREENSHOTS")
    d = Path(keep) if keep else tmp_path / "screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.mark.parametrize("name", ["index", "tiny", "wide"])
def test_pages_at_1280_px_in_chromium(report, chromium, tmp_path, name):
    probe = report / f"probe-{name}.html"  # the page, with a script that measures what Chromium laid out
    probe.write_text((report / f"{name}.html").read_text().replace("</body>", CHECK))
    try:
        dom = _run_chromium(chromium, tmp_path, "--window-size=1280,1000", "--virtual-time-budget=5000",
                            "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    check = json.loads(re.search(r'data-check="([^"]*)"', dom)[1].replace("&quot;", '"'))
    assert check["width"] == 1280, check
    assert check["scrolled"] == 0 and not check["page"], check  # no table, nor the page, scrolls sideways
    assert all(ok for ok, _ in check["images"]), check["images"]  # every image loads
    if name == "index":
        assert len(check["images"]) == 2, check
    else:
        assert len(check["svgs"]) == 2, check  # accuracy against length, learning curves
        assert all(w > 200 and h > 100 for w, h in check["svgs"]), check
    if name == "tiny":
        assert check["tables"][0][0] == 3 and check["tables"][0][1] > 40, check  # header + 2 models
    shot = _shots_dir(tmp_path) / f"{name}-1280.png"
    _run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1280,1600",
                  (report / f"{name}.html").as_uri())
    from matplotlib.image import imread

    img = imread(shot)[..., :3]
    assert img.shape[1] == 1280
    ink = (img < 0.9).any(-1).mean()
    assert 0.005 < ink < 0.6, ink  # text, tables and figures drawn; not a blank or black page


def test_spectrum_and_curve_figures():
    from statetrack.report.plots import close, spectrum_figure

    layer = {"layer": 1, "mixer": "negmamba", "min_real": -0.9, "sample_tokens": [0, 1, 0, 1],
             "samples": np.array([[0.5 + 0j], [-0.9 + 0j], [0.4 + 0j], [-0.8 + 0j]]),
             "per_token": {"0": [[0.5, 0.0]], "1": [[-0.9, 0.0]]}}
    fig = spectrum_figure({"layers": [layer], "layers_spec": "negmamba", "task": "parity"})
    ax = fig.axes[0]
    assert ax.get_xlabel() == "Re λ" and ax.get_ylabel() == "Im λ"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "single-token A(x)" in labels and "token 0" in labels and "unit circle" in labels
    close(fig)
