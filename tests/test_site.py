"""The course site (docs/build_site.py) in headless Chromium with the network off.

Two ways this runs:
- inside `make test` (ATTNKIT_SITE unset): builds a small site from the working tree, notebook 03
  only, into a temporary folder, and checks its two pages: the index and 03 (figures, math and the
  attention explorer, a widget);
- after `make site` (ATTNKIT_SITE=site): checks the full site just built, every page, and that
  every notebook has one.

On every page: nothing asked of the network (Chromium offline, any request but for a file:, data:,
blob: or about: URL recorded), no script error, no traceback or "Loading widget" text; every output
image decoded; every widget rendered from its saved state (icon fonts included), with the note that
moving it needs the live notebook; math typeset by the bundled MathJax, each formula labelled with
its speech text and explorable by keyboard (MathJax's accessibility explorer); no serious or
critical violation of WCAG 2.1 A/AA that axe-core finds. Screenshots go to artifacts/site_*.png.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import AXE_TAGS, CHROMIUM_ARGS, axe_report, in_ci, run_axe

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
SUBSET = ["03"]  # the in-suite build: figures, math and a widget on one page
LIVE_NOTE = "moving them needs the live notebook"
MATHJAX_TEX_FONTS = "/_static/mathjax/fonts/HTML-CSS/TeX/"
WIDGET_VIEW = "script[type='application/vnd.jupyter.widget-view+json']"
# The explorer's speech engine asks for its symbol names with an XMLHttpRequest, which Chromium refuses
# a file:// page; the page then adds them from a script (docs/build_site.py: SPEECH_MAPS).
SPEECH_MAPS_XHR = "/_static/mathjax/extensions/a11y/mathmaps/en.js"
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")  # none of them leaves the machine


@pytest.fixture(scope="module")
def site(chromium, tmp_path_factory) -> Path:
    built = os.environ.get("ATTNKIT_SITE")
    if built:
        path = (ROOT / built).resolve()
        assert (path / "index.html").is_file(), f"{path}: no site there (run `make site`)"
        return path
    cached = len(list((ROOT / "build" / "site-vendor").glob("*.tgz"))) >= 3  # axe-core too
    if not cached and shutil.which("npm") is None:  # the widget renderer is fetched once with npm
        message = "npm not found: the site build and its test fetch three JavaScript packages with it once"
        if in_ci():
            pytest.fail(message + " — CI must run the site test")
        pytest.skip(message)
    out = tmp_path_factory.mktemp("site") / "site"
    start = time.monotonic()
    # One notebook at a time: under `make test` the other pytest worker has the other core.
    run = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "build_site.py"), "--out", str(out), "--jobs", "1", "--only", *SUBSET],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, f"site build failed:\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"
    print(f"site subset {SUBSET} built in {time.monotonic() - start:.0f} s")
    return out


def notebook_pages(site: Path) -> list[Path]:
    return sorted(p for p in site.glob("[0-9][0-9]_*.html"))


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_offline(browser, path: Path):
    """The page, loaded with the network off; (page, requests that left the machine, script errors)."""
    context = browser.new_context(offline=True, viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    outside, errors = [], []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(LOCAL_SCHEMES) else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # A file the page needs that the site lacks (a font, a MathJax piece) is an error too, except
    # MathJax's look for its TeX fonts: the bundled build (the classic notebook's) carries STIX-Web
    # only, and MathJax falls back to it (typesetting is checked below); and the speech engine's request
    # for its symbol names, which a file:// page may not make (SPEECH_MAPS_XHR).
    page.on(
        "requestfailed",
        lambda r: (
            errors.append(f"missing {r.url}")
            if r.url.startswith("file:") and MATHJAX_TEX_FONTS not in r.url and not r.url.endswith(SPEECH_MAPS_XHR)
            else None
        ),
    )
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, outside, errors


def assert_accessible(page, name: str) -> None:
    """axe-core's WCAG 2.0/2.1 A and AA rules on the page as rendered, explorers included: no serious or
    critical violation."""
    violations = run_axe(page)
    assert not violations, f"{name}: serious or critical violations of {AXE_TAGS} (axe-core):\n{axe_report(violations)}"


def check_math_speech(page, stem: str) -> int:
    """MathJax's accessibility explorer on every formula: labelled with its speech text in words (the symbol
    names loaded: "equals", not "="), and on the longest, Enter then the down arrow speaks a part of it in the
    live region. Returns the number of formulas."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    labelled = "() => [...document.querySelectorAll('.MathJax')].every(m => m.getAttribute('haslabel'))"
    with contextlib.suppress(PlaywrightTimeout):  # the assertions below say which formulas lack what
        page.wait_for_function(labelled, timeout=30_000)
    labels = page.locator(".MathJax").evaluate_all(
        "ms => ms.map(m => [m.getAttribute('role'), m.getAttribute('aria-label') || ''])"
    )
    assert labels and all(role == "application" for role, _ in labels), f"{stem}: formulas not explorable: {labels[:5]}"
    unspoken = [label for _, label in labels if not label.strip() or re.search(r"[^\x20-\x7e]|=", label)]
    assert not unspoken, f"{stem}: formulas whose speech text is missing or keeps symbols: {unspoken[:5]}"
    live = "() => [...document.querySelectorAll('[aria-live=assertive]')].map(e => e.textContent).join(' ')"
    shown = page.locator(".MathJax").evaluate_all("ms => ms.map(m => m.checkVisibility())")  # not in a closed <details>
    # the longest formula on show: one with parts to move down into
    longest = max((i for i in range(len(labels)) if shown[i]), key=lambda i: len(labels[i][1]))
    page.locator(".MathJax").nth(longest).focus()
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => ({live})().trim().length > 0", timeout=10_000)
    whole = page.evaluate(live)
    page.keyboard.press("ArrowDown")
    page.wait_for_function(f"whole => ({live})() !== whole", arg=whole, timeout=10_000)
    page.keyboard.press("Escape")
    return len(labels)


