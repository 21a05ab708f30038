"""Waivers: findings on a Helm chart's rendered objects that a stack accepts, each with its reason.

The program cannot edit what a chart renders beyond the chart's values, and some findings are what
the chart needs (a node exporter reads the host's network and processes; a controller talks to the
API server with its service account's token). Such a finding is accepted only by an entry in a
waiver file (policies/config/waivers.yaml), never silently:

    - release: monitoring/kube-prometheus-stack   # <namespace>/<release name>
      stacks: [dev, prod]                         # the stacks whose plan uses it
      policy: pod-security-context                # the rule's name (policies/registry.py)
      objects: [DaemonSet/kube-prometheus-stack-prometheus-node-exporter]
      reason: the exporter reads the node's own network and process tables.
      source: charts/kube-prometheus-stack-88.3.0/charts/prometheus-node-exporter/values.yaml

An entry covers every finding of `policy` on each listed object of that release (a Kind/name, in
the release's rendered files). Each (stack, object, policy) it lists must match a finding: one that
matches nothing is stale and is itself an error, so waivers do not outlive what they excused.

Which objects belong to a release: the offline plan writes them as
`helm.<namespace>.<release>.<Kind>-<namespace>-<name>.yaml` (offline_plan/helm/manifests.py uses
`release_prefix` below), and the checker reads the release from that file name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from common.untrusted import MAX_PACK_CONFIG_BYTES, InputLimitError, excerpt, read_text_file
from policies.registry import BY_NAME
from safe_yaml import YamlInputError, load_one

FILE_PREFIX = "helm"
_KEYS = {"release", "stacks", "policy", "objects", "reason", "source"}
_OBJECT = re.compile(r"^[A-Za-z][A-Za-z0-9]*/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_RELEASE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_STACK = re.compile(r"^[A-Za-z0-9_.-]+$")


class WaiverError(ValueError):
    """A waiver file that cannot be used; the message is one line naming the file, entry and key."""


def _part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text)


def release_prefix(namespace: str, name: str) -> str:
    """How every rendered file of release `namespace/name` begins."""
    return f"{FILE_PREFIX}.{_part(namespace)}.{_part(name)}."


@dataclass(frozen=True)
class Waiver:
    index: int
    """1-based position in the file, for messages."""
    release: str
    stacks: tuple[str, ...]
    policy: str
    objects: tuple[str, ...]
    reason: str
    source: str
    """A repository path (a file under charts/ at the pinned version) or URL that shows why."""

    @property
    def prefix(self) -> str:
        namespace, _, name = self.release.partition("/")
        return release_prefix(namespace, name)

    def label(self, obj: str) -> str:
        return f"waiver {self.index} ({self.release} {obj} {self.policy})"


def _text(path: str, index: int, entry: dict, key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise WaiverError(f"{path}: waiver {index}: '{key}' must be a non-empty string, not {excerpt(value)}")
    return value.strip()


def _strings(path: str, index: int, entry: dict, key: str, pattern: re.Pattern[str], form: str) -> tuple[str, ...]:
    value = entry.get(key)
    if not isinstance(value, list) or not value:
        raise WaiverError(f"{path}: waiver {index}: '{key}' must be a non-empty list of {form}")
    for item in value:
        if not isinstance(item, str) or not pattern.match(item):
            raise WaiverError(f"{path}: waiver {index}: '{key}' item {excerpt(item)} is not {form}")
    if len(set(value)) != len(value):
        raise WaiverError(f"{path}: waiver {index}: '{key}' lists an item twice")
    return tuple(value)


def parse(data: object, path: str) -> list[Waiver]:
    """The waivers of a loaded file; WaiverError on the first unusable entry."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise WaiverError(f"{path}: must be a YAML list of waivers (release, stacks, policy, objects, reason, source)")
    out: list[Waiver] = []
    seen: set[tuple[str, str, str, str]] = set()
    for index, entry in enumerate(data, start=1):
        if not isinstance(entry, dict):
            raise WaiverError(f"{path}: waiver {index} must be a mapping")
        unknown = sorted(str(k) for k in entry if k not in _KEYS)
        if unknown:
            raise WaiverError(
                f"{path}: waiver {index} has unknown key {excerpt(unknown[0])}; keys: {', '.join(sorted(_KEYS))}"
            )
        release = _text(path, index, entry, "release")
        if not _RELEASE.match(release):
            raise WaiverError(f"{path}: waiver {index}: 'release' {excerpt(release)} is not <namespace>/<release>")
        policy = _text(path, index, entry, "policy")
        if policy not in BY_NAME:
            raise WaiverError(f"{path}: waiver {index}: 'policy' {excerpt(policy)} is not a rule of the pack")
        waiver = Waiver(
            index=index,
            release=release,
            stacks=_strings(path, index, entry, "stacks", _STACK, "stack names"),
            policy=policy,
            objects=_strings(path, index, entry, "objects", _OBJECT, "Kind/name"),
            reason=_text(path, index, entry, "reason"),
            source=_text(path, index, entry, "source"),
        )
        for stack in waiver.stacks:
            for obj in waiver.objects:
                key = (stack, release, obj, policy)
                if key in seen:
                    raise WaiverError(f"{path}: {waiver.label(obj)} repeats an earlier waiver for stack {stack}")
                seen.add(key)
        out.append(waiver)
    return out


def load(path: str) -> list[Waiver]:
    try:
        text = read_text_file(path, MAX_PACK_CONFIG_BYTES, path)
        return parse(load_one(text, path), path)
    except (YamlInputError, InputLimitError) as err:
        raise WaiverError(str(err)) from None


def for_stack(waivers: list[Waiver], stack: str) -> list[Waiver]:
    return [w for w in waivers if stack in w.stacks]


@dataclass
class Applied:
    """What a stack's waivers did to a list of verdicts (any objects with `policy`, `kind`, `name`
    and `file`: policies.check.Verdict)."""

    kept: list[Any]
    waived: list[tuple[Any, Waiver]]
    stale: list[tuple[Waiver, str]]
    """(waiver, Kind/name) pairs that matched no finding."""

    def stale_lines(self, path: str) -> list[str]:
        return [
            f"{path}: {w.label(obj)}: matches no finding of this stack; remove it (or the stack from its 'stacks')"
            for w, obj in self.stale
        ]


def _matches(waiver: Waiver, verdict, obj: str) -> bool:
    file = os.path.basename(getattr(verdict, "file", None) or "")
    named = f"{verdict.kind}/{verdict.name}" == obj
    return verdict.policy == waiver.policy and named and file.startswith(waiver.prefix)


def apply(verdicts: list[Any], waivers: list[Waiver], stack: str) -> Applied:
    """Split `verdicts` into kept and waived by the waivers of `stack`; list the stale ones."""
    active = for_stack(waivers, stack)
    kept: list[Any] = []
    waived: list[tuple[Any, Waiver]] = []
    used: set[tuple[int, str]] = set()
    for verdict in verdicts:
        match = next(((w, o) for w in active for o in w.objects if _matches(w, verdict, o)), None)
        if match is None:
            kept.append(verdict)
            continue
        waived.append((verdict, match[0]))
        used.add((match[0].index, match[1]))
    stale = [(w, o) for w in active for o in w.objects if (w.index, o) not in used]
    return Applied(kept, waived, stale)
