"""Keyboard and screen-reader support for the explorers, which ipywidgets cannot give from Python.

An explorer shows itself as two outputs: a small script, then its widget (`show`). The script
(once per page) watches for explorers (`.attnkit-keys`) and, on every control inside one:

* sets `data-lm-suppress-shortcuts`: JupyterLab's command-mode shortcuts match the *focused*
  element, so a key pressed on a dropdown, a slider or a button ran a notebook command ("a" inserted
  a cell, "d d" deleted the explorer's). Lumino skips its shortcuts for a target that carries this
  attribute; on the explorer's outer element it does nothing (the focused element matches first);
* names each slider's handle after its label, and says its value as the readout shows it
  (`aria-valuetext`: "16", not the option's index "2");
* gives every toggle button its state (`aria-pressed`);
* gives the figure its text alternative (the folded words under it: widget_tools.figure_words);
* makes the result a learner waits for (`.attnkit-live`: an answer, an accuracy, an error) a polite
  live region, so a screen reader reads the new result.

A focused control gets a thick outline that cannot be mistaken for a selected (red or blue) button.
Where no script runs (VS Code's viewer, a classic renderer without JavaScript) the widget still
works as before, and each figure's words are still there to unfold.
"""

from __future__ import annotations

KEYS_CLASS = "attnkit-keys"  # on each explorer's outer widget
LIVE_CLASS = "attnkit-live"  # on the widgets whose text is the result

SCRIPT = """
(function () {
  if (window.attnkitKeys) { window.attnkitKeys.refresh(); return; }
  const FOCUSABLE = 'button, input, select, textarea, [tabindex], .noUi-handle';
  function refresh() {
    for (const root of document.querySelectorAll('.attnkit-keys')) {
      for (const el of root.querySelectorAll(FOCUSABLE)) {
        el.setAttribute('data-lm-suppress-shortcuts', 'true');
      }
      for (const slider of root.querySelectorAll('.widget-slider, .widget-hslider')) {
        const label = slider.querySelector('.widget-label');
        const readout = slider.querySelector('.widget-readout');
        for (const handle of slider.querySelectorAll('.noUi-handle')) {
          if (label && label.textContent.trim()) handle.setAttribute('aria-label', label.textContent.trim());
          if (readout) handle.setAttribute('aria-valuetext', (readout.value || readout.textContent).trim());
        }
      }
      for (const button of root.querySelectorAll('.widget-toggle-button, .widget-toggle-buttons button')) {
        button.setAttribute('aria-pressed', button.classList.contains('mod-active') ? 'true' : 'false');
      }
      const words = root.querySelector('.attnkit-figure-words p');
      for (const img of root.querySelectorAll('img')) img.alt = words ? words.textContent : '';
      for (const live of root.querySelectorAll('.attnkit-live')) {
        if (!live.hasAttribute('aria-live')) {
          live.setAttribute('role', 'status');
          live.setAttribute('aria-live', 'polite');
        }
      }
    }
  }
  let queued = false;
  function later() { if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; refresh(); }); } }
  new MutationObserver(later).observe(document.body, {
    childList: true, subtree: true, characterData: true, attributes: true, attributeFilter: ['class'],
  });
  // A key can arrive before the next frame: mark the focused control at once.
  document.addEventListener('focusin', (e) => {
    if (e.target instanceof Element && e.target.closest('.attnkit-keys')) {
      e.target.setAttribute('data-lm-suppress-shortcuts', 'true');
    }
  }, true);
  const style = document.createElement('style');
  style.textContent = '.attnkit-keys :focus-visible { outline: 3px solid #0b3d91 !important; outline-offset: 2px; }';
  document.head.appendChild(style);
  window.attnkitKeys = { refresh };
  refresh();
})();
"""


def mark(widget, live=()) -> None:
    """Mark `widget` as an explorer for the script, and `live` (widgets) as its result's live regions."""
    widget.add_class(KEYS_CLASS)
    for w in live:
        w.add_class(LIVE_CLASS)


def show(widget) -> None:
    """Display the script, then `widget` (an explorer's `_ipython_display_`)."""
    from IPython.display import Javascript, display

    display(Javascript(SCRIPT))
    display(widget)
