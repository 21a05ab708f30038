"""Which policy-pack config a stack's gate runs with: the stack file names it, or its own file applies.

The pack's settings (prod's `requireDigest`, say) live in `policies/config/<name>.json`, outside the
stack file. Found by the stack's name alone, a copy of prod's stack file under another name would
silently get the pack's defaults and lose them; `policyConfig` in the stack file travels with the
copy. Without the key the stack's own `policies/config/<stack>.json` applies (the pack's defaults
when that does not exist). The offline plan and the workflows (`python -m offline_plan.pack_config`)
resolve it the same way, here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

PACK_CONFIG_FOLDER = "policies/config"
POLICY_CONFIG_KEY = "policyConfig"
_PATH_RE = re.compile(rf"{re.escape(PACK_CONFIG_FOLDER)}/[A-Za-z0-9][A-Za-z0-9_.-]{{0,99}}\.json")


def policy_config_problem(value: str) -> str | None:
    """Why `policyConfig` cannot be used as given, or None: a file of the pack-config folder, named as
    the workflows pass it (relative to the project, no `..`)."""
    if _PATH_RE.fullmatch(value) and ".." not in value:
        return None
    return f"must name a pack config file as {PACK_CONFIG_FOLDER}/<name>.json (e.g. {PACK_CONFIG_FOLDER}/prod.json)"


@dataclass(frozen=True)
class PackConfigChoice:
    path: str
    """Relative to the project: what the offline plan reads and the workflows pass to `pulumi preview`/`up`."""
    named: bool
    """True when the stack file names it (`policyConfig`), False when it is the stack's own by its name."""

    def why(self, stack: str) -> str:
        if self.named:
            return f"named by `{POLICY_CONFIG_KEY}` in Pulumi.{stack}.yaml"
        return f"the stack's own by its name (Pulumi.{stack}.yaml sets no `{POLICY_CONFIG_KEY}`)"


def pack_config_choice(stack: str, named: str | None) -> PackConfigChoice:
    """The pack config of `stack`: the one its stack file names, else `policies/config/<stack>.json`."""
    if named:
        return PackConfigChoice(named, True)
    return PackConfigChoice(f"{PACK_CONFIG_FOLDER}/{stack}.json", False)


def _checked(value: str) -> str:
    problem = policy_config_problem(value)
    if problem:
        raise ValueError(problem)
    return value


# The `policyConfig` key of a served and of a deployer stack file: one format, checked once.
PolicyConfigPath = Annotated[str, AfterValidator(_checked)]
