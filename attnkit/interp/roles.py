"""What each attention head does, measured over a whole data set instead of read off one heatmap.

    roles = head_roles(adder)          # pandas DataFrame, one row per head: "enc.self.0.1", ...
    roles.loc["dec.cross.1.2", "aligned"]
    chance_levels(cache)               # the same measures for uniform attention, per kind
    roles, chance = roles_and_chance(adder)   # both, from one run of the model (pass by pass)
    row_shares(cache, "enc.self.0.2", "carry")   # one head, every query row: for breakdowns

Every measure is an average over *query rows*: for one row (one query position of one sample)
it is the attention weight summed over a set of *keys*; the table gives the mean over every
counted row of every sample. Which rows count and which keys are summed, per attention kind:

  measure   enc.self (source -> source)           dec.self (answer -> answer)  dec.cross (answer -> source)
  plus      keys: '+'; rows: every source token   NaN (the decoder never       keys: '+'; rows: every answer
            except '+' itself                     sees '+')                    position
  aligned   a digit of place p in one operand     NaN (the answer has no       the position writing the output
            -> the place-p digit of the other     operand columns)             digit of place p -> the place-p
            operand (rows with no such digit      digits of both operands (rows
            are left out)                                                      with none are left out)
  carry     a digit of place p -> the place-(p-1) NaN                          the position writing place p ->
            digits of both operands (the column                                the place-(p-1) digits of both
            to its right, where a carry comes                                  operands; rows with p = 0 (or
            from); rows with p = 0 are left out                                no such digit) are left out
  prev      key = query - 1 (the token before);   key = query - 1              NaN (queries and keys are
            the first token is left out                                        different sequences)
  diag      key = query (itself)                  key = query (the token just  NaN
                                                  written: the diagonal)
  entropy   -sum w log2 w over the row's keys, in bits (0: one key takes everything; log2(n): uniform
            over n keys), every counted row

Place value p counts from the right: the units digit has p = 0. The decoder position t reads
the decoder input token t and writes output token t; which place value that is follows from
the true sum's length (and `reverse_output`); the position writing </s> has no place value.
Padding never counts: padded source keys get no weight (masked), padded decoder positions are
not rows, and decoder position 0 is left out of dec.self, whose causal mask forces it to put
all its weight on <s> (a fact of the mask, not a role). A measure is NaN where the kind has
no such keys (the table above) or where no row counts.

`typical_sample` is, per head, the sample whose own measures (averaged over its rows) are
closest (mean absolute difference, entropy scaled to [0, 1]) to the head's averages: the
heatmap to look at to see the head's usual behaviour, not an outlier.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from ..adder.data import PAD, PLUS, operands_or_test_set
from ..core.runtime import analysis_threads

if TYPE_CHECKING:  # pandas (30 MB) loads when a table is made: notebook 05 plots without one
    import pandas as pd

KINDS = ("enc.self", "dec.self", "dec.cross")
MEASURES = ("plus", "aligned", "carry", "prev", "diag", "entropy")
KIND_NAMES = {"enc.self": "encoder self", "dec.self": "decoder self (causal)", "dec.cross": "decoder cross"}


def problems_of(a: np.ndarray, b: np.ndarray) -> list[str]:
    """(a, b) operand arrays -> ["663+497", ...] as Adder.solve and run_with_cache take them."""
    return [f"{x}+{y}" for x, y in zip(np.asarray(a).tolist(), np.asarray(b).tolist())]


def source_layout(src: Tensor) -> dict[str, Tensor]:
    """Per source position of "a+b": which operand (0 = a, 1 = b, -1 = not a digit) and place value.

    src: (batch, src_pos) ids  ->  operand, place: (batch, src_pos) long; a, b: (batch,) long
    """
    pos = torch.arange(src.size(1))
    plus_at = (src == PLUS).long().argmax(dim=1, keepdim=True)  # (batch, 1)
    last = (src != PAD).sum(dim=1, keepdim=True) - 1  # index of b's units digit
    digit = src < 10
    operand = torch.where(pos < plus_at, 0, 1).masked_fill(~digit, -1)
    place = torch.where(pos < plus_at, plus_at - 1 - pos, last - pos).masked_fill(~digit, -1)
    # The operands' values (for the true sum's length): sum of digit * 10**place per operand.
    value = torch.where(digit, src * 10 ** place.clamp(min=0), 0)
    a = (value * (operand == 0)).sum(dim=1)
    b = (value * (operand == 1)).sum(dim=1)
    return {"operand": operand, "place": place, "a": a, "b": b}


def _sum_length(layout: dict) -> Tensor:
    """(batch,) number of digits of the true sum a + b, from source_layout()."""
    total = layout["a"] + layout["b"]
    return 1 + sum((total >= 10**k).long() for k in range(1, 19))


def output_places(tgt: Tensor, n_sum_digits: Tensor, reverse_output: bool = False) -> Tensor:
    """(batch, tgt_pos) place value of the digit each decoder position writes; -1 for </s> and beyond."""
    t = torch.arange(tgt.size(1))
    n = n_sum_digits[:, None]
    place = t.expand_as(tgt) if reverse_output else n - 1 - t
    return torch.where(t < n, place, -1)


def measure_masks(kind: str, src: Tensor, tgt: Tensor, reverse_output: bool = False) -> dict:
    """For each measure defined for `kind`: (rows, keys), the query rows that count
    (batch, q_pos) and the keys whose weight is summed (batch, q_pos, k_pos), all bool.
    The module docstring defines them; measures missing here are NaN for `kind`."""
    src, tgt = src.cpu(), tgt.cpu()
    t_real = _before_padding(tgt)
    lay = source_layout(src)
    s_op, s_place = lay["operand"], lay["place"]
    s_digit = s_op >= 0
    n_sum = _sum_length(lay)
    if kind == "enc.self":
        q_ok = src != PAD
        q_digit, q_place, q_op = s_digit[:, :, None], s_place[:, :, None], s_op[:, :, None]
        k_digit, k_place, k_op = s_digit[:, None, :], s_place[:, None, :], s_op[:, None, :]
        aligned = q_digit & k_digit & (k_place == q_place) & (k_op != q_op)
        carry = q_digit & k_digit & (k_place == q_place - 1)
        q_pos = torch.arange(src.size(1))
        plus_keys = (src == PLUS)[:, None, :].expand(-1, src.size(1), -1)
        return {
            "plus": (q_ok & (src != PLUS), plus_keys),
            "aligned": (aligned.any(-1), aligned),
            "carry": (carry.any(-1), carry),
            "prev": (q_ok & (q_pos >= 1), _diagonal(src, offset=-1)),
            "diag": (q_ok, _diagonal(src, offset=0)),
            "entropy": (q_ok, None),
        }
    if kind == "dec.self":
        q_pos = torch.arange(tgt.size(1))
        q_ok = t_real & (q_pos >= 1)  # position 0 can only see <s>: forced, not learned
        return {
            "prev": (q_ok, _diagonal(tgt, offset=-1)),
            "diag": (q_ok, _diagonal(tgt, offset=0)),
            "entropy": (q_ok, None),
        }
    if kind == "dec.cross":
        q_ok = t_real
        q_place = output_places(tgt, n_sum, reverse_output)[:, :, None]  # (batch, tgt_pos, 1)
        k_digit, k_place = s_digit[:, None, :], s_place[:, None, :]
        aligned = q_ok[:, :, None] & (q_place >= 0) & k_digit & (k_place == q_place)
        carry = q_ok[:, :, None] & (q_place >= 1) & k_digit & (k_place == q_place - 1)
        plus_keys = (src == PLUS)[:, None, :].expand(-1, tgt.size(1), -1)
        return {
            "plus": (q_ok, plus_keys),
            "aligned": (aligned.any(-1), aligned),
            "carry": (carry.any(-1), carry),
            "entropy": (q_ok, None),
        }
    raise ValueError(f"unknown attention kind {kind!r}; choose one of {KINDS}")


def _before_padding(tgt: Tensor) -> Tensor:
    """(batch, tgt_pos) bool: positions before the first padding. run_with_cache pads from </s>
    on; an untrained model may also *write* the padding id, and nothing after it is real."""
    return (tgt == PAD).cumsum(dim=1) == 0


def _diagonal(ids: Tensor, offset: int) -> Tensor:
    """(batch, pos, pos) bool: key == query + offset."""
    pos = torch.arange(ids.size(1))
    return (pos[None, :] == pos[:, None] + offset).expand(ids.size(0), -1, -1)


def _layers(cache: dict) -> list[tuple[str, int]]:
    """[(kind, layer), ...] for every attention module in the cache, in the table's order."""
    found = [key.removesuffix(".hook_pattern") for key in cache if key.endswith(".hook_pattern")]
    pairs = [(name.rsplit(".", 1)[0], int(name.rsplit(".", 1)[1])) for name in found]
    return sorted(pairs, key=lambda kl: (KINDS.index(kl[0]), kl[1]))


