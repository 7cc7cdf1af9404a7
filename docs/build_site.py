"""Build the course site: every notebook run top to bottom and rendered, outputs and all, to site/.

    python docs/build_site.py                              # every notebook -> site/ (`make site`)
    python docs/build_site.py --only 01 05 --out /tmp/s    # a subset (the check inside `make test`)

Tool: nbconvert + nbclient, the Jupyter project's own executor and HTML converter (JupyterLab
already depends on them; pinned in pyproject.toml): no second documentation toolchain to learn.

The notebooks run as under test: committed checkpoints, long training off, one thread per kernel,
in notebooks/ (where nbval runs them). Widget state is saved while executing (ipywidgets' embedded
widget state), so each page shows its widgets as the run left them. The site works offline, nothing
comes from a CDN: MathJax 2.7 from PyPI's `jupyter-server-mathjax` (the build the classic notebook
served); require.js and @jupyter-widgets/html-manager from the npm registry, at the versions and
sha512 hashes below, fetched once with `npm pack` into build/site-vendor/.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from attnkit.course import skip_the_iri_grammar

skip_the_iri_grammar()  # before nbformat and nbconvert: 0.9 s less here and in each forked notebook runner

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
DOCS = ROOT / "docs"
VENDOR_CACHE = ROOT / "build" / "site-vendor"

# npm package -> the registry's sha512 integrity of its tarball (`npm view PKG@VER dist.integrity`).
NPM = {
    "requirejs@2.3.7": "sha512-DouTG8T1WanGok6Qjg2SXuCMzszOo0eHeH9hDZ5Y4x8Je+9JB38HdTLT4/VA8OaUhBa0JPVHJ0pyBkM1z+pDsw==",  # noqa: E501
    "@jupyter-widgets/html-manager@1.0.15": "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",  # noqa: E501
}
# axe-core, the accessibility rules the site test runs in each page (tests/helpers.py: axe_source); not on the site.
AXE = (
    "axe-core@4.14.1",
    "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==",
)
STATIC = "_static"
MATHJAX_URL = f"{STATIC}/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
REQUIRE_URL = f"{STATIC}/require.js"
WIDGETS_URL = "@jupyter-widgets/html-manager/dist/embed-amd.js"  # where its bundle expects itself
# MathJax's configuration, set before MathJax.js loads. The bundled MathJax carries the STIX-Web fonts only
# (as the classic notebook did): say so, or it asks for TeX fonts that are not there. Its accessibility
# explorer is on (menuSettings.explorer; the menu's Accessibility item turns it off): every formula is
# labelled with its speech text (role="application"), and Enter on a focused formula explores it with
# the arrow keys, each step spoken through a live region. Its speech engine (SRE) fetches the English
# names of symbols with an XMLHttpRequest, which a page opened from file:// may not make: there the
# page adds them from a script instead (SPEECH_MAPS), before the explorer starts.
SPEECH_MAPS = "extensions/a11y/mathmaps/en.script.js"  # under _static/mathjax/, written by copy_assets
MATHJAX_CONFIG = f"""<script>window.MathJax = {{
  "HTML-CSS": {{availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null}},
  menuSettings: {{explorer: true}},
  AuthorInit: function () {{
    if (location.protocol !== "file:") return;
    MathJax.Hub.Register.StartupHook("Sre Ready", function () {{
      return MathJax.Ajax.Require("[MathJax]/{SPEECH_MAPS}");
    }});
  }}
}};</script>"""
# The code cells' highlighting: a style of `accessible-pygments` whose every colour passes WCAG AA contrast
# (4.5:1) on its background; nbconvert's default (JupyterLab's editor colours) fails it for comments, numbers
# and keywords such as `in`.
CODE_STYLE = "a11y-high-contrast-light"
# The frozen widgets' renderer (require.js and embed-amd.js, 3.7 MB with its icon font: more than the rest of a
# page) loads only when a widget comes within 600 px of the viewport, so that a page with a live explorer
# loads in under 5 MB (benchmarks/bench_site.py). nbconvert's template adds both at DOMContentLoaded; render()
# puts this in their place. embed-amd.js renders at once when it arrives after the page's load event (its
# embed-amd-render checks document.readyState), so a late load renders every widget. Also loaded at once: when the
# address names an anchor the page does not have yet (it may be inside a widget), and before printing.
LAZY_WIDGETS = f"""<script>
(function () {{
  var views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]');
  var started = false, observer = null;
  function add(src, then) {{
    var script = document.createElement("script");
    script.src = src;
    script.onload = then || null;
    document.body.appendChild(script);
  }}
  function start() {{
    if (started) return;
    started = true;
    if (observer) observer.disconnect();
    add("{REQUIRE_URL}", function () {{ add("{WIDGETS_URL}"); }});
  }}
  function anchor() {{
    try {{ return decodeURIComponent(location.hash.slice(1)); }} catch (e) {{ return location.hash.slice(1); }}
  }}
  function startForAnchor() {{
    var id = anchor(), tries = 0;
    if (!id || document.getElementById(id)) return;
    start();
    var look = setInterval(function () {{  // once the widget holding it renders, go there
      var target = document.getElementById(id);
      if (target) target.scrollIntoView();
      if (target || ++tries > 100) clearInterval(look);
    }}, 100);
  }}
  if (!views.length) return;
  if (!("IntersectionObserver" in window)) return start();
  startForAnchor();
  // From the load event on: before it, the figures above a widget have no height yet and every widget looks near.
  window.addEventListener("load", function () {{
    if (started) return;
    observer = new IntersectionObserver(function (entries) {{
      if (entries.some(function (e) {{ return e.isIntersecting; }})) start();
    }}, {{rootMargin: "600px 0px"}});
    views.forEach(function (view) {{ observer.observe(view.parentElement); }});
  }});
  window.addEventListener("hashchange", startForAnchor);
  window.addEventListener("beforeprint", start);
}}());
</script>"""
LIVE_NOTE = "moving them needs the live notebook"  # tests/test_site.py looks for this phrase
KERNEL = "attnkit-site"  # a kernelspec made here, so the kernels run this very Python


def live_site():
    """docs/live_site.py: the live explorers of pages 03, 04 and 05 (a sibling module; this file runs as a
    script, and tests/helpers.py loads it by path)."""
    if str(DOCS) not in sys.path:
        sys.path.insert(0, str(DOCS))
    import live_site

    return live_site


# ---------------------------------------------------------------- offline assets


def npm_tarball(spec: str, integrity: str) -> Path:
    """The package's tarball from build/site-vendor/, fetched with `npm pack` once; hash checked.
    Fetched into a folder of its own and then renamed into place: an interrupted fetch, or two tests
    fetching at once, leave no half-written tarball for another process to read."""
    VENDOR_CACHE.mkdir(parents=True, exist_ok=True)
    name, version = spec.rsplit("@", 1)
    path = VENDOR_CACHE / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
    if not path.exists():
        npm = shutil.which("npm")
        if npm is None:
            sys.exit(
                f"build_site: npm is needed once to fetch {spec} (apt-get install npm, or Node.js from nodejs.org)"
            )
        with tempfile.TemporaryDirectory(dir=VENDOR_CACHE, prefix=".fetch-") as fetch:
            subprocess.run([npm, "pack", "--silent", spec], cwd=fetch, check=True, stdout=subprocess.DEVNULL)
            os.replace(Path(fetch) / path.name, path)
    digest = "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()
    if digest != integrity:
        path.unlink()
        sys.exit(f"build_site: {path.name} does not match its pinned sha512; deleted, run again")
    return path


def extract(tarball: Path, members: dict[str, Path]) -> None:
    """Copy files out of an npm tarball: {path inside the package (a dir ends in /): destination}."""
    with tarfile.open(tarball) as tar:
        for info in tar.getmembers():
            inner = info.name.removeprefix("package/")
            for source, dest in members.items():
                if info.isfile() and (inner == source or (source.endswith("/") and inner.startswith(source))):
                    target = dest / inner.removeprefix(source) if source.endswith("/") else dest
                    if target.suffix == ".map":
                        continue
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(tar.extractfile(info).read())


def fetch_packages() -> None:
    """Every pinned package in build/site-vendor/ (`make site-vendor`): the site's widget renderer and
    the tests' axe-core, fetched before a test needs them rather than by the first test that does."""
    for spec, integrity in [*NPM.items(), AXE]:
        print(f"build/site-vendor: {npm_tarball(spec, integrity).name}")


