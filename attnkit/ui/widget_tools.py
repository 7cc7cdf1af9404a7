"""What every explorer widget shares: serialised updates, messages, and the ✓/✗ verdict.

ipywidgets may deliver callbacks on more than one kernel thread (a fast learner clicking three
toggles can start three updates at once). The explorers' updates share a model and a figure, so
they must never overlap: `Serial` runs them one at a time, and only the newest request's result
is shown.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable

DISPLAY_DPI = 96  # explorer PNGs are shown at their own pixel size: 1 px of the PNG = 1 px on screen
MIN_FONT_PT = 9  # the smallest text in an explorer figure: 9 pt at 96 dpi is 12 px on screen (figure_policy)


def error_html(e) -> str:
    return f'<span style="color:#cf222e">⚠ {html.escape(str(e))}</span>'


def verdict(problem: str, answer: str, truth: int) -> str:
    ok = answer == str(truth)
    mark = '<b style="color:#1a7f37">✓</b>' if ok else '<b style="color:#cf222e">✗</b>'
    return (
        f"<b>{html.escape(problem)}</b> → model: <b>{html.escape(answer) or '(nothing)'}</b> {mark} (true sum {truth})"
    )


class Serial:
    """Run `work(stale)` for requests arriving from any thread: never two at once, the last
    request wins. A request made while one runs does not wait: it marks the state as changed,
    and the running thread loops once more when it finishes. `stale()` (passed to `work`) says
    whether a newer request came in, so `work` can skip showing a result nobody wants now.
    `work` must not raise (show errors in the widget instead)."""

    def __init__(self, work: Callable[[Callable[[], bool]], None]):
        self._work = work
        self._cond = threading.Condition()
        self._wanted = 0  # requests so far (a generation counter)
        self._running = False

    def request(self) -> None:
        with self._cond:
            self._wanted += 1
            if self._running:
                return  # the running thread sees the new generation and runs again
            self._running = True
        try:
            while True:
                with self._cond:
                    generation = self._wanted

                def stale(generation: int = generation) -> bool:
                    return self._wanted != generation

                self._work(stale)
                with self._cond:  # done only if nothing came in meanwhile (checked and cleared at once)
                    if self._wanted == generation:
                        self._running = False
                        self._cond.notify_all()
                        return
        except BaseException:
            with self._cond:
                self._running = False
                self._cond.notify_all()
            raise

    def wait(self, timeout: float = 60.0) -> bool:
        """Block until no update runs (so a program reads the result of its own change)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._running, timeout)

    @property
    def busy(self) -> bool:
        return self._running


def figure_words():
    """The widget under an explorer's figure that says it in words (alt_text.text_alternative):
    folded, for anyone who wants it, and the image's alt text (the script of accessibility.py)."""
    import ipywidgets as W

    words = W.HTML()
    words.add_class("attnkit-figure-words")
    return words


def show_image(image, png: bytes, words, alt: str) -> None:
    """Put PNG bytes in an Image widget at their own pixel size (no stretching: sharp text), and
    make it visible again if an error hid it; `words` (figure_words) says `alt`, the figure in words."""
    import struct

    width, height = struct.unpack(">II", png[16:24])  # the PNG header's IHDR size
    image.value = png
    image.width, image.height = str(width), str(height)
    image.layout.display = ""
    words.value = f"<details><summary>the figure in words</summary><p>{html.escape(alt)}</p></details>"
    words.layout.display = ""


def hide_image(image, words) -> None:
    """After an error: the old figure (and its words) would describe a state that is no longer shown."""
    image.layout.display = "none"
    words.layout.display = "none"
