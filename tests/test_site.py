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
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

from helpers import AXE_TAGS, CHROMIUM_ARGS, axe_report, in_ci, run_axe

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
SUBSET = ["03"]  # the in-suite build: figures, math and a widget on one page
LIVE_ONLY = ["04", "05"]  # ... and the live explorers of these pages, their notebooks not run (--live-only)
LIVE_ONLY_CLASS = "attnkit-live-only"  # the body class of such a page (docs/build_site.py live_page)
LIVE_NOTE = "moving them needs the live notebook"
MATHJAX_TEX_FONTS = "/_static/mathjax/fonts/HTML-CSS/TeX/"
WIDGET_VIEW = "script[type='application/vnd.jupyter.widget-view+json']"
# The explorer's speech engine asks for its symbol names with an XMLHttpRequest, which Chromium refuses
# a file:// page; the page then adds them from a script (docs/build_site.py: SPEECH_MAPS).
SPEECH_MAPS_XHR = "/_static/mathjax/extensions/a11y/mathmaps/en.js"
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")  # none of them leaves the machine
PAGE_BYTES = 5_000_000  # a page with a live explorer, at load (issue 39; benchmarks/bench_site.py measures it)


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
        [sys.executable, str(ROOT / "docs" / "build_site.py"), "--out", str(out), "--jobs", "1", "--only", *SUBSET]
        + ["--live-only", *LIVE_ONLY],
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


def open_offline(browser, path: Path, loaded: set[Path] | None = None):
    """The page, loaded with the network off; (page, requests that left the machine, script errors).
    `loaded`, when given, collects the files the page reads."""
    context = browser.new_context(offline=True, viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    outside, errors = [], []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(LOCAL_SCHEMES) else None)
    if loaded is not None:
        page.on(
            "requestfinished",
            lambda r: loaded.add(Path(url2pathname(urlparse(r.url).path))) if r.url.startswith("file:") else None,
        )
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
        expected = {s for s in expected if s[:2] in SUBSET + LIVE_ONLY}
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
        # Its renderer loads when a widget comes near the viewport (docs/build_site.py LAZY_WIDGETS): go there.
        page.locator(WIDGET_VIEW).first.evaluate("v => v.parentElement.scrollIntoView()")
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


def check_page_weight(page, loaded: set[Path], stem: str) -> float:
    """A page with a live explorer loads at most PAGE_BYTES (its explorer started, MathJax done), the frozen
    widgets' renderer not among them until a widget comes near (docs/build_site.py LAZY_WIDGETS); in MB."""
    page.wait_for_function("() => window.attnkitExplorers && Object.keys(window.attnkitExplorers).length")
    page.evaluate("() => Promise.all(Object.values(window.attnkitExplorers))")
    page.wait_for_function(
        "() => !window.MathJax || (MathJax.Hub && MathJax.Hub.queue.running === 0 && MathJax.Hub.queue.pending === 0)",
        timeout=60_000,
    )
    page.wait_for_load_state("networkidle")
    files = [f for f in set(loaded) if f.is_file()]
    assert not [f for f in files if f.name == "embed-amd.js"], f"{stem}: the widget renderer loaded with the page"
    total = sum(f.stat().st_size for f in files)
    assert total <= PAGE_BYTES, f"{stem}: {total / 1e6:.2f} MB loaded, over {PAGE_BYTES / 1e6:.0f} MB"
    return round(total / 1e6, 2)


