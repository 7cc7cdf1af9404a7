"""The site's live explorers (issue 39): the models' weights exported for docs/live/attnkit-live.js,
and the explorers' HTML on the pages of notebooks 03, 04 and 05.

docs/build_site.py calls `install(out)` once and `section(stem)` for each notebook page. The weights
go to _static/live/<model>.js, written at build time from the committed checkpoints (never committed
themselves): each a script calling attnkitLive.addWeights(name, manifest, base64 of the float32
tensors), since a page opened from file:// may load a script but not fetch a file.
"""

from __future__ import annotations

import base64
import html
import json
import shutil
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LIVE = ROOT / "docs" / "live"  # the explorers' JavaScript, copied as is
SCRIPTS = ("attnkit-live.js", "attnkit-explorers.js")
FOLDER = "_static/live"
ENCODINGS = ("sinusoidal", "learned", "none", "relative", "rope", "alibi")  # the order of notebook 05
SAMPLE_EVERY = 50  # the exact match in the page: every 50th held-out sum, 200 of them (bench_site.py times a toggle)
MAX_LEN = 256  # the longest sequence the sortedness explorer takes: the longest test length
PAGES = {"03": "adder", "04": "ablation", "05": "sortedness"}  # notebook prefix -> explorer


def weights_script(name: str, state: dict, config: dict, extra: dict, plant: str | None = None) -> str:
    """One model as a script: its manifest (config, every tensor's offset and shape) and its float32
    tensors, base64. `plant` names a tensor whose first value is changed (the equality test's planted
    difference; never in a real build)."""
    tensors, parts, offset = {}, [], 0
    for key, tensor in state.items():
        array = tensor.detach().cpu().numpy().astype("<f4").ravel().copy()
        if key == plant:
            array[0] += 0.5
        tensors[key] = [offset, list(tensor.shape) or [1]]
        parts.append(array)
        offset += array.size
    data = base64.b64encode(np.concatenate(parts).tobytes()).decode()
    manifest = json.dumps({"config": config, "tensors": tensors, "extra": extra}, separators=(",", ":"))
    return f'attnkitLive.addWeights("{name}", {manifest},\n"{data}");\n'


def held_out_sample() -> list[str]:
    """The page's fixed sample of held-out sums, "a+b=sum" lines of data/adder_test.txt."""
    from attnkit.adder.data import TEST_SET_PATH

    return TEST_SET_PATH.read_text().splitlines()[::SAMPLE_EVERY]


def export(folder: Path, plant: str | None = None) -> dict[str, int]:
    """Every model's script into `folder`; returns {file name: bytes}."""
    from dataclasses import asdict

    import attnkit
    from attnkit.adder import Adder
    from attnkit.sortedness import load_classifier

    folder.mkdir(parents=True, exist_ok=True)
    adder = attnkit.load_pretrained("adder")
    assert isinstance(adder, Adder)
    if not adder.cfg.zero_pad:  # the page writes every operand with n_digits digits, as zero_pad does
        raise ValueError("the live adder mirrors zero_pad=True only")
    model_plant = plant.split(":", 1)[1] if plant and plant.startswith("adder:") else None
    scripts = {"adder": weights_script("adder", adder.model.state_dict(), asdict(adder.cfg),
                                       {"sample": held_out_sample()}, model_plant)}  # fmt: skip
    for encoding in ENCODINGS:
        model = load_classifier(encoding)
        name = f"sortedness-{encoding}"
        model_plant = plant.split(":", 1)[1] if plant and plant.startswith(name + ":") else None
        scripts[name] = weights_script(name, model.state_dict(), asdict(model.cfg), {"max_len": MAX_LEN}, model_plant)
    sizes = {}
    for name, text in scripts.items():
        (folder / f"{name}.js").write_text(text)
        sizes[f"{name}.js"] = len(text)
    return sizes


def install(out: Path, plant: str | None = None) -> dict[str, int]:
    """The explorers' scripts and the weights into out/_static/live/."""
    folder = out / FOLDER
    sizes = export(folder, plant)
    for script in SCRIPTS:
        shutil.copy(LIVE / script, folder / script)
    return sizes