def test_every_notebook_has_a_page(site):
    stems = {p.stem for p in notebook_pages(site)}
    expected = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    if not os.environ.get("ATTNKIT_SITE"):
        expected = {s for s in expected if s[:2] in SUBSET}
    assert stems == expected


def test_index_links_and_pictures(site, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    page, outside, errors = open_offline(browser, site / "index.html")
    try:
        hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))")
        local = [h for h in hrefs if not re.match(r"[a-z]+:", h)]
        assert {f"{p.name}" for p in notebook_pages(site)} <= set(local), "a notebook page is not linked"
        missing = broken_links(site, site / "index.html", local)
        assert not missing, f"broken links on the index: {missing}"
        assert page.locator("table").count() >= 1, "no tour table"
        sizes = page.eval_on_selector_all("img", "imgs => imgs.map(i => [i.getAttribute('src'), i.naturalWidth])")
        assert all(width > 0 for _, width in sizes), f"pictures that did not load: {sizes}"
        assert LIVE_NOTE in page.inner_text("body")
        page.screenshot(path=ARTIFACTS / "site_index.png", full_page=True)
        assert_accessible(page, "index.html")
        assert not outside, f"the index asked the network for {outside}"
        assert not errors, errors
    finally:
        page.context.close()


# The guides' pages (docs/build_site.py GUIDES) and the file each is made from.
GUIDE_PAGES = {
    "learners": "docs/learners.md",
    "instructors": "docs/instructors.md",
    "grading": "docs/grading.md",
    "hooks": "docs/hooks.md",
    "results": "docs/RESULTS.md",
    "contributing": "CONTRIBUTING.md",
    "changelog": "CHANGELOG.md",
}


def broken_links(site: Path, page: Path, hrefs: list[str]) -> list[str]:
    """The page's links to the site that lead nowhere: a missing file, or an anchor no element has."""
    broken = []
    for href in hrefs:
        if re.match(r"[a-z]+:", href):
            continue
        path, _, anchor = href.partition("#")
        target = site / path if path else page
        if not target.is_file():
            broken.append(href)
        elif anchor and f'id="{anchor}"' not in target.read_text(encoding="utf-8"):
            broken.append(href)
    return broken


