"""The HTML report: self-contained pages with the finding first and tables (ours beside the paper's) and
inline SVG figures, an index built from the studies' records, figures as files on request, no report
replaced by a smaller one, committed pages that link only to committed files; loaded at 1,280 and 1,920 px
in headless Chromium (Debian's
``chromium``, which .ci/run installs; skipped, with the reason, where /usr/bin/chromium is absent), with
screenshots kept (in STATETRACK_SCREENSHOTS when set). Also the plots' fixed defects."""

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

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
WIDE = (
    STUDY.replace("name: tiny", "name: wide")
    .replace("title: tiny study", "title: a wide table")
    .replace(
        '{extrapolation: "extrap."}', '{extrapolation: "extrapolation (8-30)", validation: "validation"}'
    )
    .replace("compare: {extrapolation: [8, 30]}", "compare: {extrapolation: [8, 30], validation: validation}")
    .replace("published: {extrapolation: 1.0}", "published: {extrapolation: 1.0, validation: 1.0}")
    .replace(
        "test_lengths: [8, 30]", "test_lengths: [8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36]"
    )
)

CHECK = """<script>
window.addEventListener("load", () => {
  const shown = e => e.offsetParent !== null;
  const svgs = [...document.querySelectorAll("figure svg")].map(s => s.getBoundingClientRect())
    .map(r => [r.width, r.height]);
  const tables = [...document.querySelectorAll("table")].filter(shown)
    .map(t => [t.rows.length, t.getBoundingClientRect().height]);
  const scrolled = [...document.querySelectorAll("table")].filter(shown).filter(t => {
    const box = t.parentElement; return box.scrollWidth > box.clientWidth + 1
      || t.getBoundingClientRect().right > document.documentElement.clientWidth + 1; }).length;
  const parts = [...document.querySelectorAll("p.part")].filter(shown).length;
  const images = [...document.querySelectorAll("img")].map(i => [i.complete && i.naturalWidth > 0, i.src,
                                                                 i.getBoundingClientRect().width]);
  const finding = document.querySelector("section.finding");
  const top = finding ? finding.getBoundingClientRect().bottom : 0;
  const page = document.documentElement.scrollWidth > document.documentElement.clientWidth;
  const here = location.href.split("#")[0];
  const links = [...document.querySelectorAll("a[href]")].map(a => [a.href,
    a.href.split("#")[0] !== here || !a.hash || document.getElementById(decodeURIComponent(a.hash.slice(1))) !== null]);
  document.body.setAttribute("data-check", JSON.stringify({svgs, tables, scrolled, parts, images, page, top,
                                                            links, width: window.innerWidth}));
});
</script></body>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("html")
    (d / "tiny.yaml").write_text(STUDY)
    (d / "wide.yaml").write_text(WIDE)
    db, out = str(d / "runs.db"), d / "reports"
    assert main(["reproduce", str(d / "tiny.yaml"), "--db", db, "--workers", "1", "--out", "", "--json"]) == 0
    assert (
        main(
            ["report", str(d / "tiny.yaml"), "--db", db, "--out", str(out), "--html", "--figures", "svg,pdf"]
        )
        == 0
    )
    # the wide study: only the RNN row is run, so its page is a partial report
    assert (
        main(
            [
                "reproduce",
                str(d / "wide.yaml"),
                "--db",
                db,
                "--workers",
                "1",
                "--out",
                "",
                "--json",
                "--model",
                "RNN",
            ]
        )
        == 0
    )
    assert (
        main(["report", str(d / "wide.yaml"), "--db", db, "--out", str(out), "--html", "--figures", ""]) == 0
    )
    return out


def test_page_and_index(report):
    page = (report / "tiny.html").read_text()
    # the finding first, then the study table, its learning table and every run's intervals; figures:
    # accuracy vs length, learning curves
    assert page.index('<section class="finding">') < page.index("<table")
    assert "What this study found" in page and "cells with a published number agree" in page
    assert page.count("<table>") == 3 and page.count("<svg") == 2 and "95% intervals" in page
    assert "<td>RNN</td>" in page and "<td>Negative Mamba (trained on lengths 1-40)</td>" in page
    # ours beside the paper's under the published column's name
    assert '<th colspan="2" class="group">extrap.</th>' in page
    assert '<th>ours</th><th class="paper">paper</th>' in page
    assert '<td class="differs"' in page  # RNN is far from the paper's 100% on this tiny budget
    assert "Notes &lt;with&gt; markup-like text &amp; an ampersand." in page
    assert "<dt>Command</dt><dd><code>statetrack report " in page and "<dt>Runs ran on</dt>" in page
    assert "<figcaption>Accuracy of each model on parity against the test length" in page
    assert 'class="status' not in page  # complete: no warning
    # intervals that change no reading are shown on hover and with the toggle, not in the cell
    assert (
        'id="ci-all"' in page
        and 'title="95% interval' in page
        and re.search(r'<small( class="more")?>\(', page)
    )
    # self-contained: nothing is fetched (the SVG namespaces are names, not requests)
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page) and "<link" not in page
    assert not re.search(r"url\((?!#)", page)
    assert sorted(p.name for p in (report / "tiny").iterdir()) == [
        "curves-main-parity.pdf",
        "curves-main-parity.svg",
        "length-main-parity.pdf",
        "length-main-parity.svg",
        "thumbnail.png",
    ]
    md = (report / "tiny.md").read_text()
    assert "![length-main-parity](tiny/length-main-parity.svg)" in md
    assert md.index("## What this study found") < md.index("| model |")


def test_index_is_built_from_the_records(report):
    records = json.loads((report / "index.json").read_text())
    assert sorted(records) == ["tiny", "wide"]
    tiny, wide = records["tiny"], records["wide"]
    assert (tiny["runs"], tiny["complete"], tiny["missing"], tiny["seeds"]) == (4, 4, 0, 2)
    assert (wide["runs"], wide["complete"], wide["missing"]) == (4, 2, 2)
    assert tiny["cells_compared"] == 1 and 0 <= tiny["cells_agree"] <= 1 and tiny["devices"] == ["cpu"]
    assert tiny["run_time_s"] > 0 and tiny["thumbnail"] == "tiny/thumbnail.png"
    assert (tiny["page"], tiny["markdown"]) == ("tiny.html", "tiny.md") and "agree" in tiny["finding"]
    index = (report / "index.html").read_text()
    assert '<h2><a href="tiny.html">tiny</a></h2><p>tiny study</p>' in index
    assert "2 of 4 complete, <strong>2 missing</strong>" in index and 'src="wide/thumbnail.png"' in index
    from statetrack.report.html import write_index

    # the index is the records' rendering, and links only files that are there: a page renamed on disk
    # is not linked (its markdown is)
    (report / "tiny.html").rename(report / "renamed.html")
    try:
        text = write_index(report).read_text()
        assert 'href="tiny.html"' not in text and '<h2><a href="tiny.md">tiny</a></h2>' in text
    finally:
        (report / "renamed.html").rename(report / "tiny.html")
    assert write_index(report).read_text() == index


def test_partial_and_wide_tables(report):
    page = (report / "wide.html").read_text()
    assert '<p class="status partial">Partial report: 2 of 4 runs of this grid are complete' in page
    # too wide for 1,280 px: drawn whole for wide windows, and split for narrow ones, each form chosen by a
    # media query; the model column repeated, ours and the paper's kept side by side in one part
    need = int(re.search(r"@media \(min-width: (\d+)px\) \{ div\.folded\.t0", page)[1])
    assert 1280 < need <= 1920, need
    whole = page[page.index('<div class="whole t0">') : page.index('<div class="folded t0">')]
    assert "part 1 of" not in whole and whole.count("<table") == 1
    folded = page[page.index('<div class="folded t0">') :]
    parts = int(re.search(r"part 1 of (\d+)", folded)[1])
    assert parts >= 2
    for k in range(1, parts + 1):
        part = folded[folded.index(f"part {k} of {parts}") :]
        part = part[: part.index("</table>")]
        assert "<td>RNN</td>" in part
        for group in ("extrapolation (8-30)", "validation"):  # a pair is never split
            assert (f'colspan="2" class="group">{group}<' in part) or (f">{group}<" not in part)


def test_committed_pages_link_only_to_committed_files():
    """Every link and image of an HTML page in the repository names a file of the repository."""
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip("not a git checkout")
    tracked = set(p.stdout.splitlines())
    pages = [f for f in tracked if f.endswith(".html")]
    assert pages, "no committed HTML page to check"
    for f in pages:
        text = (root / f).read_text()
        for target in re.findall(r"""(?:href|src)=["']([^"'#]+)""", text):
            assert not re.match(r"[a-z]+:", target), (f, target)  # no web address, no data: or file: URL
            resolved = os.path.normpath(os.path.join(os.path.dirname(f), target))
            assert resolved in tracked, f"{f} links {target}, which is not committed"


def test_a_smaller_report_is_not_written_over_a_larger_one(report, tmp_path, capsys):
    """One seed where two were reported: refused in one line, nothing changed; --force replaces it. The API
    refuses in the same words."""
    d = report.parent
    before = {p.name: p.read_bytes() for p in report.iterdir() if p.is_file()}
    code = main(
        [
            "report",
            str(d / "tiny.yaml"),
            "--db",
            str(d / "runs.db"),
            "--out",
            str(report),
            "--html",
            "--seeds",
            "1",
            "--figures",
            "",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (out, err)
    assert "not replacing the report of tiny" in err and "2 seeds per cell" in err and "--force" in err
    assert {p.name: p.read_bytes() for p in report.iterdir() if p.is_file()} == before
    # reproduce refuses before its sweep: no run trained
    from statetrack.runs.store import Store

    runs = len(Store(str(d / "runs.db")).runs())
    assert (
        main(
            [
                "reproduce",
                str(d / "tiny.yaml"),
                "--db",
                str(d / "runs.db"),
                "--out",
                str(report),
                "--seeds",
                "1",
                "--scale",
                "quick",
                "--workers",
                "1",
                "--fresh",
            ]
        )
        == 2
    )
    assert "not replacing the report of tiny" in capsys.readouterr().err
    assert len(Store(str(d / "runs.db")).runs()) == runs
    from statetrack.experiments import load_study
    from statetrack.report.collect import collect
    from statetrack.report.folder import ReportExists
    from statetrack.report.html import write_html
    from statetrack.report.writer import write_report

    rep = collect(load_study(str(d / "tiny.yaml")), str(d / "runs.db"), seeds=1)
    for write in (lambda: write_report(rep, report, figures=()), lambda: write_html(rep, report)):
        with pytest.raises(ReportExists, match="fewer seeds per cell"):
            write()
    # elsewhere, or forced: written
    assert (
        main(
            [
                "report",
                str(d / "tiny.yaml"),
                "--db",
                str(d / "runs.db"),
                "--out",
                str(tmp_path / "one"),
                "--seeds",
                "1",
                "--figures",
                "",
            ]
        )
        == 0
    )
    assert (tmp_path / "one" / "tiny.md").is_file()
    assert not (tmp_path / "one" / "tiny").exists()  # --figures '': no figures, and no empty folder for them
    forced = tmp_path / "forced"
    import shutil

    shutil.copytree(report, forced)
    assert (
        main(
            [
                "report",
                str(d / "tiny.yaml"),
                "--db",
                str(d / "runs.db"),
                "--out",
                str(forced),
                "--html",
                "--seeds",
                "1",
                "--figures",
                "",
                "--force",
            ]
        )
        == 0
    )
    assert json.loads((forced / "index.json").read_text())["tiny"]["seeds"] == 1


def test_an_unwritable_out_prints_nothing_first(report, capsys):
    """A report whose folder cannot be written ends with one line, with no table printed before it."""
    d = report.parent
    assert main(["report", str(d / "tiny.yaml"), "--db", str(d / "runs.db"), "--out", "/proc/nope"]) == 2
    out, err = capsys.readouterr()
    assert (
        out == ""
        and err.startswith("error: cannot write the report in '/proc/nope'")
        and err.count("\n") == 1
    )


def test_replacement_rules_and_reports_written_before_records(tmp_path):
    from statetrack.report.folder import Extent, ReportExists, check_replace, existing, smaller

    old = Extent("quick", 2, 12)
    assert smaller(old, Extent("quick", 2, 12)) == "" and smaller(old, Extent("quick", 3, 18)) == ""
    assert "another scale" in smaller(old, Extent("paper", 3, 30))
    assert "fewer seeds" in smaller(old, Extent("quick", 1, 6))
    assert "fewer complete runs" in smaller(old, Extent("quick", 2, 11))
    # a folder written before index.json: the markdown's line and the CSV's seeds say what it holds
    (tmp_path / "s.md").write_text(
        "# s\n\nRuns of the grid: 12; complete: 12; missing: 0\n\nStudy `s` (scale `quick`).\n"
    )
    (tmp_path / "s.csv").write_text("study,model,seeds\ns,RNN,2\ns,S4D,2\n")
    assert existing(tmp_path, "s") == Extent("quick", 2, 12)
    with pytest.raises(ReportExists, match="it holds 12 complete runs, 2 seeds per cell, scale quick"):
        check_replace(tmp_path, "s", Extent("quick", 1, 6))
    check_replace(tmp_path, "s", Extent("quick", 1, 6), force=True)
    check_replace(tmp_path, "other", Extent("quick", 1, 6))  # nothing there


def test_empty_report_says_so():
    from statetrack.report.collect import Report
    from statetrack.report.html import status_html

    class Study:
        name = "s"

    rep = Report(Study(), "quick", [], [(None, None)] * 3)
    assert "Empty report: none of the 3 runs" in status_html(rep)


def test_figure_legends_stay_clear_of_the_data(report):
    """Every legend of the length and curve figures lies outside the plotting area."""
    from statetrack.experiments import load_study
    from statetrack.report.collect import collect
    from statetrack.report.plots import close
    from statetrack.report.writer import report_figures

    rep = collect(load_study(str(report.parent / "tiny.yaml")), str(report.parent / "runs.db"))
    figs = list(report_figures(rep))
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


def test_a_report_holds_one_figure_open_at_a_time(report):
    """Each figure is drawn when the one before it is saved and closed: however many the report has, one
    is open at a time, and none is left open after."""
    import matplotlib.pyplot as plt

    from statetrack.experiments import load_study
    from statetrack.report.collect import collect
    from statetrack.report.writer import drawn_figures

    rep = collect(load_study(str(report.parent / "tiny.yaml")), str(report.parent / "runs.db"))
    before = set(plt.get_fignums())
    open_at_use = []
    figs = drawn_figures(rep, lambda f: open_at_use.append(len(set(plt.get_fignums()) - before)))
    assert [f.stem for f in figs] == ["length-main-parity", "curves-main-parity"]
    assert open_at_use == [1, 1]
    assert set(plt.get_fignums()) == before


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def chromium():
    if not os.path.exists(CHROMIUM):
        pytest.skip(
            f"{CHROMIUM} is absent (.ci/run installs the Debian packages chromium and chromium-driver)"
        )
    return CHROMIUM


def _run_chromium(chromium, tmp_path, *args):
    cmd = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        *args,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def _shots_dir(tmp_path) -> Path:
    keep = os.environ.get("STATETRACK_SCREENSHOTS")
    d = Path(keep) if keep else tmp_path / "screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.mark.parametrize("width", [1280, 1920])
@pytest.mark.parametrize("name", ["index", "tiny", "wide"])
def test_pages_in_chromium(report, chromium, tmp_path, name, width):
    """At 1,280 and 1,920 px: no table nor the page scrolls sideways, the finding is above the fold, every
    image loads (the index's thumbnails at a readable size); the wide table folds at 1,280 px only."""
    probe = report / f"probe-{name}.html"  # the page, with a script that measures what Chromium laid out
    probe.write_text((report / f"{name}.html").read_text().replace("</body>", CHECK))
    try:
        dom = _run_chromium(
            chromium,
            tmp_path,
            f"--window-size={width},1000",
            "--virtual-time-budget=5000",
            "--dump-dom",
            probe.as_uri(),
        )
    finally:
        probe.unlink()
    check = json.loads(re.search(r'data-check="([^"]*)"', dom)[1].replace("&quot;", '"'))
    assert check["width"] == width, check
    assert check["scrolled"] == 0 and not check["page"], check  # no table, nor the page, scrolls sideways
    assert all(ok for ok, _, _ in check["images"]), check["images"]  # every image loads
    for href, anchored in check[
        "links"
    ]:  # every link as Chromium resolved it: a file there, an anchor on the page
        assert href.startswith("file://"), href
        target = Path(url2pathname(urlsplit(href).path))
        if target.name.startswith("probe-"):
            target = target.with_name(target.name.removeprefix("probe-"))
        assert target.is_file() and anchored, href
    if name == "index":
        assert {Path(urlsplit(h).path).name for h, _ in check["links"]} >= {"tiny.html", "wide.html"}, check
    if name == "index":
        assert len(check["images"]) == 2, check
        assert all(w >= 400 for _, _, w in check["images"]), check  # thumbnails large enough to read
    else:
        assert 0 < check["top"] < 1000, check  # the finding is seen without scrolling
        assert len(check["svgs"]) == 2, check  # accuracy against length, learning curves
        assert all(w > 200 and h > 100 for w, h in check["svgs"]), check
    if name == "tiny":
        assert check["tables"][0][0] == 4 and check["tables"][0][1] > 40, check  # 2 header rows + 2 models
    if name == "wide":
        assert (check["parts"] > 0) == (width == 1280), check  # folded at 1,280 px, whole at 1,920
    shot = _shots_dir(tmp_path) / f"{name}-{width}.png"
    _run_chromium(
        chromium,
        tmp_path,
        f"--screenshot={shot}",
        f"--window-size={width},1600",
        (report / f"{name}.html").as_uri(),
    )
    from matplotlib.image import imread

    img = imread(shot)[..., :3]
    assert img.shape[1] == width
    ink = (img < 0.9).any(-1).mean()
    assert 0.005 < ink < 0.6, ink  # text, tables and figures drawn; not a blank or black page


#: one Negative Mamba layer's spectrum, as analysis.spectrum gives it
NEGMAMBA_LAYER = {
    "layer": 1,
    "mixer": "negmamba",
    "min_real": -0.9,
    "sample_tokens": [0, 1, 0, 1],
    "samples": np.array([[0.5 + 0j], [-0.9 + 0j], [0.4 + 0j], [-0.8 + 0j]]),
    "per_token": {"0": [[0.5, 0.0]], "1": [[-0.9, 0.0]]},
}


def test_spectrum_and_curve_figures():
    from statetrack.report.plots import close, spectrum_figure

    layer = NEGMAMBA_LAYER
    fig = spectrum_figure({"layers": [layer], "layers_spec": "negmamba", "task": "parity"})
    ax = fig.axes[0]
    assert ax.get_xlabel() == "Re λ" and ax.get_ylabel() == "Im λ"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "single-token A(x)" in labels and "token 0" in labels and "unit circle" in labels
    close(fig)


def test_a_spectrum_of_many_eigenvalues_stays_small_inline():
    """The HTML page inlines each evidence spectrum as SVG: each panel's points are one raster image, not a path
    per eigenvalue (a 2-layer model's samples made 78 MB of SVG per figure)."""
    from statetrack.report.plots import close, spectrum_figure, svg_text

    rng = np.random.default_rng(0)
    n = 20_000
    layer = {
        "layer": 1,
        "mixer": "aussm",
        "min_real": -1.0,
        "sample_tokens": rng.integers(0, 6, n).tolist(),
        "samples": np.exp(1j * rng.uniform(0, 2 * np.pi, (n, 1))),
        "per_token": {str(t): rng.uniform(-1, 1, (500, 2)).tolist() for t in range(6)},
    }
    fig = spectrum_figure({"layers": [layer, {**layer, "layer": 2}], "layers_spec": "aussm*2", "task": "C6"})
    try:
        svg = svg_text(fig)
    finally:
        close(fig)
    assert svg.count("<image") == 2 and len(svg) < 500_000, (svg.count("<image"), len(svg))  # one per panel


def test_a_range_with_negative_bounds_reads_as_one():
    """Scaled accuracy below chance is negative: its seeds' range reads '[-0.022 to -0.020]', never
    '[-0.022--0.020]'; a range of non-negative values keeps its dash."""
    from types import SimpleNamespace

    from statetrack.report.render import fmt_cell
    from statetrack.report.selection import TableCell

    study = SimpleNamespace(score=SimpleNamespace(kind="mean"), metric="scaled_accuracy")
    below = fmt_cell(TableCell(selected=-0.020, values=[-0.022, -0.021, -0.020]), study)
    assert below == "-0.020 (-0.021 [-0.022 to -0.020])", below
    assert fmt_cell(TableCell(selected=0.9, values=[0.5, 0.7, 0.9]), study) == "0.900 (0.700 [0.500-0.900])"


def test_the_finding_states_the_reports_seeds():
    """A quick scale of 1 seed reported over a sweep's 2 seeds says '2 seeds per cell' in its 'why'."""
    from types import SimpleNamespace

    from statetrack.report.finding import why

    scale = lambda steps, seeds: SimpleNamespace(  # noqa: E731
        steps=steps, seeds=seeds, test_lengths=[16, 10_000], model_train={}, task_train={}, cells_train=dict
    )
    study = SimpleNamespace(scales={"quick": scale(1500, 1), "paper": scale(3000, 3)})
    assert "(1,500 training steps, 2 seeds per cell, test lengths up to 10,000)" in why(study, "quick", 2)
    assert "1 seed per cell" in why(study, "quick") and "has 3,000 training steps, 3 seeds" in why(
        study, "quick", 2
    )
    assert why(study, "paper", 3) == ""


def test_reproduce_reruns_after_a_larger_report_reusing_or_writing_beside(tmp_path, monkeypatch, capsys):
    """The demo's command, rerun after the README's sweep and report at 2 seeds: it reuses the 2 seeds (no
    run trained, the report rewritten at its own extent); at another scale it writes beside the report
    there. Each says which; exit 0."""
    from statetrack.runs.store import Store

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "300")
    one = STUDY.replace("name: tiny", "name: one").split("  - label: Negative Mamba")[0] + (
        "scales:\n  quick: {seeds: 1, steps: 20, eval_batch: 8, test_lengths: [8, 30]}\n"
        "  other: {seeds: 1, steps: 10, eval_batch: 8, test_lengths: [8]}\n"
    )
    Path("one.yaml").write_text(one)
    common = ["--db", "runs/r.db", "--workers", "1", "--figures", ""]
    assert main(["reproduce", "one.yaml", *common]) == 0
    assert main(["sweep", "one.yaml", "--seeds", "2", "--db", "runs/r.db", "--workers", "1"]) == 0
    assert main(["report", "one.yaml", "--seeds", "2", "--db", "runs/r.db", "--figures", ""]) == 0
    runs = len(Store("runs/r.db").runs())
    capsys.readouterr()
    assert main(["reproduce", "one.yaml", *common]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "holds the report of one at 2 complete runs, 2 seeds per cell" in out and "reusing" in out
    assert len(Store("runs/r.db").runs()) == runs  # every run reused
    assert json.loads(Path("runs/reports/index.json").read_text())["one"]["seeds"] == 2
    assert main(["reproduce", "one.yaml", "--scale", "other", *common]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "writing this one beside it, in 'runs/reports-other-1seed'" in out
    assert json.loads(Path("runs/reports/index.json").read_text())["one"]["scale"] == "quick"
    assert json.loads(Path("runs/reports-other-1seed/index.json").read_text())["one"]["scale"] == "other"


def _fake_curves(models: int):
    """Panels and curves of ``models`` models, 2 learning rates x 3 seeds each, for _curves_figure."""
    from types import SimpleNamespace

    panels, curves, k = [], {}, 0
    for m in range(models):
        runs = []
        for lr in (0.01, 0.001):
            for seed in range(3):
                k += 1
                curves[k] = [{"step": s, "val_accuracy": min(1.0, s / 1500)} for s in range(0, 2001, 100)]
                runs.append(
                    (SimpleNamespace(train=SimpleNamespace(lr=lr), seed=seed), SimpleNamespace(run_id=k))
                )
        panels.append((f"Negative Mamba (trained on lengths 1-40) {m}", runs))
    return panels, curves


def test_figures_are_legible_at_1280_px():
    """Each figure of the HTML page is shown at its own width (the page's CSS no longer shares a row between
    figures, which drew the learning curves' six panels in 588x293 px), that width fits a 1,280 px window,
    and no text in it is under 10 px (an SVG point is 4/3 px at its own size). Measured on the figures
    themselves: the six-panel learning curves, a three-layer spectrum and a length figure."""
    from types import SimpleNamespace

    from statetrack.report.html import CSS
    from statetrack.report.plots import MAX_WIDTH_PX, _curves_figure, close, spectrum_figure, svg_text

    assert "figure { margin: 1.2em 0; flex: 0 1 auto; max-width: 100%; }" in CSS
    panels, curves = _fake_curves(6)
    layer = NEGMAMBA_LAYER
    figures = {
        "curves": _curves_figure(SimpleNamespace(name="khavari2025-parity"), panels, curves, "parity"),
        "spectrum": spectrum_figure(
            {
                "layers": [layer, {**layer, "layer": 2}, {**layer, "layer": 3}],
                "layers_spec": "x",
                "task": "C6",
            }
        ),
    }
    for name, fig in figures.items():
        try:
            svg = svg_text(fig)
            texts = [t for t in fig.findobj(lambda a: hasattr(a, "get_fontsize")) if t.get_text().strip()]
            smallest_px = min(t.get_fontsize() for t in texts) * 4 / 3
        finally:
            close(fig)
        w_pt, h_pt = (
            float(x) for x in re.search(r'<svg[^>]*width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups()
        )
        assert w_pt * 4 / 3 <= MAX_WIDTH_PX <= 1280 - 2 * 30 - 20, (name, w_pt)  # margins, scrollbar
        assert smallest_px >= 10, (name, smallest_px)
        if name == "curves":  # six panels: each now about a third of the figure's own 1,000 px and more
            assert w_pt * 4 / 3 > 900 and h_pt * 4 / 3 > 450, (w_pt, h_pt)