# ---------------------------------------------------------------- the explorers' markup

INTRO = (
    "It runs in your browser, offline: no kernel, no network. The committed checkpoint's weights ship with "
    'this page, and <a href="{js}/attnkit-live.js">attnkit-live.js</a> mirrors the PyTorch forward pass in '
    "plain JavaScript (read it beside <code>{code}</code>)."
)


def problem_form(prefix: str, button: str) -> str:
    """A sum's text box (accessible name "problem"; Enter submits) and its answer (name "answer", polite)."""
    return f"""<form class="attnkit-live-form">
<label for="{prefix}-problem">Problem</label>
<input id="{prefix}-problem" name="problem" type="text" value="663+497" aria-label="problem"
  aria-describedby="{prefix}-hint" autocomplete="off" spellcheck="false" inputmode="text" size="12">
<button type="submit">{button}</button>
<span id="{prefix}-hint" class="attnkit-live-hint">a sum a+b, each operand 0 to 999; Enter answers</span>
<p class="attnkit-live-result">Answer: <output name="answer" aria-label="answer" aria-live="polite"></output>
<span class="attnkit-live-message" aria-live="polite"></span></p>
</form>"""


def select(name: str, label: str, options: list[tuple[str, str]], prefix: str, chosen: str = "") -> str:
    opts = "".join(
        f'<option value="{html.escape(v)}"{" selected" if v == chosen else ""}>{html.escape(t)}</option>'
        for v, t in options
    )
    return f'<label for="{prefix}-{name}">{label}</label> <select id="{prefix}-{name}" name="{name}">{opts}</select>'


def adder_section() -> str:
    prefix = "live-adder"
    kinds = [("enc.self", "encoder self-attention"), ("dec.self", "decoder self-attention"),
             ("dec.cross", "decoder cross-attention")]  # fmt: skip
    return f"""<section class="attnkit-live" data-attnkit-live="adder" aria-labelledby="{prefix}-title">
<h2 id="{prefix}-title">Try it live: the adder's answer and attention</h2>
<p>Type a sum and press Enter: the trained adder answers it greedily, one digit at a time, and the map below
shows where any head looks for that sum. {INTRO.format(js=FOLDER, code="attnkit/adder/model.py")}</p>
{problem_form(prefix, "Answer")}
<fieldset class="attnkit-live-pick"><legend>Which head</legend>
{select("kind", "Attention", kinds, prefix)}
{select("layer", "Layer", [("0", "0"), ("1", "1")], prefix)}
{select("head", "Head", [(str(h), str(h)) for h in range(4)], prefix)}
</fieldset>
<figure class="attnkit-live-figure"><svg role="img" aria-labelledby="{prefix}-caption"></svg>
<figcaption id="{prefix}-caption" aria-live="polite"></figcaption></figure>
</section>"""


def ablation_section() -> str:
    prefix = "live-ablation"
    groups = [("enc.self", L) for L in (0, 1)] + [(k, L) for L in (0, 1) for k in ("dec.self", "dec.cross")]
    names = {"enc.self": "encoder self-attention", "dec.self": "decoder self-attention",
             "dec.cross": "decoder cross-attention"}  # fmt: skip
    fieldsets = "\n".join(
        f'<fieldset class="attnkit-live-heads"><legend>{names[kind]}, layer {layer}</legend>'
        + "".join(
            f'<label><input type="checkbox" checked value="{kind}.{layer}.{h}"> {kind}.{layer}.{h}</label>'
            for h in range(4)
        )
        + "</fieldset>"
        for kind, layer in groups
    )
    n = len(held_out_sample())
    return f"""<section class="attnkit-live" data-attnkit-live="ablation" aria-labelledby="{prefix}-title">
<h2 id="{prefix}-title">Try it live: switch heads off</h2>
<p>Untick a head to remove it (zero ablation: its output z is set to 0 before W_O, as in this notebook). The
answer to your sum and the exact match over {n} held-out sums (every {SAMPLE_EVERY}th line of
<code>data/adder_test.txt</code>) are computed again in the page.
{INTRO.format(js=FOLDER, code="attnkit/adder/model.py")}</p>
{problem_form(prefix, "Answer")}
<div class="attnkit-live-grid">{fieldsets}</div>
<p><button type="button" name="all-on">Every head on</button></p>
<p class="attnkit-live-result">Exact match: <output name="exact-match" aria-live="polite"></output></p>
</section>"""


