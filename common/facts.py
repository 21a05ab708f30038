"""A fact that comes from outside the program, with where it was read and whether it is settled.

Some numbers the program depends on (the CUDA version an engine image was built with, the NVIDIA
driver a node image ships) cannot always be established on the machine that writes the code. A
`Fact` carries the best evidence (`value`, possibly None), the citation, and, when the evidence
falls short of the fact, the command that settles it on a machine that can run it. Checks use
`value` where there is one; the offline plan lists every fact that is not `established`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    # What the fact is about, e.g. "CUDA of vllm/vllm-openai:v0.32.0".
    subject: str
    # The value as far as the evidence goes; None when there is none.
    value: str | None
    # Where it was read (URL, or repo@commit:path:line).
    source: str
    # True when the source states the fact itself; False when it is inferred or missing.
    established: bool = True
    # On a machine with the tool or the cloud: the command whose output settles the fact.
    resolve_with: str | None = None

    def __post_init__(self) -> None:
        if not self.established and not self.resolve_with:
            raise ValueError(f"unresolved fact {self.subject!r} needs the command that resolves it")

    def describe(self) -> str:
        shown = self.value if self.value is not None else "unknown"
        return shown if self.established else f"{shown} (unresolved)"