def test_notebook_pages(site, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    report = {}
    for path in notebook_pages(site):
        if LIVE_ONLY_CLASS in path.read_text(encoding="utf-8")[:2000]:
            continue  # its explorer only: test_live_* below
        loaded: set[Path] = set()
        page, outside, errors = open_offline(browser, path, loaded)
        try:
            weight = check_page_weight(page, loaded, path.stem) if page.locator("[data-attnkit-live]").count() else None
            report[path.stem] = check_notebook_page(page, path.stem) | ({"MB at load": weight} if weight else {})
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


# ---------------------------------------------------------------- the live explorers (issue 39)
# docs/live/attnkit-live.js runs the committed models in the page; here it is held to PyTorch on the same
# checkpoints, through its own functions called in batches (page.evaluate), and the pages are used as a
# learner would: by keyboard, offline, with no script error.

LIVE_PAGES = {"adder": "03_attention_heatmaps", "ablation": "04_head_ablation",
              "sortedness": "05_positional_encoding_extrapolation"}  # fmt: skip
HEADS_OFF = ["enc.self.0.1", "enc.self.1.3", "dec.self.0.2", "dec.cross.1.0", "dec.cross.0.3"]
PATTERN_TOLERANCE = 1e-4


def live_page(browser, site: Path, kind: str):
    """The page of explorer `kind`, offline, once the explorer has started: (page, outside, errors)."""
    page, outside, errors = open_offline(browser, site / f"{LIVE_PAGES[kind]}.html")
    page.wait_for_function(f"() => window.attnkitExplorers && window.attnkitExplorers.{kind}", timeout=30_000)
    page.evaluate(f"() => window.attnkitExplorers.{kind}")  # settled
    return page, outside, errors


@pytest.fixture(scope="module")
def adder():
    import attnkit

    return attnkit.load_pretrained("adder")


def random_sums(n: int, seed: int) -> list[str]:
    """Operands of every length 1-3 digits, as the adder's own self-check draws them."""
    import numpy as np

    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 10 ** rng.integers(1, 4, size=(2, n)))
    return [f"{x}+{y}" for x, y in zip(a.tolist(), b.tolist())]


def adder_differences(page, adder, sums: list[str], pattern_sums: list[str]) -> tuple[list, float]:
    """The sums the page answers differently from PyTorch, and the largest difference of any attention
    weight (every layer, head and kind, the decoder fed its own answer as run_with_cache does)."""
    import numpy as np

    answers = page.evaluate(
        "async (sums) => { const a = await attnkitLive.adder(); return sums.map(s => a.solve(s).answer); }", sums
    )
    differ = [(s, js, py) for s, js, py in zip(sums, answers, adder.solve(sums)) if js != py]
    runs = page.evaluate(
        "async (sums) => { const a = await attnkitLive.adder(); return sums.map(s => a.run(s).patterns); }",
        pattern_sums,
    )
    _, cache = adder.run_with_cache(pattern_sums, names_filter=lambda name: name.endswith("hook_pattern"))
    worst = 0.0
    for i, patterns in enumerate(runs):
        assert len(patterns) == 6, sorted(patterns)
        for module, pattern in patterns.items():
            worst = max(worst, float(np.abs(np.array(pattern) - cache[f"{module}.hook_pattern"][i].numpy()).max()))
    return differ, worst


def test_live_adder_equals_pytorch(site, browser, adder):
    """1,000 random sums answered as PyTorch answers them; every attention weight of 20 sums within 1e-4."""
    page, outside, errors = live_page(browser, site, "adder")
    try:
        differ, worst = adder_differences(page, adder, random_sums(1000, seed=39), random_sums(20, seed=40))
        assert not differ, f"{len(differ)} of 1,000 sums answered differently in the page: {differ[:5]}"
        assert worst < PATTERN_TOLERANCE, f"attention weights differ from PyTorch's by up to {worst:.2e}"
        print(f"live adder: 1,000 answers equal; attention weights within {worst:.1e}")
        assert not outside and not errors, (outside, errors)
    finally:
        page.context.close()