SAMPLE_CHUNK = 2048  # samples measured at once: each temporary is then 1.5 MB instead of 7.5 (10,000 problems)


def per_sample_roles(cache: dict, reverse_output: bool = False, uniform: bool = False):
    """Every measure of every head on every sample, before averaging.

    Returns (heads, sums, counts): head ids, and per measure the summed share over a sample's
    counted rows and the number of those rows, each (batch, n_heads_total) float64; so a
    sample's value is sums / counts and the table's is sums.sum(0) / counts.sum(0).
    With `uniform`, every head is replaced by uniform attention over the keys it may see:
    the chance level of each measure.
    """
    batch = cache["src"].size(0)
    n_total = sum(cache[f"{kind}.{layer}.hook_pattern"].size(1) for kind, layer in _layers(cache))
    # Filled in place, one attention module at a time: concatenating per-module parts at the end
    # held the whole result twice (46 MB over 10,000 problems).
    sums = {m: np.empty((batch, n_total)) for m in MEASURES}
    counts = {m: np.empty((batch, n_total)) for m in MEASURES}
    heads: list[str] = []
    for module_heads, module_sums, module_counts in _module_measures(cache, reverse_output, uniform):
        columns = slice(len(heads), len(heads) + len(module_heads))
        heads += module_heads
        for m in MEASURES:
            sums[m][:, columns], counts[m][:, columns] = module_sums[m], module_counts[m]
    return heads, sums, counts