def axe_script() -> str:
    """axe-core's browser bundle, axe.min.js, read out of its pinned tarball (hash-checked on each
    read: no extracted copy for anyone to edit)."""
    with tarfile.open(npm_tarball(*AXE)) as tar:
        return tar.extractfile("package/axe.min.js").read().decode()


def install_widget_renderer(root: Path) -> None:
    """require.js at REQUIRE_URL and the widget manager at WIDGETS_URL, both relative to `root`.
    The bundle looks for its icon fonts under @jupyter-widgets/ and @jupyter-widgets/html-manager/dist/
    relative to the page (its webpack public path), so the fonts go to both."""
    requirejs, manager = (npm_tarball(spec, integrity) for spec, integrity in NPM.items())
    extract(requirejs, {"require.js": root / REQUIRE_URL})
    dist = root / WIDGETS_URL.rsplit("/", 1)[0]
    extract(manager, {"dist/": dist, "LICENSE": dist / "LICENSE"})
    for unused in ("embed.js", "libembed-amd.js"):  # embed-amd.js carries libembed-amd itself
        (dist / unused).unlink(missing_ok=True)
    for font in dist.iterdir():
        if font.suffix in (".woff2", ".woff", ".ttf", ".eot", ".svg"):
            shutil.copy(font, root / "@jupyter-widgets" / font.name)


