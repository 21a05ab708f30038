"""Token-length distributions for the load sweep: `normal:MEAN,SD`, `uniform:LO,HI`, `fixed:N`.

Real traffic is not one prompt length: a sweep with a single fixed prompt hides the queueing that
long prompts cause and the prefix-cache hits a repeated prompt enjoys. Lengths are drawn from one of
these, with a seeded random generator so a sweep can be repeated exactly:

  fixed:N           always N tokens
  uniform:LO,HI     an integer between LO and HI, both included
  normal:MEAN,SD    a normal draw rounded to an integer, clipped to [1, MEAN + 4*SD]
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from common.untrusted import excerpt

FORMS = "fixed:N, uniform:LO,HI or normal:MEAN,SD"
# The longest length any distribution may produce: 2^20 tokens, above every context length the smoke
# and load tools work with, so a typo (normal:1e30,5) is an error instead of an endless corpus.
MAX_TOKENS = 2**20


class DistributionError(ValueError):
    """A distribution spec could not be parsed; the message names the spec and the accepted forms."""


@dataclass(frozen=True)
class Distribution:
    kind: str
    a: float
    b: float = 0.0

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        # Clipping keeps a rare far-tail draw from asking for a prompt beyond anything planned for.
        value = round(rng.gauss(self.a, self.b))
        return max(1, min(value, int(self.a + 4 * self.b)))

    @property
    def upper_bound(self) -> int:
        """The largest length this distribution can produce."""
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return int(self.b)
        return max(1, int(self.a + 4 * self.b))

    @property
    def mean(self) -> float:
        """The length this distribution centres on (a normal's draws are clipped at 1 and MEAN + 4 SD)."""
        return self.a if self.kind != "uniform" else (self.a + self.b) / 2

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"fixed:{int(self.a)}"
        if self.kind == "uniform":
            return f"uniform:{int(self.a)},{int(self.b)}"
        return f"normal:{_num(self.a)},{_num(self.b)}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def parse_distribution(spec: str) -> Distribution:
    kind, sep, params = spec.strip().partition(":")
    kind = kind.lower()
    if not sep or kind not in ("fixed", "uniform", "normal"):
        raise DistributionError(f"{excerpt(spec)} is not a distribution; use {FORMS}")
    try:
        numbers = [float(p) for p in params.split(",")] if params else []
    except ValueError:
        raise DistributionError(f"{excerpt(spec)} has a non-numeric parameter; use {FORMS}") from None
    # float() reads "nan" and "inf"; neither is a length, and NaN passes every comparison below.
    if not all(math.isfinite(n) for n in numbers) or any(abs(n) > MAX_TOKENS for n in numbers):
        raise DistributionError(f"{excerpt(spec)}: parameters must be finite numbers of at most {MAX_TOKENS:,} tokens")
    if kind == "normal" and len(numbers) == 2 and numbers[0] + 4 * numbers[1] > MAX_TOKENS:
        raise DistributionError(
            f"{excerpt(spec)}: MEAN + 4*SD reaches {numbers[0] + 4 * numbers[1]:,.0f} tokens, more than {MAX_TOKENS:,}"
        )
    if kind == "fixed":
        if len(numbers) != 1 or numbers[0] < 1 or not numbers[0].is_integer():
            raise DistributionError(f"{excerpt(spec)}: fixed takes one whole number >= 1, e.g. fixed:128")
        return Distribution("fixed", numbers[0])
    if kind == "uniform":
        if len(numbers) != 2 or not all(n.is_integer() for n in numbers) or not 1 <= numbers[0] <= numbers[1]:
            raise DistributionError(f"{excerpt(spec)}: uniform takes whole numbers 1 <= LO <= HI, e.g. uniform:64,512")
        return Distribution("uniform", numbers[0], numbers[1])
    if len(numbers) != 2 or numbers[0] < 1 or numbers[1] < 0:
        raise DistributionError(f"{excerpt(spec)}: normal takes MEAN >= 1 and SD >= 0, e.g. normal:256,64")
    return Distribution("normal", numbers[0], numbers[1])