def sortedness_section() -> str:
    prefix = "live-sortedness"
    lengths = [str(n) for n in (*range(8, 17), 32, 64, 128, 256)]
    return f"""<section class="attnkit-live" data-attnkit-live="sortedness" aria-labelledby="{prefix}-title">
<h2 id="{prefix}-title">Try it live: is this sequence sorted?</h2>
<p>Pick a positional encoding, type whole numbers 0 to 99 (or draw a sequence of a chosen length) and press
Enter: that encoding's classifier, trained on lengths 8 to 16, gives its verdict and where it sees a
violation. {INTRO.format(js=FOLDER, code="attnkit/sortedness/model.py")}</p>
<form class="attnkit-live-form">
<p>{select("encoding", "Positional encoding", [(e, e) for e in ENCODINGS], prefix)}
{select("length", "Length to draw", [(n, n) for n in lengths], prefix, "16")}</p>
<p><button type="button" data-draw="sorted">Draw sorted</button>
<button type="button" data-draw="swap">Draw with one swap</button>
<button type="button" data-draw="shuffle">Draw shuffled</button></p>
<p><label for="{prefix}-sequence">Sequence</label><br>
<textarea id="{prefix}-sequence" name="sequence" rows="2" cols="60" spellcheck="false"
  aria-describedby="{prefix}-hint">3 8 8 15 21 30 42 42 57 61 64 70 77 85 90 99</textarea>
<span id="{prefix}-hint" class="attnkit-live-hint">values 0 to 99, separated by spaces; up to {MAX_LEN};
Enter classifies</span></p>
<p><button type="submit">Classify</button></p>
<p class="attnkit-live-result">Verdict: <output name="verdict" aria-live="polite"></output></p>
<p class="attnkit-live-scores attnkit-live-message" aria-live="polite"></p>
</form>
</section>"""


SECTIONS = {"adder": adder_section, "ablation": ablation_section, "sortedness": sortedness_section}


def section(stem: str) -> str:
    """The explorer for notebook `stem`'s page with its scripts, or "" for a page without one."""
    kind = PAGES.get(stem[:2])
    if kind is None:
        return ""
    scripts = "".join(f'<script src="{FOLDER}/{name}" defer></script>' for name in SCRIPTS)
    return f'{SECTIONS[kind]()}\n<script>window.attnkitLiveBase = "{FOLDER}/";</script>{scripts}\n'


CSS = """
.attnkit-live { font: 15px/1.5 system-ui, sans-serif; margin: 12px 16px; padding: 12px 16px; max-width: 1000px;
  border: 2px solid #0b5cad; border-radius: 6px; background: #fff; }
.attnkit-live h2 { font-size: 20px; margin: 0 0 8px; }
.attnkit-live input[type=text], .attnkit-live textarea, .attnkit-live select, .attnkit-live button { font: inherit; }
.attnkit-live textarea { width: 100%; max-width: 60em; box-sizing: border-box; }
.attnkit-live-hint { color: #4a4a4a; font-size: 14px; margin-left: 0.5em; }
.attnkit-live-result output { font-weight: bold; }
.attnkit-live fieldset { border: 1px solid #b0b7bf; margin: 6px 0; }
.attnkit-live-pick label { margin-left: 0.6em; }
.attnkit-live-grid { display: flex; flex-wrap: wrap; gap: 6px; }
.attnkit-live-heads label { display: inline-block; margin-right: 0.8em; white-space: nowrap; }
.attnkit-live-figure { margin: 8px 0; }
.attnkit-live-figure svg { max-width: 100%; height: auto; font: 14px system-ui, sans-serif; }
.attnkit-live-figure figcaption { font-size: 14px; color: #333; max-width: 60em; }
.attnkit-live :focus-visible { outline: 3px solid #f0b400; outline-offset: 2px; }
"""
