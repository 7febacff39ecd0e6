"""The HTML report: self-contained pages with tables and inline SVG figures, an index, figures as files
on request; loaded in headless Chromium (Debian's ``chromium``, installed here when running as root
with apt-get; skipped, with the reason, where it cannot be had). Also the plots' fixed defects."""
import json
import os
import re
import shutil
import subprocess
import textwrap

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
      - label: Mamba
        model: {layers: "mamba(conv=0)", d_model: 4, d_state: 4}
        train_lengths: [4, 4]
    notes: "Notes <with> markup-like text & an ampersand."
    scales:
      quick: {seeds: 2, steps: 20, eval_batch: 8, test_lengths: [8, 30]}
""")

CHECK = """<script>
const svgs = [...document.querySelectorAll("figure svg")].map(s => s.getBoundingClientRect())
  .map(r => [r.width, r.height]);
const tables = [...document.querySelectorAll("table")].map(t => [t.rows.length, t.getBoundingClientRect().height]);
document.body.setAttribute("data-check", JSON.stringify({svgs, tables}));
</script></body>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    (d / "tiny.yaml").write_text(STUDY)
    db, out = str(d / "runs.db"), d / "reports"
    assert main(["reproduce", str(d / "tiny.yaml"), "--db", db, "--workers", "1", "--out", "",
                 "--json"]) == 0
    assert main(["report", str(d / "tiny.yaml"), "--db", db, "--out", str(out), "--html",
                 "--figures", "svg,pdf"]) == 0
    return out


def test_page_and_index(report):
    page = (report / "tiny.html").read_text()
    # the study table and every run's intervals; figures: accuracy vs length, learning curves
    assert page.count("<table>") == 2 and page.count("<svg") == 2 and "95% intervals" in page
    assert "<td>RNN</td>" in page and "<td>Mamba</td>" in page and '<th class="paper">paper: extrap.</th>' in page
    assert 'class="paper differs"' in page  # RNN is far from the paper's 100% on this tiny budget
    assert "Notes &lt;with&gt; markup-like text &amp; an ampersand." in page
    assert "<dt>Command</dt><dd><code>statetrack report " in page and "<dt>Runs ran on</dt>" in page
    # self-contained: nothing is fetched (the SVG namespaces are names, not requests)
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page) and "<link" not in page
    assert not re.search(r"url\((?!#)", page)
    index = (report / "index.html").read_text()
    assert '<a href="tiny.html">tiny</a>' in index and "tiny study" in index
    assert sorted(p.name for p in (report / "tiny").iterdir()) == [
        "curves-main-parity.pdf", "curves-main-parity.svg", "length-main-parity.pdf", "length-main-parity.svg"]
    assert "![length-main-parity](tiny/length-main-parity.svg)" in (report / "tiny.md").read_text()


def _chromium():
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("Chromium is not installed, and installing it needs root and apt-get (apt-get install chromium)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        for cmd in (["apt-get", "install", "-y", "-q", "chromium"], ["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "chromium"]):
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            if p.returncode == 0 and cmd[1] == "install":
                break
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"Chromium could not be installed: {e}")
    if not shutil.which("chromium"):
        last = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.skip(f"Chromium could not be installed with apt-get: {last[0]}")
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def chromium():
    return _chromium()


def _run_chromium(chromium, tmp_path, *args):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        pytest.skip(f"Chromium does not run here: {p.stderr.strip().splitlines()[-1:]}")
    return p.stdout


def test_page_renders_in_chromium(report, chromium, tmp_path):
    probe = tmp_path / "probe.html"  # the page, with a script that measures what Chromium laid out
    probe.write_text((report / "tiny.html").read_text().replace("</body>", CHECK))
    dom = _run_chromium(chromium, tmp_path, "--dump-dom", probe.as_uri())
    check = json.loads(re.search(r'data-check="([^"]*)"', dom)[1].replace("&quot;", '"'))
    assert len(check["svgs"]) == 2 and all(w > 200 and h > 100 for w, h in check["svgs"]), check
    assert check["tables"][0][0] == 3 and check["tables"][0][1] > 40, check  # header + RNN + Mamba
    shot = tmp_path / "shot.png"
    _run_chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1000,1400",
                  (report / "tiny.html").as_uri())
    from matplotlib.image import imread

    img = imread(shot)[..., :3]
    ink = (img < 0.9).any(-1).mean()
    assert 0.02 < ink < 0.6, ink  # text, table and figures drawn; not a blank or black page


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
