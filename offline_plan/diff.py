"""The difference between two offline plans of one stack, as Markdown: what a pull request changes.

    python -m offline_plan.diff BASE_DIR HEAD_DIR      # each a build/<stack> folder of `make plan`

It reads each folder's plan.json (offline_plan/plan_json.py) and prints, in the order a reviewer decides: whether
the stack is deployable, the models and their numbers (TP, KV-cache tokens, replicas, startup budget), the GPUs and
their cost per hour, the policy verdicts that appear or go, the objects a `pulumi up` of HEAD over BASE creates,
updates, replaces (with the replace-on-change property, offline_plan/replace_on_change.json) or deletes, the images
and their digests, and the warnings. The PR workflow posts it as a comment per stack (.github/workflows/
pull-request.yml). Like the plan, it is not `pulumi preview`: values a cloud computes are placeholders on both sides.

Exit status: 0 the diff is printed (changes or none); 2 a folder or its plan.json is unusable (one line).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from common.untrusted import InputLimitError, loads_json, read_text_file
from offline_plan import plan_json, update_diff
from offline_plan.mock_runtime import Evaluation, RecordedResource

# A plan.json of the committed prod stack is about 0.5 MB; a file far beyond any real plan is refused, not parsed.
MAX_PLAN_JSON_BYTES = 64 * 1024 * 1024
# How a pull request comment finds itself again (the workflow updates the comment that holds it).
MARKER = "<!-- llm-serving offline plan diff: {stack} -->"


class PlanInputError(ValueError):
    """A folder or its plan.json cannot be read as a plan; the message is one line."""


def load(folder: Path) -> dict[str, Any]:
    """plan.json of `folder`, checked for the keys the diff reads."""
    path = folder / plan_json.FILENAME
    if not folder.is_dir():
        raise PlanInputError(f"{folder}: no such folder; give a build/<stack> folder written by `make plan`")
    if not path.is_file():
        raise PlanInputError(f"{path}: missing; write it with `python -m offline_plan --stack <stack>` (make plan)")
    try:
        data = loads_json(
            read_text_file(path, MAX_PLAN_JSON_BYTES, str(path)), str(path), max_bytes=MAX_PLAN_JSON_BYTES
        )
    except InputLimitError as err:
        raise PlanInputError(str(err).splitlines()[0]) from None
    if not isinstance(data, dict) or data.get("format") != plan_json.FORMAT:
        raise PlanInputError(f"{path}: not a plan summary ({plan_json.FORMAT!r}); write it again with `make plan`")
    for key, kind in (("stack", str), ("deployable", bool), ("models", list), ("gpus", list), ("verdicts", list)):
        if not isinstance(data.get(key), kind):
            raise PlanInputError(
                f"{path}: `{key}` is missing or not a {kind.__name__}; write it again with `make plan`"
            )
    for key in ("reasons", "images", "warnings", "resources"):
        if not isinstance(data.get(key), list):
            raise PlanInputError(f"{path}: `{key}` is missing or not a list; write it again with `make plan`")
    for where, problem in _row_problems(data):
        raise PlanInputError(f"{path}: `{where}` {problem}; write it again with `make plan`")
    return data


# What the diff reads of each object and image row (offline_plan/plan_json.py writes them): the key and its type.
RESOURCE_KEYS = ("urn", "type", "name", "kind", "label")
RESOURCE_OPTIONAL: tuple[tuple[str, type], ...] = (
    ("inputs", dict),
    ("custom", bool),
    ("replaceOnChanges", list),
    ("ignoreChanges", list),
)


def _row_problems(data: dict[str, Any]):
    """(`key[index].field`, what is wrong) for each row the diff cannot read, first one first."""
    for n, r in enumerate(data["resources"]):
        if not isinstance(r, dict):
            yield f"resources[{n}]", "is not an object"
            continue
        for key in RESOURCE_KEYS:
            if not isinstance(r.get(key), str):
                yield f"resources[{n}].{key}", "is missing or not a string"
        for key, kind in RESOURCE_OPTIONAL:
            if r.get(key) is not None and not isinstance(r[key], kind):
                yield f"resources[{n}].{key}", f"is not a {kind.__name__}"
        for key in ("replaceOnChanges", "ignoreChanges"):
            if isinstance(r.get(key), list) and not all(isinstance(p, str) for p in r[key]):
                yield f"resources[{n}].{key}", "holds something other than property paths (strings)"
    for n, r in enumerate(data["images"]):
        if not isinstance(r, dict) or "repository" not in r:
            continue  # not an image row; the diff leaves it out
        for key in ("repository", "tag"):
            if not isinstance(r.get(key), str):
                yield f"images[{n}].{key}", "is missing or not a string"
        if r.get("digest") is not None and not isinstance(r["digest"], str):
            yield f"images[{n}].digest", "is not a string"


def _value(v: Any) -> str:
    if v is None:
        return "unresolved"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def _keyed(rows: list[Any], key: str) -> dict[str, dict[str, Any]]:
    return {str(r[key]): r for r in rows if isinstance(r, dict) and key in r}


def _field_changes(title: str, key: str, base: list[Any], head: list[Any], fields: tuple[str, ...]) -> list[str]:
    """A table of what was added, removed or changed, one row per changed field."""
    old, new = _keyed(base, key), _keyed(head, key)
    rows = []
    for name in sorted(set(old) | set(new)):
        if name not in old:
            # A capacity field of a model without a load is not news (None is "unresolved" elsewhere).
            shown = ", ".join(
                f"{f} {_value(new[name].get(f))}"
                for f in fields
                if not (f in plan_json.CAPACITY_FIELDS and new[name].get(f) is None)
            )
            rows.append(f"| `{name}` | added | | {shown} |")
        elif name not in new:
            rows.append(f"| `{name}` | removed | | |")
        else:
            rows += [
                f"| `{name}` | {f} | {_value(old[name].get(f))} | {_value(new[name].get(f))} |"
                for f in fields
                if old[name].get(f) != new[name].get(f)
            ]
    out = [f"### {title}", ""]
    if not rows:
        return [*out, "No change.", ""]
    return [*out, f"| {key} | what | base | head |", "|---|---|---|---|", *rows, ""]


def _set_changes(title: str, base: list[str], head: list[str]) -> list[str]:
    added, removed = sorted(set(head) - set(base)), sorted(set(base) - set(head))
    out = [f"### {title}", ""]
    if not added and not removed:
        return [*out, "No change.", ""]
    return [*out, *(f"- added: {a}" for a in added), *(f"- gone: {r}" for r in removed), ""]


def _evaluation(data: dict[str, Any]) -> Evaluation:
    resources = [
        RecordedResource(
            type=str(r["type"]),
            name=str(r["name"]),
            inputs=r["inputs"] if isinstance(r.get("inputs"), dict) else {},
            provider=None,
            custom=bool(r.get("custom")),
            urn=str(r["urn"]),
            replace_on_changes=tuple(r.get("replaceOnChanges") or ()),
            ignore_changes=tuple(r.get("ignoreChanges") or ()),
        )
        for r in data["resources"]
        if isinstance(r, dict) and {"type", "name", "urn"} <= set(r)
    ]
    return Evaluation(stack=str(data["stack"]), resources=resources)


def _objects(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    """What `pulumi up` of HEAD over BASE creates, updates, replaces and deletes, by kind and name."""
    before = {str(r["urn"]): (str(r["kind"]), str(r["label"])) for r in base["resources"]}
    labels = {**before, **{str(r["urn"]): (str(r["kind"]), str(r["label"])) for r in head["resources"]}}
    changes = [c for c in update_diff.classify(_evaluation(base), _evaluation(head)).values() if c.kind != "same"]
    out = ["### Objects", ""]
    if not changes:
        return [*out, "No object is created, changed or deleted.", ""]
    order = {"replace": 0, "delete": 1, "create": 2, "update": 3}
    changes.sort(key=lambda c: (order[c.kind], labels[c.urn]))
    counts = {kind: sum(1 for c in changes if c.kind == kind) for kind in order}
    out += [
        (
            f"{counts['create']} created, {counts['update']} updated, {counts['replace']} replaced, "
            f"{counts['delete']} deleted."
        ),
        "",
        "| change | kind | name | why (replace: the replace-on-change property; update: what changed) |",
        "|---|---|---|---|",
    ]
    shown = 6
    for c in changes:
        kind, label = labels[c.urn]
        # A Kubernetes object whose name changes (a mirror Job named after its revision) keeps its Pulumi name.
        shown_name = (
            f"`{label}`" if before.get(c.urn, labels[c.urn])[1] == label else f"`{before[c.urn][1]}` -> `{label}`"
        )
        if c.kind == "replace":
            why = ", ".join(f"`{f}`" for f in c.forced)
        elif c.kind == "update":
            why = ", ".join(f"`{p}`" for p in c.paths[:shown]) + (
                f", and {len(c.paths) - shown} more" if len(c.paths) > shown else ""
            )
        else:
            why = ""
        cell = why.replace("|", "\\|")
        out.append(f"| {c.kind} | {kind} | {shown_name} | {cell} |")
    return [*out, ""]


def _images(base: list[Any], head: list[Any]) -> list[str]:
    def ref(r: dict[str, Any]) -> str:
        return f"`{r['repository']}:{r['tag']}`" + (f" @ `{r['digest']}`" if r.get("digest") else " (no digest)")

    def of(rows: list[Any]) -> dict[str, str]:
        return {str(r.get("usedBy")): ref(r) for r in rows if isinstance(r, dict) and "repository" in r}

    old, new = of(base), of(head)
    rows = [
        f"| {used} | {old.get(used, '-')} | {new.get(used, '-')} |"
        for used in sorted(set(old) | set(new))
        if old.get(used) != new.get(used)
    ]
    out = ["### Images and digests", ""]
    if not rows:
        return [*out, "No change.", ""]
    return [*out, "| used by | base | head |", "|---|---|---|", *rows, ""]


def render(base: dict[str, Any], head: dict[str, Any]) -> str:
    stack = str(head["stack"])
    out = [MARKER.format(stack=stack), f"## Offline plan diff: stack `{stack}`", ""]
    if base["stack"] != head["stack"]:
        out += [f"(base is stack `{base['stack']}`, head is stack `{stack}`)", ""]
    out += [
        (
            "Base branch against this pull request, both planned offline (`make plan`: the Pulumi SDK's mock "
            "runtime, no cloud); not `pulumi preview`: values a cloud computes are placeholders on both sides."
        ),
        "",
    ]

    def verdict(d: dict[str, Any]) -> str:
        return "deployable" if d["deployable"] else "not deployable"

    line = f"**{verdict(base)}** -> **{verdict(head)}**" if base["deployable"] != head["deployable"] else None
    out.append(f"Deployable: {line}" if line else f"Deployable: unchanged (**{verdict(head)}**)")
    out += [f"- {r}" for r in head["reasons"] if isinstance(r, str)]
    out.append("")
    out += _field_changes("Models", "model", base["models"], head["models"], plan_json.MODEL_FIELDS)
    out += _field_changes(
        "GPUs and cost per hour (US dollars)", "pool", base["gpus"], head["gpus"], plan_json.GPU_FIELDS
    )

    def findings(d: dict[str, Any]) -> list[str]:
        return [
            f"{v.get('level')} `{v.get('policy')}` on {v.get('resource')}: {v.get('message')}"
            for v in d["verdicts"]
            if isinstance(v, dict)
        ]

    out += _set_changes("Policy verdicts", findings(base), findings(head))
    out += _objects(base, head)
    out += _images(base["images"], head["images"])
    out += _set_changes("Warnings", [str(w) for w in base["warnings"]], [str(w) for w in head["warnings"]])
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m offline_plan.diff", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("base", type=Path, help="build/<stack> of the base (plan.json inside)")
    parser.add_argument("head", type=Path, help="build/<stack> of the change (plan.json inside)")
    args = parser.parse_args(argv)
    try:
        base, head = load(args.base), load(args.head)
        text = render(base, head)
    except PlanInputError as err:
        print(f"offline plan diff: {err}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, AttributeError) as err:  # a plan.json with the right keys but wrong shapes inside
        print(
            f"offline plan diff: a plan.json has an unexpected shape ({type(err).__name__}: {err}); "
            "write both again with `make plan`",
            file=sys.stderr,
        )
        return 2
    try:
        print(text)
    except BrokenPipeError:  # the reader stopped early (`| head`): nothing left to say
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