def _module_measures(cache: dict, reverse_output: bool, uniform: bool):
    """per_sample_roles one attention module at a time, in the table's order: yields (head ids,
    sums, counts), per measure (batch, n_heads) and (batch, 1) float64 arrays."""
    src, tgt = cache["src"].cpu(), cache["tgt"].cpu()
    masks = {kind: measure_masks(kind, src, tgt, reverse_output) for kind in KINDS}
    with analysis_threads():
        for kind, layer in _layers(cache):
            pattern = cache[f"{kind}.{layer}.hook_pattern"]  # (batch, heads, q_pos, k_pos)
            n_heads = pattern.size(1)
            sums = {m: np.full((src.size(0), n_heads), math.nan) for m in MEASURES}
            # Every head of a module counts the same rows: one column, broadcast where it is used.
            counts = {m: np.zeros((src.size(0), 1)) for m in MEASURES}
            for start in range(0, src.size(0), SAMPLE_CHUNK):
                rows_of = slice(start, start + SAMPLE_CHUNK)
                chunk = pattern[rows_of].float().cpu()
                if uniform:
                    chunk = _uniform_like(kind, src[rows_of], tgt[rows_of], chunk)
                for m, (rows, keys) in masks[kind].items():
                    # Each sample's sums run over its own rows and keys only: chunks give the same numbers.
                    if keys is None:  # entropy, in bits; xlogy gives 0 log 0 = 0
                        per_row = -torch.special.xlogy(chunk, chunk).sum(-1) / math.log(2)
                    else:
                        per_row = (chunk * keys[rows_of, None]).sum(-1)  # (chunk, heads, q_pos)
                    rows_f = rows[rows_of, None].double()
                    sums[m][rows_of] = (per_row.double() * rows_f).sum(-1).numpy()
                    counts[m][rows_of] = rows_f.sum(-1).numpy()
            yield [f"{kind}.{layer}.{h}" for h in range(n_heads)], sums, counts