def copy_assets(out: Path) -> None:
    static = out / STATIC
    import jupyter_server_mathjax

    mathjax = Path(jupyter_server_mathjax.__file__).parent / "static"
    shutil.copytree(mathjax, static / "mathjax", ignore=shutil.ignore_patterns("localization"), dirs_exist_ok=True)
    maps = (mathjax / SPEECH_MAPS).with_name("en.js").read_text()  # JSON: the English symbol names
    (static / "mathjax" / SPEECH_MAPS).write_text(
        f'sre.MathMap.getInstance().addMaps({maps});\nMathJax.Ajax.loadComplete("[MathJax]/{SPEECH_MAPS}");\n'
    )
    install_widget_renderer(out)
    (static / "site.css").write_text(CSS + live_site().CSS)
    live_site().install(out, os.environ.get("ATTNKIT_LIVE_PLANT"))  # the weights, from the checkpoints
    figures = sorted(DOCS.glob("*.png"))
    if figures:
        (static / "figures").mkdir(exist_ok=True)
        for png in figures:
            shutil.copy(png, static / "figures" / png.name)


# ---------------------------------------------------------------- executing and rendering


def kernelspec(folder: Path) -> None:
    spec = folder / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "attnkit (site build)",
                "language": "python",
            }
        )
    )