def test_live_planted_difference_is_caught(site, browser, adder, tmp_path):
    """One weight changed in the export (docs/live_site.py's `plant`): the comparison above fails."""
    sys.path.insert(0, str(ROOT / "docs"))
    import live_site

    live = tmp_path / live_site.FOLDER
    live.mkdir(parents=True)
    shutil.copy(site / live_site.FOLDER / "attnkit-live.js", live)
    from dataclasses import asdict

    planted = live_site.weights_script(
        "adder", adder.model.state_dict(), asdict(adder.cfg), {}, plant="encoder.0.self_attn.W_Q.weight"
    )
    (live / "adder.js").write_text(planted)
    (tmp_path / "planted.html").write_text(
        f'<!DOCTYPE html><html lang="en"><head><title>planted</title><script src="{live_site.FOLDER}/attnkit-live.js">'
        "</script></head><body></body></html>"
    )
    page, _, _ = open_offline(browser, tmp_path / "planted.html")
    try:
        differ, worst = adder_differences(page, adder, random_sums(50, seed=41), random_sums(5, seed=42))
        assert differ or worst >= PATTERN_TOLERANCE, "a planted weight went unnoticed"
        print(f"planted weight: {len(differ)} of 50 answers differ, attention off by up to {worst:.2e}")
    finally:
        page.context.close()


def test_live_ablation_equals_pytorch(site, browser, adder):
    """With five heads off, the page's exact match over its held-out sample equals PyTorch's (zero ablation);
    the toggles work by keyboard and the result is announced."""
    import re

    page, outside, errors = live_page(browser, site, "ablation")
    try:
        sample = page.evaluate("async () => (await attnkitLive.adder()).sample")
        assert len(sample) >= 100, len(sample)
        js = page.evaluate("async (off) => (await attnkitLive.adder()).exactMatch(new Set(off))", HEADS_OFF)
        problems, totals = zip(*(line.split("=") for line in sample))
        with adder.ablate(HEADS_OFF):
            right = sum(a == t for a, t in zip(adder.solve(list(problems)), totals))
        intact = sum(a == t for a, t in zip(adder.solve(list(problems)), totals))
        assert js["right"] == right, f"exact match with {HEADS_OFF} off: page {js['right']}, PyTorch {right}"
        assert js["n"] == len(sample)
        # by keyboard: focus a head's box, Space switches it off; the exact match is announced again
        match = page.locator("output[name=exact-match]")
        page.wait_for_function(
            "() => /with 0 heads off/.test(document.querySelector('output[name=exact-match]').textContent)"
        )
        assert f"({intact} of {len(sample)})" in match.inner_text()
        box = page.get_by_role("checkbox", name="enc.self.0.1")
        box.focus()
        page.keyboard.press("Space")
        assert not box.is_checked()
        page.wait_for_function(
            "() => /with 1 heads off/.test(document.querySelector('output[name=exact-match]').textContent)",
            timeout=30_000,
        )
        with adder.ablate(["enc.self.0.1"]):
            one_off = sum(a == t for a, t in zip(adder.solve(list(problems)), totals))
        assert f"({one_off} of {len(sample)})" in match.inner_text(), match.inner_text()
        problem = page.get_by_role("textbox", name="problem", exact=True)
        problem.fill("663+497")
        problem.press("Enter")
        with adder.ablate(["enc.self.0.1"]):
            expected = adder.solve(["663+497"])[0]
        assert page.get_by_role("status", name="answer", exact=True).inner_text() == expected
        assert re.search(r"1 of 24 heads off", page.inner_text("body"))
        assert_accessible(page, "04 explorer")
        page.screenshot(path=ARTIFACTS / "site_live_04.png")
        assert not outside and not errors, (outside, errors)
    finally:
        page.context.close()