def row_shares(cache: dict, head: str, measure: str, reverse_output: bool = False) -> dict:
    """One head's measure on every query row, before any averaging: for asking *which* rows
    a head does it on (e.g. carry share split by the digits of the column to the right).

    Returns share (batch, q_pos) float, NaN where the row does not count, and place (batch,
    q_pos): the place value of the query's digit (encoder) or of the digit it writes (decoder
    cross), -1 where there is none.
    """
    kind, layer, h = head.rsplit(".", 2)
    src, tgt = cache["src"].cpu(), cache["tgt"].cpu()
    masks = measure_masks(kind, src, tgt, reverse_output)
    if measure not in masks:
        raise ValueError(f"{measure!r} is not defined for {kind} (NaN in the table)")
    rows, keys = masks[measure]
    pattern = cache[f"{kind}.{layer}.hook_pattern"][:, int(h)].float().cpu()  # (batch, q_pos, k_pos)
    with analysis_threads():
        if keys is None:
            per_row = -torch.special.xlogy(pattern, pattern).sum(-1) / math.log(2)
        else:
            per_row = (pattern * keys).sum(-1)
    if kind == "enc.self":
        place = source_layout(src)["place"]
    elif kind == "dec.cross":
        place = output_places(tgt, _sum_length(source_layout(src)), reverse_output)
    else:
        place = torch.full(tgt.shape, -1)
    return {"share": per_row.masked_fill(~rows, math.nan).numpy(), "place": place.numpy()}


def _uniform_like(kind: str, src: Tensor, tgt: Tensor, pattern: Tensor) -> Tensor:
    """Uniform weights over the keys a head may attend to (non-padding; causal in dec.self)."""
    real_keys = src != PAD if kind != "dec.self" else _before_padding(tgt)
    allowed = real_keys[:, None, None, :].expand_as(pattern).clone()
    if kind == "dec.self":
        allowed &= torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).tril()
    weights = allowed.float()
    return weights / weights.sum(-1, keepdim=True).clamp(min=1)


def roles_from_cache(cache: dict, reverse_output: bool = False) -> pd.DataFrame:
    """The head-roles table from a run_with_cache cache (or a hand-built one with the same keys:
    "src", "tgt" and "<kind>.<layer>.hook_pattern" shaped (batch, heads, q_pos, k_pos))."""
    # One attention module at a time: a head's means and typical sample need only its own measures,
    # and every head's per-sample measures at once were 23 MB over the 10,000 held-out problems.
    return _table(_module_measures(cache, reverse_output, uniform=False), cache["src"], cache["tgt"])


def _table(modules, src: Tensor, tgt: Tensor) -> pd.DataFrame:
    """The head-roles table from each module's (head ids, sums, counts), as _module_measures yields them."""
    # Entropy is in bits; scale it to [0, 1] (by the longest row's maximum) like the shares.
    scale = np.ones(len(MEASURES))
    scale[MEASURES.index("entropy")] = math.log2(max(src.size(1), tgt.size(1)))
    heads: list[str] = []
    means, typical = [], []
    for module_heads, sums, counts in modules:
        module_means, module_typical = _means_and_typical(sums, counts, scale)
        heads += module_heads
        means.append(module_means)
        typical.append(module_typical)

    import pandas as pd

    frame = pd.DataFrame(np.concatenate(means), index=pd.Index(heads, name="head"), columns=list(MEASURES))
    parts = frame.index.str.rsplit(".", n=2, expand=True)
    frame.insert(0, "kind", [p[0] for p in parts])
    frame.insert(1, "layer", [int(p[1]) for p in parts])
    frame.insert(2, "head_index", [int(p[2]) for p in parts])
    frame["typical_sample"] = np.concatenate(typical).astype(int)
    return frame