def test_guide_pages(site, browser):
    """Every guide is a page of the site, linked from the index; its links (to guides, sections,
    notebooks, pictures) all resolve on the site; it passes axe-core and asks the network for nothing."""
    index = (site / "index.html").read_text(encoding="utf-8")
    for name, source in GUIDE_PAGES.items():
        assert (ROOT / source).exists() and (site / f"{name}.html").is_file(), f"no page for {source}"
        assert f'href="{name}.html"' in index, f"the index does not link {name}.html"
        page, outside, errors = open_offline(browser, site / f"{name}.html")
        try:
            hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))")
            broken = broken_links(site, site / f"{name}.html", hrefs)
            assert not broken, f"{name}.html: broken links {broken}"
            assert_accessible(page, f"{name}.html")
            assert not outside and not errors, (outside, errors)
        finally:
            page.context.close()


def notebook_has_math(stem: str) -> bool:
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    return any(c.cell_type == "markdown" and re.search(r"\$[^$\n]+\$", c.source) for c in nb.cells)


def check_notebook_page(page, stem: str) -> dict:
    """Wait for widgets and math, then check what rendered; returns counts for the report."""
    views = page.locator(WIDGET_VIEW).count()
    if views:  # html-manager renders each view into a .widget-subarea just before its <script>
        page.wait_for_function(
            "n => document.querySelectorAll('.widget-subarea > *').length >= n", arg=views, timeout=60_000
        )
    has_math = notebook_has_math(stem)
    if has_math:
        page.wait_for_function(
            "() => document.querySelectorAll('.MathJax, .MathJax_Display').length > 0", timeout=60_000
        )
        page.wait_for_function(
            "() => !document.querySelector('.MathJax_Processing, #MathJax_Message:not([style*=none])')"
            " && window.MathJax && MathJax.Hub && MathJax.Hub.queue.running === 0"
            " && MathJax.Hub.queue.pending === 0",
            timeout=60_000,
        )
    text = page.inner_text("body")
    assert "Traceback" not in text, f"{stem}: a traceback on the page"
    assert "Loading widget" not in text, f"{stem}: a widget did not render"
    # (A printed "ValueError: ..." can be the lesson, as in 05; an uncaught error has a traceback.)
    errors = page.locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
        has_text=re.compile(r"Error|Traceback"),
    )
    assert errors.count() == 0, errors.first.inner_text()
    assert page.locator(".merror, .MathJax_Error").count() == 0, f"{stem}: MathJax could not typeset a formula"
    formulas = check_math_speech(page, stem) if has_math else 0
    images = page.locator(".jp-OutputArea-output img").evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
    assert images and all(images), f"{stem}: output images missing or not decoded: {images}"
    # every figure a cell drew says what it shows (attnkit.ui.alt_text), not nbconvert's placeholder
    alts = page.locator(".jp-RenderedImage img").evaluate_all("imgs => imgs.map(i => i.alt || '')")
    bare = [a for a in alts if len(a) < 40 or a.startswith("No description")]
    assert alts and not bare, f"{stem}: figures without a text alternative: {bare}"
    if views:
        assert LIVE_NOTE in text, f"{stem}: widgets without the note that moving them needs the live notebook"
        rendered = page.locator(".widget-subarea > .jupyter-widgets").count()
        assert rendered >= views, f"{stem}: {views} widget views, {rendered} rendered"
    return {"figures": len(images), "widget views": views, "formulas": formulas}


def test_notebook_pages(site, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    report = {}
    for path in notebook_pages(site):
        page, outside, errors = open_offline(browser, path)
        try:
            report[path.stem] = check_notebook_page(page, path.stem)
            assert_accessible(page, path.name)
            page.screenshot(path=ARTIFACTS / f"site_{path.stem}.png")
            explorer = page.locator(".attnkit-explorer")
            if explorer.count():
                figure = explorer.first.locator("img.attnkit-figure")
                assert figure.evaluate("i => i.naturalWidth") > 0, "the explorer's heatmap did not decode"
            # Each sizeable widget as the page shows it (progress bars left out).
            widgets = page.locator(".widget-subarea")
            big = [i for i in range(widgets.count()) if (widgets.nth(i).bounding_box() or {}).get("height", 0) > 150]
            for n, i in enumerate(big[:2]):
                widgets.nth(i).scroll_into_view_if_needed()
                widgets.nth(i).screenshot(path=ARTIFACTS / f"site_{path.stem}_widget{n + 1}.png")
            assert not outside, f"{path.name} asked the network for {outside}"
            assert not errors, f"{path.name}: script errors {errors}"
        finally:
            page.context.close()
    assert any(r["widget views"] for r in report.values()), "no page with a widget"
    print(report)
