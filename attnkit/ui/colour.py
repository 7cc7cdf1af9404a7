"""Colour that everyone can read: a categorical palette that stays apart under colour-vision
deficiency, text on a coloured cell chosen by contrast, and the measures the figure policy checks.

* Colour-vision deficiency: Machado, Oliveira & Fernandes (2009), "A physiologically-based model for
  simulation of color vision deficiency", the matrices for protanopia, deuteranopia and tritanopia
  (severity 1.0), applied to linear RGB.
* Colour difference: CIE76 ΔE*ab in CIELAB (D65). Two categories of one figure must differ by at least
  MIN_DELTA_E in normal vision and in each simulation.
* Contrast: WCAG 2.1's relative luminance and contrast ratio; text needs at least 4.5:1.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
from matplotlib.colors import to_rgb

MACHADO_2009 = {
    "protanopia": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
    "deuteranopia": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
    "tritanopia": np.array(
        [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]
    ),
}
MIN_DELTA_E = 12.0  # ΔE*ab between any two categories of a figure, in every vision (about 5 just-noticeable steps)
MIN_CONTRAST = 4.5  # WCAG 2.1 AA, normal text

# Okabe & Ito (2008), "Color Universal Design": picked for colour-vision deficiency. The order gives
# the six positional encodings of notebook 05 colours that pass MIN_DELTA_E in every vision (tested).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#000000", "#D55E00", "#F0E442")


def _linear(rgb) -> np.ndarray:
    c = np.asarray(rgb, dtype=float)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _srgb(linear) -> np.ndarray:
    c = np.clip(np.asarray(linear, dtype=float), 0.0, 1.0)
    return np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055)


def simulate(colour, vision: str) -> np.ndarray:
    """`colour` (anything matplotlib reads) as seen with `vision` ("normal" or a MACHADO_2009 key)."""
    rgb = np.array(to_rgb(colour))
    return rgb if vision == "normal" else _srgb(MACHADO_2009[vision] @ _linear(rgb))


def lab(rgb) -> np.ndarray:
    """sRGB in [0, 1] -> CIELAB (D65)."""
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ _linear(rgb)
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a, b, vision: str = "normal") -> float:
    return float(np.linalg.norm(lab(simulate(a, vision)) - lab(simulate(b, vision))))


def closest_pair(colours) -> tuple[float, str, tuple]:
    """(the smallest ΔE between two of `colours` in any vision, that vision, the pair)."""
    found: tuple[float, str, tuple] = (float("inf"), "", ())
    for a, b in combinations(list(dict.fromkeys(colours)), 2):
        for vision in ("normal", *MACHADO_2009):
            d = delta_e(a, b, vision)
            if d < found[0]:
                found = (d, vision, (a, b))
    return found


def luminance(colour) -> float:
    return float(np.array([0.2126, 0.7152, 0.0722]) @ _linear(to_rgb(colour)))


def contrast(a, b) -> float:
    """WCAG contrast ratio of two colours, 1 to 21."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_colour_on(background) -> str:
    """Black or white, whichever contrasts more with `background` (always at least 4.58:1)."""
    return "black" if contrast("black", background) >= contrast("white", background) else "white"


def cell_text_colour(image, value) -> str:
    """The colour for `value` written on its cell of `image` (an AxesImage): by contrast, not by a
    fraction of the colour scale."""
    return text_colour_on(image.cmap(image.norm(value)))
