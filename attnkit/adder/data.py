"""Addition problems as character tokens: "663+497" -> "1160".

Token ids are chosen so that a digit's id *is* the digit (id 7 = "7"). The padding id
is 13, a value no real token uses: a padded position can never be mistaken for the
digit 0 (one of the assignment's reports used -1 for the same reason).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..core.checkpoint import DATA_DIR

PLUS, BOS, EOS, PAD = 10, 11, 12, 13
VOCAB = list("0123456789+") + ["<s>", "</s>", "<pad>"]  # id -> printable token
VOCAB_SIZE = len(VOCAB)
_PAD_CHAR = "_"  # internal filler used while tokenizing, never seen by the model
_LOOKUP = np.full(256, PAD, dtype=np.int64)
for _i, _c in enumerate("0123456789+"):
    _LOOKUP[ord(_c)] = _i

TEST_SET_PATH = DATA_DIR / "adder_test.txt"
EDGE_CASES = ["0+0", "999+999", "500+500", "1+999", "555+445", "999+1", "5+5", "0+999", "99+1", "450+550"]


def src_len(n_digits: int) -> int:
    return 2 * n_digits + 1  # "999+999"


def tgt_len(n_digits: int) -> int:
    return n_digits + 1 + 2  # <s> + up to n_digits+1 sum digits + </s>


def parse_problem(text: str, n_digits: int = 3) -> tuple[int, int]:
    """ "663+497" -> (663, 497); ValueError naming the problem when it is malformed."""
    if not isinstance(text, str):
        raise ValueError(f"problem {text!r} is not a string like '663+497'")
    m = re.fullmatch(r"\s*(\d+)\s*\+\s*(\d+)\s*", text)
    if m is None:
        raise ValueError(f"problem {text!r} is not of the form 'a+b' with digits only, e.g. '663+497'")
    for operand in m.groups():
        if len(operand.lstrip("0") or "0") > n_digits:
            raise ValueError(
                f"problem {text!r}: operand {operand} has more than {n_digits} digits, "
                f"longer than the model was trained on (0 … {10**n_digits - 1})"
            )
    # Stripped first: int() refuses strings of more than 4,300 digits, even "000…5".
    return int(m.group(1).lstrip("0") or "0"), int(m.group(2).lstrip("0") or "0")


def _tokenize(texts: list[str], length: int) -> Tensor:
    """Fixed-width byte view of the strings, mapped through a lookup table: fast for 10k rows."""
    joined = "".join(t.ljust(length, _PAD_CHAR) for t in texts).encode("ascii")
    codes = np.frombuffer(joined, dtype=np.uint8).reshape(len(texts), length)
    return torch.from_numpy(_LOOKUP[codes])


def encode_sources(a: np.ndarray, b: np.ndarray, n_digits: int, zero_pad: bool = True) -> Tensor:
    """(batch,) operands -> (batch, src_pos) token ids of "a+b", right-padded with PAD.

    zero_pad writes every operand with n_digits digits ("5+5" -> "005+005"), so a digit's
    position always says its place value; without it the model must work out the alignment."""
    width = n_digits if zero_pad else 0
    return _tokenize([f"{x:0{width}d}+{y:0{width}d}" for x, y in zip(a.tolist(), b.tolist())], src_len(n_digits))


def encode_targets(s: np.ndarray, n_digits: int, reverse: bool = False) -> Tensor:
    """(batch,) sums -> (batch, tgt_pos) ids of <s> digits </s>, right-padded with PAD."""
    texts = [str(x)[::-1] if reverse else str(x) for x in s.tolist()]
    body = _tokenize(texts, n_digits + 1)
    out = torch.full((len(texts), tgt_len(n_digits)), PAD, dtype=torch.long)
    out[:, 0] = BOS
    out[:, 1:-1] = body
    lengths = torch.tensor([len(t) for t in texts])
    out[torch.arange(len(texts)), lengths + 1] = EOS
    return out


def decode_digits(ids: list[int], reverse: bool = False) -> str:
    """Token ids after <s> -> the answer string, stopping at </s>."""
    out = []
    for i in ids:
        if i == EOS or i == PAD:
            break
        out.append(VOCAB[i])
    text = "".join(out)
    return text[::-1] if reverse else text


def tokens(ids) -> list[str]:
    """Printable tokens for axis labels, padding dropped."""
    return [VOCAB[i] for i in ids if i != PAD]


def carry_stats(a: np.ndarray, b: np.ndarray, n_digits: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Per problem: the number of carries, and the longest chain of consecutive carries."""
    a, b = np.asarray(a), np.asarray(b)
    carry = np.zeros_like(a)
    n_carries = np.zeros_like(a)
    chain = np.zeros_like(a)
    longest = np.zeros_like(a)
    for p in range(n_digits):  # place value 10**p, least significant first
        column = (a // 10**p) % 10 + (b // 10**p) % 10 + carry
        carry = (column >= 10).astype(a.dtype)
        n_carries += carry
        chain = (chain + 1) * carry
        longest = np.maximum(longest, chain)
    return n_carries, longest


def problem_keys(a: np.ndarray, b: np.ndarray, n_digits: int) -> np.ndarray:
    return np.asarray(a, dtype=np.int64) * 10**n_digits + np.asarray(b, dtype=np.int64)


def make_test_set(n: int = 10_000, n_digits: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n distinct problems with operands uniform over 0 … 10**n_digits - 1."""
    rng = np.random.default_rng(seed)
    keys = rng.choice(10 ** (2 * n_digits), size=n, replace=False)
    keys.sort()
    return keys // 10**n_digits, keys % 10**n_digits


def write_test_set(path: Path = TEST_SET_PATH, n_digits: int = 3) -> None:
    """The held-out problems as readable lines "a+b=sum"; written atomically."""
    a, b = make_test_set(n_digits=n_digits)
    tmp = Path(path).with_suffix(".tmp")
    tmp.write_text("".join(f"{x}+{y}={x + y}\n" for x, y in zip(a.tolist(), b.tolist())))
    tmp.replace(path)


N_TEST = 10_000  # problems in the committed held-out set


def operands_or_test_set(a, b) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) as given, or the committed held-out set when both are None."""
    if a is None and b is None:
        return load_test_set()
    if a is None or b is None:
        raise ValueError("pass both operands a and b, or neither (for the held-out set)")
    return np.asarray(a), np.asarray(b)


def load_test_set(path: Path = TEST_SET_PATH, n_digits: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of the held-out problems, one "a+b=sum" per line; ValueError naming the file and
    line when a line is malformed, has a wrong sum or an operand of more than n_digits digits, a
    problem repeats, the file is empty, binary or cut off (no final newline), or the committed
    file does not hold its 10,000 problems."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("ascii")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path} is not a plain-ASCII text file of problems (byte {e.start} is "
            f"{e.object[e.start]:#04x}); is it binary?"
        ) from e
    if not text.strip():
        raise ValueError(f"{path} holds no problems")
    if not text.endswith("\n"):
        raise ValueError(f"{path} ends in the middle of a line: the file is cut off")
    operand, total = f"([0-9]{{1,{n_digits}}})", f"([0-9]{{1,{n_digits + 1}}})"
    pattern = re.compile(rf"{operand}\+{operand}={total}")
    a, b, seen = [], [], dict[tuple[int, int], int]()
    for line_no, line in enumerate(text.splitlines(), 1):
        m = pattern.fullmatch(line)
        if m is None or int(m.group(1)) + int(m.group(2)) != int(m.group(3)):
            raise ValueError(
                f"{path}:{line_no}: malformed or wrong line {line[:40]!r} "
                f"(expected 'a+b=sum', operands of at most {n_digits} digits)"
            )
        key = (int(m.group(1)), int(m.group(2)))
        if key in seen:
            raise ValueError(f"{path}:{line_no}: problem {line!r} repeats line {seen[key]}")
        seen[key] = line_no
        a.append(key[0])
        b.append(key[1])
    if path.resolve() == TEST_SET_PATH.resolve() and len(a) != N_TEST:
        raise ValueError(
            f"{path} holds {len(a)} problems, not the committed {N_TEST}: restore it "
            "(git checkout data/adder_test.txt) or write it again with write_test_set()"
        )
    return np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)


class ProblemSampler:
    """Seeded stream of training problems that never hits a held-out problem.

    Uniform operands are 90 % three-digit, so short operands ("5+5") would be rare;
    with probability `p_short` an operand is drawn with fewer digits instead.
    """

    def __init__(self, n_digits: int, exclude: np.ndarray, seed: int, p_short: float = 0.2):
        self.n_digits, self.p_short = n_digits, p_short
        self.exclude = np.sort(np.asarray(exclude))
        self.rng = np.random.default_rng(seed)

    def _operands(self, n: int) -> np.ndarray:
        digits = np.where(
            self.rng.random(n) < self.p_short,
            self.rng.integers(1, self.n_digits, size=n) if self.n_digits > 1 else self.n_digits,
            self.n_digits,
        )
        return self.rng.integers(0, 10**digits)

    def held_out(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(n,) bool: problem i is excluded. A binary search in the sorted keys: np.isin sorts
        the batch and the 12,000 keys together at every step, 100x slower (a few % of a step)."""
        keys = problem_keys(a, b, self.n_digits)
        if not len(self.exclude):
            return np.zeros(len(keys), dtype=bool)
        at = np.minimum(np.searchsorted(self.exclude, keys), len(self.exclude) - 1)
        return self.exclude[at] == keys

    def sample(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self._operands(n), self._operands(n)
        held_out = self.held_out(a, b)
        while held_out.any():  # redraw the few that collide with the held-out set
            k = int(held_out.sum())
            a[held_out], b[held_out] = self._operands(k), self._operands(k)
            held_out = self.held_out(a, b)
        return a, b