def test_live_adder_by_keyboard(site, browser):
    """Type a sum, Enter: the answer (a live region named "answer"); a typo and a too-long operand are
    answered in words; the heatmap's head is picked by keyboard and its caption names it and its links."""
    page, outside, errors = live_page(browser, site, "adder")
    try:
        explorer = page.locator(".attnkit-live")  # the notebook's own (frozen) widget has a "problem" box too
        problem = explorer.get_by_role("textbox", name="problem", exact=True)
        answer = explorer.get_by_role("status", name="answer", exact=True)
        assert answer.get_attribute("aria-live") == "polite"
        problem.fill("12+30")
        problem.press("Enter")
        assert answer.inner_text() == "42"
        for bad, words in [("12+3a", "not a sum"), ("1234+5", "more than 3 digits"), ("", "not a sum")]:
            problem.fill(bad)
            problem.press("Enter")
            assert answer.inner_text() == "—" and words in page.locator(".attnkit-live-message").first.inner_text()
        problem.fill("555+445")
        problem.press("Enter")
        assert answer.inner_text() == "1000"
        explorer.get_by_role("combobox", name="Attention").select_option("dec.cross")
        explorer.get_by_role("combobox", name="Layer").select_option("1")
        caption = explorer.locator("figcaption").inner_text()
        assert "decoder cross-attention, layer 1, head 0" in caption and "Strongest links" in caption, caption
        labels = explorer.locator("svg text").evaluate_all("ts => ts.map(t => t.textContent)")
        assert labels[:7] == list("555+445") and "<s>" in labels, labels
        assert explorer.locator("svg rect").count() == 5 * 7  # queries <s> 1 0 0 0, keys 5 5 5 + 4 4 5
        assert_accessible(page, "03 explorer")
        page.locator(".attnkit-live").first.screenshot(path=ARTIFACTS / "site_live_03.png")
        assert not outside and not errors, (outside, errors)
    finally:
        page.context.close()


def test_live_sortedness_equals_pytorch(site, browser):
    """Every encoding's verdicts on 200 sequences (sorted, one swap, shuffled, lengths 8-256) equal
    PyTorch's; bad input is answered in words; a drawn sequence is classified."""
    import numpy as np

    from attnkit.sortedness import load_classifier
    from attnkit.sortedness.data import labelled_set

    rng = np.random.default_rng(39)
    page, outside, errors = live_page(browser, site, "sortedness")
    try:
        encodings = page.locator("select[name=encoding] option").evaluate_all("os => os.map(o => o.value)")
        assert sorted(encodings) == sorted(["sinusoidal", "learned", "none", "relative", "rope", "alibi"])
        total, worst = 0, 0.0
        for i, encoding in enumerate(encodings):
            length = [8, 12, 16, 24, 32, 64][i]  # 256 costs seconds
            rows, _, _ = labelled_set(rng, 12, 12, 10, length)
            seqs = [list(map(int, r)) for r in rows]
            model = load_classifier(encoding)
            got = page.evaluate(
                "async ([e, seqs]) => { const m = await attnkitLive.sortedness(e);"
                " return seqs.map(s => { const r = m.classify(s); return [r.sorted, r.pSorted]; }); }",
                [encoding, seqs],
            )
            assert [g[0] for g in got] == model.predict(seqs), f"{encoding}: verdicts differ"
            worst = max(worst, float(np.abs(np.array([g[1] for g in got]) - model.probabilities(seqs)).max()))
            total += len(seqs)
        assert total >= 200
        print(f"live sortedness: {total} verdicts equal; P(sorted) within {worst:.1e}")
        verdict = page.locator("output[name=verdict]")
        sequence = page.get_by_role("textbox", name="Sequence")
        for bad, words in [("3 8 x", "not a whole number"), ("5 100", "not a whole number"),
                           (" ".join(["1"] * 300), "at most 256")]:  # fmt: skip
            sequence.fill(bad)
            sequence.press("Enter")
            page.wait_for_function(
                "w => document.querySelector('output[name=verdict]').textContent.includes(w)", arg=words
            )
        page.get_by_role("combobox", name="Positional encoding").select_option("alibi")
        page.get_by_role("combobox", name="Length to draw").select_option("64")
        page.get_by_role("button", name="Draw with one swap").click()
        page.wait_for_function(
            "() => /alibi encoding, 64 values/.test(document.querySelector('output[name=verdict]').textContent)"
        )
        assert len(sequence.input_value().split()) == 64 and "is not sorted" in verdict.inner_text()
        assert_accessible(page, "05 explorer")
        page.screenshot(path=ARTIFACTS / "site_live_05.png")
        assert not outside and not errors, (outside, errors)
    finally:
        page.context.close()
