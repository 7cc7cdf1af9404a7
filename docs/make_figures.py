"""The README's pictures, drawn from the committed checkpoints and results: `make figures`.

    docs/explorer.png        the attention explorer (notebook 03), rendered by headless Chromium
    docs/ablation_heatmap.png  heads × layers: the drop when one head is removed (notebook 04)
    docs/pruning_curve.png   accuracy as heads are removed together (notebook 04)
    docs/extrapolation.png   accuracy against length, by positional encoding (notebook 05)

Every picture is drawn by the package's own figure function or widget, so an improvement there
shows here after `make figures`. docs/figures.json records, for each picture, the sha256 of every
input (the data files it shows, the source files of the code that draws it, this script) and of
the PNG itself; tests/test_docs_figures.py fails when a picture is older than what it shows.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import io
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RECORD = DOCS / "figures.json"
MAX_BYTES = 200_000
DPI = 90
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

ADDER_DATA = ["data/adder.pt", "data/adder.json", "data/adder_test.txt"]

# name -> caption, data files shown, and a function giving the code that draws it (imported late:
# where the code lives is part of what the staleness test compares).
FIGURES = {
    "explorer.png": dict(
        caption="Notebook 03's attention explorer on a held-out sum: decoder cross-attention, layer 1, all "
        "four heads; the orange boxes mark the aligned digit column.",
        data=ADDER_DATA,
        code=lambda: [
            _source_of("attnkit.ui.widgets", "AttentionExplorer"),
            _module_file("attnkit.ui.plotting"),
            _module_file("attnkit.ui.attention_plot"),
        ],
    ),
    "ablation_heatmap.png": dict(
        caption="Notebook 04: the drop in exact match when one head is removed, every head of every layer, "
        "zero and mean ablation.",
        data=["data/ablation_results.json"],
        code=lambda: [_source_of("attnkit.ui.ablation_plots", "plot_drop_heatmaps")],
    ),
    "pruning_curve.png": dict(
        caption="Notebook 04: exact match as heads are removed together, least harmful first.",
        data=["data/ablation_results.json"],
        code=lambda: [_source_of("attnkit.ui.ablation_plots", "plot_pruning_curves")],
    ),
    "extrapolation.png": dict(
        caption="Notebook 05: trained on lengths 8-16, tested to 256; ALiBi keeps working on every seed, "
        "the relative bias on two of three.",
        data=["data/sortedness_results.json"],
        code=lambda: [_source_of("attnkit.ui.sortedness_plots", "plot_curves")],
    ),
}


def _module_file(module: str) -> str:
    __import__(module)
    return Path(sys.modules[module].__file__).resolve().relative_to(ROOT).as_posix()


def _source_of(module: str, name: str) -> str:
    """The file that defines module.name (it may be re-exported from elsewhere)."""
    __import__(module)
    return Path(inspect.getsourcefile(getattr(sys.modules[module], name))).resolve().relative_to(ROOT).as_posix()


def sha256(path: Path) -> str:
    """Of a data file, its bytes; of Python source, its syntax tree (comments and layout draw
    nothing: reformatting the code must not make a picture stale)."""
    data = path.read_bytes()
    if path.suffix == ".py":
        data = ast.dump(ast.parse(data)).encode()
    return hashlib.sha256(data).hexdigest()


def inputs_of(name: str) -> dict[str, str]:
    """{input file (repository-relative): its sha256} for one picture, as it stands now."""
    spec = FIGURES[name]
    files = sorted(set(spec["data"]) | set(spec["code"]()) | {"docs/make_figures.py"})
    return {f: sha256(ROOT / f) for f in files}


# ---------------------------------------------------------------- drawing


def save_png(fig, path: Path) -> None:
    """A PNG under MAX_BYTES: matplotlib's, then an adaptive 256-colour palette when too big."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    write_small_png(buf.getvalue(), path)


