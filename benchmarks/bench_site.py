"""The live course pages (issue 39): bytes each page loads, and how fast a typed sum is answered.

    python benchmarks/bench_site.py [--site site] [--sums 30]    # after `make site`
    python benchmarks/bench_site.py --smoke                       # builds a small site first (seconds + 1 notebook)

Each page of notebooks 03, 04 and 05 is opened offline in Chromium (CHROMIUM, default /usr/bin/chromium)
from file:// in a 1280x800 window, every file it asks for is recorded, and the page weight is the sum of
their sizes on disk (the HTML, scripts, styles, fonts and the models' weights): at load, once the explorer
has started, and again once scrolled to the bottom (the frozen widgets' renderer, 3.7 MB, loads only when
a widget comes near). Latency: a sum typed into page 03's
box and Enter, until the answer is in its live region (the answer and the heatmap), median of --sums
sums; on page 04, a head's box unticked until the exact match over the page's sample is announced.
The bars: 5 MB per page, 200 ms per sum.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("03_attention_heatmaps", "04_head_ablation", "05_positional_encoding_extrapolation")
BAR_BYTES, BAR_MS = 5_000_000, 200.0
VIEWPORT = {"width": 1280, "height": 800}  # a laptop's window
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def page_weight(browser, path: Path) -> tuple[int, int, int]:
    """(bytes of every file the page loaded once its explorer started, of the explorer's scripts and weights
    among them, and of every file loaded once the reader has scrolled to the bottom: the frozen widgets'
    renderer loads only when a widget comes near, docs/build_site.py LAZY_WIDGETS)"""
    context = browser.new_context(offline=True, viewport=VIEWPORT)
    page = context.new_page()
    files: set[Path] = set()
    page.on(
        "requestfinished",
        lambda r: files.add(Path(unquote(urlparse(r.url).path))) if r.url.startswith("file:") else None,
    )
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    page.wait_for_function(
        "() => window.attnkitExplorers && Object.keys(window.attnkitExplorers).length", timeout=60_000
    )
    page.evaluate("() => Promise.all(Object.values(window.attnkitExplorers))")
    page.wait_for_function(  # and MathJax done: its speech engine and fonts count too
        "() => !window.MathJax || (MathJax.Hub && MathJax.Hub.queue.running === 0 && MathJax.Hub.queue.pending === 0)",
        timeout=60_000,
    )
    page.wait_for_load_state("networkidle")

    def total(among: str = "") -> int:
        return sum(f.stat().st_size for f in set(files) if f.is_file() and among in str(f))

    at_load, live = total(), total("/_static/live/")
    page.evaluate(
        """async () => {  // a screen at a time, as a reader would, to the bottom
            for (let y = 0; y < document.body.scrollHeight; y += innerHeight / 2) {
                scrollTo(0, y);
                await new Promise((r) => setTimeout(r, 50));
            }
        }"""
    )
    page.wait_for_timeout(2000)
    scrolled = total()
    context.close()
    return at_load, live, scrolled


def typed_latency(browser, path: Path, sums: int) -> list[float]:
    """Milliseconds from Enter to the answer shown, for `sums` typed sums on the page of notebook 03."""
    context = browser.new_context(offline=True)
    page = context.new_page()
    page.goto(path.as_uri())
    page.wait_for_function("() => window.attnkitExplorers && window.attnkitExplorers.adder", timeout=60_000)
    page.evaluate("() => window.attnkitExplorers.adder")
    times = page.evaluate(
        """(n) => {
            const root = document.querySelector("[data-attnkit-live=adder]");
            const input = root.querySelector("input[name=problem]"), form = root.querySelector("form");
            const out = [];
            for (let i = 0; i < n; i++) {
                input.value = `${(i * 337) % 1000}+${(i * 731 + 5) % 1000}`;
                const t = performance.now();
                form.requestSubmit();  // what Enter does; the handler answers and draws synchronously
                out.push(performance.now() - t);
            }
            return out;
        }""",
        sums,
    )
    context.close()
    return times


# Heads switched off one after another on page 04, each a set of heads the page has not met (no reuse of a result):
# the decoder's first (the encoder's memory is kept, attnkit-live.js memoryOf), then the encoder's.
TOGGLES = ["dec.cross.1.2", "dec.self.0.1", "dec.cross.0.3", "dec.self.1.0", "enc.self.0.1", "enc.self.1.3"]


def toggle_latency(browser, path: Path) -> dict:
    """On the page of notebook 04: milliseconds from a head's box unticked to the exact match over the page's
    sample announced, for each of TOGGLES; and a sum's time inside the page, in the sample's batched pass and alone."""
    context = browser.new_context(offline=True, viewport=VIEWPORT)
    page = context.new_page()
    page.goto(path.as_uri())
    page.wait_for_function("() => window.attnkitExplorers && window.attnkitExplorers.ablation", timeout=60_000)
    page.evaluate("() => window.attnkitExplorers.ablation")
    page.wait_for_function("() => /% \\(/.test(document.querySelector('output[name=exact-match]').textContent)")
    result = page.evaluate(
        """async (heads) => {
            const root = document.querySelector("[data-attnkit-live=ablation]");
            const out = root.querySelector("output[name=exact-match]"), toggles = [];
            for (const id of heads) {
                const done = new Promise((resolve) => {
                    const watch = new MutationObserver(() => {
                        if (/% \\(/.test(out.textContent)) { watch.disconnect(); resolve(); }
                    });
                    watch.observe(out, { childList: true, characterData: true, subtree: true });
                });
                const t = performance.now();
                root.querySelector(`input[value="${id}"]`).click();
                await done;
                toggles.push(performance.now() - t);
            }
            const adder = await attnkitLive.adder(), sums = adder.sample.map((line) => line.split("=")[0]);
            let t = performance.now();
            adder.exactMatch(new Set(["enc.self.1.1"]));  // a set of heads not seen: the encoder runs too
            const batched = (performance.now() - t) / sums.length;
            t = performance.now();
            for (const s of sums.slice(0, 50)) adder.solve(s, new Set(["enc.self.1.2"]));
            return { toggles, batched, alone: (performance.now() - t) / 50, n: sums.length };
        }""",
        TOGGLES,
    )
    context.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, default=ROOT / "site", help="a built site (make site)")
    parser.add_argument("--sums", type=int, default=30, help="typed sums to time")
    parser.add_argument("--smoke", action="store_true", help="a small site built here, 5 sums (make bench-smoke)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        site = args.site.resolve()
        if args.smoke:
            args.sums, site = 5, Path(tmp) / "site"
            build = [sys.executable, str(ROOT / "docs" / "build_site.py"), "--out", str(site), "--jobs", "1"]
            subprocess.run(build + ["--only", "03", "--live-only", "04", "05"], check=True, stdout=subprocess.DEVNULL)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"), args=ARGS)
            start = time.monotonic()
            for stem in PAGES:
                total, live, scrolled = page_weight(browser, site / f"{stem}.html")
                flag = "ok" if total <= BAR_BYTES else "OVER the bar"
                print(
                    f"{stem}: {total / 1e6:.2f} MB loaded ({live / 1e6:.2f} MB the explorer's scripts, weights),"
                    f" {flag}; {scrolled / 1e6:.2f} MB once scrolled to the bottom"
                )
            times = typed_latency(browser, site / f"{PAGES[0]}.html", args.sums)
            ablation = toggle_latency(browser, site / f"{PAGES[1]}.html")
            browser.close()
    median = statistics.median(times)
    print(
        f"typed sum answered (and heatmap): median {median:.1f} ms, max {max(times):.1f} ms over {len(times)} sums"
        f" ({'ok' if median <= BAR_MS else 'OVER'} the {BAR_MS:.0f} ms bar); load average {os.getloadavg()[0]:.2f};"
        f" {time.monotonic() - start:.0f} s"
    )
    toggles = [f"{head} {ms:.0f}" for head, ms in zip(TOGGLES, ablation["toggles"])]
    print(
        f"a head switched off, exact match over {ablation['n']} sums announced (ms): {', '.join(toggles)};"
        f" a sum in the page: {ablation['batched']:.2f} ms in the sample's pass, {ablation['alone']:.2f} ms alone"
    )


if __name__ == "__main__":
    main()