def execute(path: str) -> tuple[str, float]:
    """Run one notebook in a fresh kernel, widget state saved; returns (executed JSON, seconds)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    start = time.monotonic()
    NotebookClient(
        nb, kernel_name=KERNEL, timeout=900, store_widget_state=True, resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nbformat.writes(nb), time.monotonic() - start


def title_of(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if match:
                return re.sub(r"[*_`]", "", match.group(1)).strip()
    return ""


DEFAULT_ALT = "No description has been provided for this image"  # nbconvert's, on an image with none


def with_alt_text(body: str, nb) -> str:
    """Each figure's description (its text/plain: attnkit.ui.alt_text) as its image's alt text."""
    alts = {
        str(out["data"]["image/png"]).strip()[:200]: str(out["data"]["text/plain"])
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {}) and "text/plain" in out.get("data", {})
        and not str(out["data"]["text/plain"]).startswith("<Figure")
    }  # fmt: skip

    def tag(match) -> str:
        img = match.group(0)
        key = next((k for k in alts if k in img), None)
        if key is None:
            return img
        img = re.sub(r'\salt="[^"]*"', "", img)
        return img.replace("<img", f'<img alt="{html.escape(alts[key])}"', 1)

    return re.sub(r"<img\b[^>]*>", tag, body)


def render(executed: str, stem: str, pages: list[str], commit: str) -> str:
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    nb = nbformat.reads(executed, as_version=4)
    exporter = HTMLExporter(
        template_name="lab",
        mathjax_url=MATHJAX_URL,
        require_js_url=REQUIRE_URL,
        widget_renderer_url=WIDGETS_URL,
        config=Config({"CSSHTMLHeaderPreprocessor": {"style": CODE_STYLE}}),
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": stem}})
    body = with_alt_text(body, nb)
    widgets = "widgets" in nb.metadata
    i = pages.index(stem)
    prev_link = f'<a href="{pages[i - 1]}.html">← {pages[i - 1]}</a>' if i > 0 else ""
    next_link = f'<a href="{pages[i + 1]}.html">{pages[i + 1]} →</a>' if i + 1 < len(pages) else ""
    explorer = live_site().section(stem)
    note = (
        f"Its widgets show their saved state: {LIVE_NOTE} (<code>make lab</code>), since no Python "
        "runs behind this page."
        if widgets
        else "To run it yourself: <code>make lab</code>."
    )
    if explorer:
        note += " The live explorer below runs the model in your browser."
    banner = f"""