def _means_and_typical(sums: dict, counts: dict, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per head (of one module's per-sample sums and counts): each measure's mean over every counted
    row, (heads, measures), and the typical sample (module docstring), (heads,)."""
    per_sample = np.empty(sums[MEASURES[0]].shape + (len(MEASURES),))  # (batch, heads, measures)
    with np.errstate(invalid="ignore", divide="ignore"):
        table = {m: sums[m].sum(0) / counts[m].sum(0) for m in MEASURES}  # NaN where nothing counts
        for i, m in enumerate(MEASURES):
            np.divide(sums[m], counts[m], out=per_sample[..., i])
    means = np.stack([table[m] for m in MEASURES], axis=-1)  # (heads, measures)
    defined = ~np.isnan(means)  # (heads, measures)
    missing = (np.isnan(per_sample) & defined).any(-1)  # sample lacks a defined measure
    # |per_sample - means| / scale, 0 where the head has no such measure: in place, as np.where
    # would make temporaries of this shape
    diff = per_sample
    np.subtract(diff, means, out=diff)
    np.abs(diff, out=diff)
    np.divide(diff, scale, out=diff)
    np.copyto(diff, 0.0, where=~defined)
    dist = diff.sum(-1) / np.maximum(defined.sum(-1), 1)
    dist = np.where(missing, np.inf, dist)
    return means, dist.argmin(0)


def chance_levels(cache: dict, reverse_output: bool = False) -> pd.DataFrame:
    """Each measure for a head that spreads its attention uniformly over the keys it may see,
    one row per attention kind: a measured share means something only well above this."""
    return _chance_table(_module_measures(cache, reverse_output, uniform=True))


def _chance_table(modules) -> pd.DataFrame:
    """The chance table from each module's (head ids, sums, counts) under uniform attention."""
    heads: list[str] = []
    shares: dict[str, list] = {m: [] for m in MEASURES}
    for module_heads, sums, counts in modules:
        heads += module_heads
        with np.errstate(invalid="ignore", divide="ignore"):
            for m in MEASURES:
                shares[m].append(sums[m].sum(0) / counts[m].sum(0))
    import pandas as pd

    table = pd.DataFrame({m: np.concatenate(shares[m]) for m in MEASURES}, index=heads)
    kinds = table.index.str.rsplit(".", n=2).str[0]
    return table.groupby(kinds, sort=False).first().rename_axis("kind")


def head_roles(
    adder, a: np.ndarray | None = None, b: np.ndarray | None = None, cache: dict | None = None
) -> pd.DataFrame:
    """The measured role of each of the adder's heads on problems (a, b), by default the
    committed held-out set: one row per head id ("enc.self.0.1", "dec.cross.1.2", ...) with
    columns kind, layer, head_index, plus, aligned, carry, prev, diag, entropy, typical_sample
    (an index into a, b). Pass `cache` from adder.run_with_cache to skip the model's run."""
    if cache is not None:
        return roles_from_cache(cache, adder.cfg.reverse_output)
    src, tgt, (modules,) = _measured_by_pass(adder, a, b, uniform=(False,))
    return _table(modules, src, tgt)


def roles_and_chance(
    adder, a: np.ndarray | None = None, b: np.ndarray | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """head_roles(adder, a, b) and chance_levels of the same problems, from one run of the model
    (pass by pass, as head_roles measures: no cache of every pattern is held)."""
    src, tgt, (modules, uniform) = _measured_by_pass(adder, a, b, uniform=(False, True))
    return _table(modules, src, tgt), _chance_table(uniform)


def _measured_by_pass(adder, a, b, uniform: tuple[bool, ...]):
    """(src, tgt, per entry of `uniform` the list of each module's (head ids, sums, counts) over every
    problem): the model runs once, one pass of problems at a time, each pass dropped once measured, so
    the patterns of every problem at once (35 MB over the 10,000 held-out problems) are never held."""
    a, b = operands_or_test_set(a, b)
    names = [f"{name}.hook_pattern" for name in adder.model.attention_modules()]
    with analysis_threads():
        _, src, tgt, passes = adder.cache_passes(problems_of(a, b), names=names)
        # per entry of `uniform`, per module: head ids, sums and counts of every problem
        measured: tuple[list[tuple[list[str], dict, dict]], ...] = tuple([] for _ in uniform)
        for rows, chunk in passes:
            chunk = {**chunk, "src": src[rows], "tgt": tgt[rows]}
            for modules, flat in zip(measured, uniform):
                for i, (heads, sums, counts) in enumerate(_module_measures(chunk, adder.cfg.reverse_output, flat)):
                    if i == len(modules):  # the first pass: the module's arrays for every problem
                        modules.append((heads, _rows_for(sums, len(src)), _rows_for(counts, len(src))))
                    for m in MEASURES:
                        modules[i][1][m][rows], modules[i][2][m][rows] = sums[m], counts[m]
    return src, tgt, measured


def _rows_for(part: dict, n: int) -> dict:
    """Per measure, an empty array like part's (batch, ·) arrays, with n rows."""
    return {m: np.empty((n,) + x.shape[1:]) for m, x in part.items()}
