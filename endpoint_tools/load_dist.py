"""Token-length distributions for the load sweep: `normal:MEAN,SD`, `uniform:LO,HI`, `fixed:N`.

Real traffic is not one prompt length: a sweep with a single fixed prompt hides the queueing that
long prompts cause and the prefix-cache hits a repeated prompt enjoys. Lengths are drawn from one of
these, with a seeded random generator so a sweep can be repeated exactly:

  fixed:N           always N tokens
  uniform:LO,HI     an integer between LO and HI, both included
  normal:MEAN,SD    a normal draw rounded to an integer, clipped to [1, MEAN + 4*SD]
"""

from __future__ import annotations

import random
from dataclasses import dataclass

FORMS = "fixed:N, uniform:LO,HI or normal:MEAN,SD"


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
        raise DistributionError(f"{spec!r} is not a distribution; use {FORMS}")
    try:
        numbers = [float(p) for p in params.split(",")] if params else []
    except ValueError:
        raise DistributionError(f"{spec!r} has a non-numeric parameter; use {FORMS}") from None
    if kind == "fixed":
        if len(numbers) != 1 or numbers[0] < 1 or not numbers[0].is_integer():
            raise DistributionError(f"{spec!r}: fixed takes one whole number >= 1, e.g. fixed:128")
        return Distribution("fixed", numbers[0])
    if kind == "uniform":
        if len(numbers) != 2 or not all(n.is_integer() for n in numbers) or not 1 <= numbers[0] <= numbers[1]:
            raise DistributionError(f"{spec!r}: uniform takes whole numbers 1 <= LO <= HI, e.g. uniform:64,512")
        return Distribution("uniform", numbers[0], numbers[1])
    if len(numbers) != 2 or numbers[0] < 1 or numbers[1] < 0:
        raise DistributionError(f"{spec!r}: normal takes MEAN >= 1 and SD >= 0, e.g. normal:256,64")
    return Distribution("normal", numbers[0], numbers[1])