<nav class="attnkit-site-nav"><a href="index.html">attnkit course</a> · {prev_link} {next_link}</nav>
<aside class="attnkit-site-note">This page is <code>notebooks/{stem}.ipynb</code>, run top to bottom on the
committed checkpoints (commit <code>{commit}</code>) with its outputs kept. {note}</aside>
{explorer}"""
    body, n_require = re.subn(rf'<script src="{re.escape(REQUIRE_URL)}"></script>', "", body)
    renderer = r"<script>\s*\(function\(\) \{\s*function addWidgetsRenderer\(\).*?</script>\n?"
    body, n_renderer = re.subn(renderer, "", body, flags=re.S)
    assert n_require == 1 and n_renderer == int(widgets), "nbconvert's widget scripts changed: see LAZY_WIDGETS"
    if widgets:
        body = body.replace("</body>", LAZY_WIDGETS + "\n</body>", 1)
    body, n_head = re.subn(r"(<head[^>]*>)", lambda m: m.group(1) + MATHJAX_CONFIG, body, count=1)
    body = body.replace("</head>", f'<link rel="stylesheet" href="{STATIC}/site.css">\n</head>', 1)
    body, n_body = re.subn(r"(<body[^>]*>)", lambda m: m.group(1) + banner, body, count=1)
    assert n_head == n_body == 1, "nbconvert's page layout changed: no <head>/<body> to add the banner to"
    body = re.sub(r"<title>[^<]*</title>", f"<title>{html.escape(stem)} · attnkit</title>", body, count=1)
    return body


# ---------------------------------------------------------------- the guides

# The guides, rendered beside the notebooks: {Markdown file in the repository: page on the site}.
GUIDES = {
    "docs/learners.md": "learners",
    "docs/instructors.md": "instructors",
    "docs/grading.md": "grading",
    "docs/hooks.md": "hooks",
    "docs/RESULTS.md": "results",
    "CONTRIBUTING.md": "contributing",
    "CHANGELOG.md": "changelog",
}


def slug(text: str) -> str:
    """GitHub's anchor for a heading (its text, tags and entities removed), so that the guides' links
    to a section (`instructors.md#5-grade`) work on the site as on GitHub."""
    plain = html.unescape(re.sub(r"<[^>]+>", "", text)).strip().lower()
    return re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")


def site_link(target: str, guide: str, built: set[str]) -> str | None:
    """Where a guide's link points on the site: another guide's page, a notebook's page, a picture;
    None for a file the site does not carry (the link becomes its text)."""
    if re.match(r"[a-z]+:", target) or target.startswith("#"):
        return target
    path, _, anchor = target.partition("#")
    file = os.path.normpath(os.path.join(os.path.dirname(guide), path))
    anchor = f"#{anchor}" if anchor else ""
    if file == "README.md":
        return "index.html" + anchor
    if file in GUIDES:
        return f"{GUIDES[file]}.html{anchor}"
    stem = Path(file).stem
    if file.startswith("notebooks/") and stem in built:
        return f"{stem}.html"
    if file.startswith("docs/") and file.endswith(".png"):
        return f"{STATIC}/figures/{Path(file).name}"
    return None


def guide_page(guide: str, built: set[str], commit: str) -> str:
    """One guide as a page of the site: its headings carry GitHub's anchors, its links point at pages."""
    import mistune

    class Renderer(mistune.HTMLRenderer):
        def heading(self, text: str, level: int, **attrs) -> str:
            return f'<h{level} id="{slug(text)}">{text}</h{level}>\n'

        def link(self, text: str, url: str, title=None) -> str:
            target = site_link(url, guide, built)
            return text if target is None else f'<a href="{html.escape(target)}">{text}</a>'

        def image(self, text: str, url: str, title=None) -> str:
            target = site_link(url, guide, built)
            return f'<img src="{html.escape(target or url)}" alt="{html.escape(text)}">'

    source = (ROOT / guide).read_text(encoding="utf-8")
    body = mistune.create_markdown(renderer=Renderer(escape=False), plugins=["table"])(source)
    title = next((line[2:].strip() for line in source.splitlines() if line.startswith("# ")), guide)
    note = f"This page is <code>{guide}</code> at commit <code>{commit}</code>."
    return plain_page(title, "attnkit-index", body, f'<aside class="attnkit-site-note">{note}</aside>')


def plain_page(title: str, body_class: str, main: str, after_main: str = "") -> str:
    """A site page that is not a rendered notebook (a guide, a live explorer alone): the site's
    stylesheet, the link back to the index, `main` and what follows it."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} · attnkit</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="{STATIC}/site.css"></head>
<body class="{body_class}">
<nav class="attnkit-site-nav"><a href="index.html">attnkit course</a></nav>
<main>
{main}
</main>
{after_main}
</body></html>
"""


# ---------------------------------------------------------------- the index page