def write_small_png(data: bytes, path: Path) -> None:
    if len(data) > MAX_BYTES:
        from PIL import Image

        image = Image.open(io.BytesIO(data)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        out = io.BytesIO()
        image.save(out, format="PNG", optimize=True)
        data = out.getvalue()
    assert len(data) <= MAX_BYTES, f"{path.name}: {len(data)} bytes, over {MAX_BYTES}"
    path.write_bytes(data)


def draw_ablation(path_heatmap: Path, path_pruning: Path) -> None:
    from attnkit.experiments.ablation_studies import load_ablation_results
    from attnkit.ui.ablation_plots import plot_drop_heatmaps, plot_pruning_curves

    results = load_ablation_results()
    save_png(plot_drop_heatmaps(results), path_heatmap)
    save_png(plot_pruning_curves(results), path_pruning)


def draw_extrapolation(path: Path) -> None:
    import matplotlib.pyplot as plt

    from attnkit.sortedness import load_results
    from attnkit.ui.sortedness_plots import plot_curves

    fig = plot_curves(load_results()["encodings"])
    save_png(fig, path)
    plt.close(fig)


EXPLORER_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<script src="{require}"></script>
<script type="application/vnd.jupyter.widget-state+json">{state}</script>
<style>body {{ margin: 0; padding: 10px; background: white; width: 960px; font-family: sans-serif; }}</style>
</head><body>
<script type="application/vnd.jupyter.widget-view+json">{view}</script>
<script src="{widgets}"></script>
</body></html>"""


def draw_explorer(path: Path, problem: str = "663+497") -> None:
    """The explorer as a learner sees it: built in Python, its widget state embedded in a page with
    the same widget renderer as the site, screenshotted in headless Chromium with the network off."""
    from ipywidgets.embed import embed_data
    from playwright.sync_api import sync_playwright

    import attnkit
    from attnkit.ui.widgets import AttentionExplorer

    sys.path.insert(0, str(DOCS))
    from build_site import REQUIRE_URL, WIDGETS_URL, install_widget_renderer

    explorer = AttentionExplorer(attnkit.load_pretrained("adder"))
    explorer.problem.value = problem  # as if typed: the model's answer, checked
    data = embed_data(views=[explorer.widget])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        install_widget_renderer(tmp)
        page_path = tmp / "explorer.html"
        page_path.write_text(
            EXPLORER_PAGE.format(
                state=json.dumps(data["manager_state"]),
                require=REQUIRE_URL,
                view=json.dumps(data["view_specs"][0]),
                widgets=WIDGETS_URL,
            )
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_context(offline=True, viewport={"width": 980, "height": 900}).new_page()
                page.goto(page_path.as_uri())
                figure = page.locator(".attnkit-explorer img.attnkit-figure")
                figure.wait_for(timeout=60_000)
                page.wait_for_function("i => i.complete && i.naturalWidth > 0", arg=figure.element_handle())
                assert problem in page.locator(".attnkit-answer").inner_text()
                # The controls, the answer and the picture; the role table below is left out.
                box = page.locator(".attnkit-explorer").bounding_box()
                bottom = figure.bounding_box()
                clip = {
                    "x": box["x"],
                    "y": box["y"],
                    "width": box["width"],
                    "height": bottom["y"] + bottom["height"] - box["y"] + 6,
                }
                write_small_png(page.screenshot(clip=clip), path)
            finally:
                browser.close()


def main() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import matplotlib

    matplotlib.use("Agg")
    draw_explorer(DOCS / "explorer.png")
    draw_ablation(DOCS / "ablation_heatmap.png", DOCS / "pruning_curve.png")
    draw_extrapolation(DOCS / "extrapolation.png")
    record = {
        "about": "written by docs/make_figures.py (make figures); tests/test_docs_figures.py compares "
        "the inputs' hashes with the files as they are now",
        "figures": {},
    }
    for name, spec in FIGURES.items():
        png = DOCS / name
        record["figures"][name] = {
            "caption": spec["caption"],
            "bytes": png.stat().st_size,
            "png": sha256(png),
            "inputs": inputs_of(name),
        }
        print(f"{png.relative_to(ROOT)}: {png.stat().st_size / 1000:.0f} kB")
    RECORD.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