def tour_html(built: set[str]) -> str:
    """README's tour table, links pointed at the pages (rows without a page keep their text)."""
    import mistune

    readme = (ROOT / "README.md").read_text()
    match = re.search(r"^## Tour\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    assert match, "README.md has no '## Tour' section"
    table = "\n".join(line for line in match.group(1).splitlines() if line.startswith("|"))

    def link(m):
        stem = m.group(2)
        return f"[{m.group(1)}]({stem}.html)" if stem in built else m.group(1)

    table = re.sub(r"\[([^\]]+)\]\(notebooks/([^)]+)\.ipynb\)", link, table)
    return mistune.create_markdown(plugins=["table"])(table)


def live_page(stem: str, title: str, commit: str) -> str:
    """A notebook's page with its live explorer only, the notebook not run (`--live-only`: the explorers'
    check inside `make test` without the minutes of running notebooks 04 and 05)."""
    note = (
        f"This build did not run <code>notebooks/{stem}.ipynb</code> (commit\n<code>{commit}</code>): this page "
        "carries its live explorer only; <code>make site</code> renders the notebook."
    )
    main = f"""<h1>{html.escape(title)}</h1>
<aside class="attnkit-site-note">{note}</aside>
{live_site().section(stem)}"""
    return plain_page(stem, "attnkit-index attnkit-live-only", main)


def index_page(built: list[str], titles: dict[str, str], commit: str, timings: dict[str, float]) -> str:
    captions = {}  # in the README's order, from docs/figures.json (make_figures.py writes it)
    meta = DOCS / "figures.json"
    if meta.exists():
        captions = {name: entry.get("caption", "") for name, entry in json.loads(meta.read_text())["figures"].items()}
    figures = sorted(
        DOCS.glob("*.png"),
        key=lambda png: (list(captions).index(png.name) if png.name in captions else len(captions), png.name),
    )
    gallery = "\n".join(
        f'<figure><img src="{STATIC}/figures/{png.name}" alt="{html.escape(captions.get(png.name, png.stem))}">'
        f"<figcaption>{html.escape(captions.get(png.name, ''))}</figcaption></figure>"
        for png in figures
    )
    pages = "\n".join(
        f'<li><a href="{stem}.html">{stem}</a> — {html.escape(titles[stem])} '
        + (
            f'<span class="attnkit-time">(ran in {timings[stem]:.0f} s)</span></li>'
            if stem in timings
            else '<span class="attnkit-time">(its live explorer only)</span></li>'
        )
        for stem in built
    )
    guides = "\n".join(
        f'<li><a href="{page}.html">{page}</a> — <code>{guide}</code></li>'
        for guide, page in GUIDES.items()
        if (ROOT / guide).exists()
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>attnkit — transformer attention, built and taken apart</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="{STATIC}/site.css"></head>
<body class="attnkit-index">
<h1>attnkit — transformer attention, built and taken apart</h1>
<p>A Jupyter course kit for students and instructors of a deep-learning course: build attention from
first principles, train a small transformer to add, look inside it with heatmaps, cut its heads out one
at a time, and test how positional encodings extrapolate. Everything runs on a laptop CPU in minutes.</p>
<p class="attnkit-site-note">Every page below is a notebook run top to bottom on the committed checkpoints
(commit <code>{commit}</code>) with its outputs kept, so you can read the results before installing
anything. Widgets show their saved state; {LIVE_NOTE}: clone the repository and run <code>make lab</code>.
The pages of notebooks 03, 04 and 05 also carry live explorers that run the trained models in your browser,
offline: type a sum, look at any head, switch heads off, ask a classifier whether a sequence is sorted.</p>
<h2>The notebooks</h2>
<ul class="attnkit-pages">{pages}</ul>
<h2>Guides</h2>
<ul class="attnkit-pages">{guides}</ul>
<h2>Tour</h2>
{tour_html(set(built))}
<h2>What you will see</h2>
<div class="attnkit-gallery">{gallery}</div>
</body></html>
"""


CSS = """
/* A cell's In/Out prompt in JupyterLab's grey at full strength: at half opacity (an inactive cell's, and every
   cell on a static page is inactive) it is #b0b0b0 on white, 2.2:1, below WCAG AA's 4.5:1. */
:root { --jp-cell-prompt-not-active-opacity: 1; }
.attnkit-site-nav { font: 14px system-ui, sans-serif; padding: 8px 16px; background: #f3f5f7;
  border-bottom: 1px solid #d0d7de; }
.attnkit-site-nav a { margin-right: 1em; }
.attnkit-site-note { font: 14px/1.45 system-ui, sans-serif; margin: 12px 16px; padding: 10px 14px;
  background: #fff8e1; border-left: 4px solid #f0b400; }
body.attnkit-index { font: 16px/1.5 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; }
body.attnkit-index table { border-collapse: collapse; font-size: 14px; }
body.attnkit-index th, body.attnkit-index td { border: 1px solid #d0d7de; padding: 6px 8px; vertical-align: top; }
.attnkit-time { color: #666; font-size: 13px; }
.attnkit-gallery { display: flex; flex-wrap: wrap; gap: 16px; }
.attnkit-gallery figure { margin: 0; flex: 1 1 480px; }
.attnkit-gallery img { max-width: 100%; border: 1px solid #d0d7de; }
.attnkit-gallery figcaption { font-size: 14px; color: #444; }
"""


# ---------------------------------------------------------------- main


def build(out: Path, only: list[str] | None, jobs: int, live_only: list[str] | None = None) -> dict[str, float]:
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    explorers_only = [p for p in paths if p.name[:2] in (live_only or [])]
    if only:
        paths = [p for p in paths if any(p.name.startswith(prefix) for prefix in only)]
        assert len(paths) == len(only), f"--only {only} matched {[p.name for p in paths]}"
    explorers_only = [p for p in explorers_only if p not in paths]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    start = time.monotonic()
    copy_assets(out)
    commit = (
        subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        or "unknown"
    )
    if subprocess.run(
        ["git", "status", "--porcelain", "--", "notebooks", "attnkit", "data"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip():
        commit += " + local changes"
    with tempfile.TemporaryDirectory() as tmp:
        kernelspec(Path(tmp))
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [tmp, os.environ.get("JUPYTER_PATH")]))
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # as `make test`: one thread per kernel
        os.environ["MPLBACKEND"] = (
            "module://matplotlib_inline.backend_inline"  # figures inline, whatever the shell says
        )
        with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = dict(zip((p.stem for p in paths), pool.map(execute, map(str, paths))))
    import nbformat

    stems = sorted([p.stem for p in paths] + [p.stem for p in explorers_only])
    timings = {stem: seconds for stem, (_, seconds) in results.items()}
    titles = {stem: title_of(nbformat.reads(executed, as_version=4)) for stem, (executed, _) in results.items()}
    for stem, (executed, seconds) in results.items():
        (out / f"{stem}.html").write_text(render(executed, stem, stems, commit))
        print(f"  {stem}: ran in {seconds:.1f} s", flush=True)
    for path in explorers_only:
        titles[path.stem] = title_of(nbformat.read(path, as_version=4))
        (out / f"{path.stem}.html").write_text(live_page(path.stem, titles[path.stem], commit))
    for guide, page in GUIDES.items():
        if (ROOT / guide).exists():
            (out / f"{page}.html").write_text(guide_page(guide, set(stems), commit))
    (out / "index.html").write_text(index_page(stems, titles, commit, timings))
    print(
        f"site: {len(stems)} notebooks -> {out}/index.html in {time.monotonic() - start:.0f} s ({jobs} at a time)",
        flush=True,
    )
    return timings


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "site", help="output folder (replaced)")
    parser.add_argument("--only", nargs="+", metavar="NN", help="notebook number prefixes, e.g. 01 05")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks run at once (default 2, one per core)")
    parser.add_argument(
        "--live-only", nargs="+", metavar="NN", default=[], help="pages with a live explorer only, not run: 04 05"
    )
    parser.add_argument(
        "--fetch-only", action="store_true", help="fetch the pinned npm packages into build/site-vendor/ and stop"
    )
    args = parser.parse_args(argv)
    if args.fetch_only:
        from attnkit.__main__ import handle_stop_signals, interrupted_status, say

        handle_stop_signals()  # SIGTERM and SIGHUP as Ctrl-C: a fetch they stop leaves no temporary behind
        try:
            fetch_packages()
        except KeyboardInterrupt:
            say("build_site: stopped; build/site-vendor/ keeps only the packages fetched whole")
            sys.exit(interrupted_status())
        return
    build(args.out, args.only, args.jobs, args.live_only)


if __name__ == "__main__":
    main()
