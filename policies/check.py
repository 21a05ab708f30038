"""Manifest checker: run the pack's rules over plain Kubernetes YAML, without Pulumi.

    python -m policies.check [--config FILE.json] [--waivers FILE.yaml --stack NAME] [--json] PATH...

PATHs are files or folders (searched recursively for *.yaml / *.yml); multi-document files and
`List` kinds are read whole. Prints one line per violation (file, kind/name, container, policy,
level, message; the namespace follows kind/name as ` -n NAMESPACE` when the object sets one), or
with --json one object
{"resources": [{"file", "kind", "name", "namespace", "violations": [{"policy", "level", "message"}]}]}
with one entry per object read (in file order; two objects that differ only by namespace are two
entries). Exit status: 1 when a mandatory rule is violated, 0 otherwise, 2 on unusable input (a file
that is not a regular file of at most 64 MiB of UTF-8 YAML within the nesting and alias limits, a value
no API server takes such as NaN or an integer beyond int64) or a config that the pack's
PolicyConfigSchema would reject or that holds a non-finite or oversized number. FIFOs and devices in
a scanned folder are skipped with a note.

With --waivers and --stack, the findings on a Helm release's rendered files
(`helm.<namespace>.<release>.*.yaml`, as the offline plan writes them) that the file waives for that
stack are reported as waived, not as violations, and a waiver that matches no finding is an error
(exit 1): policies/waivers.py.

`check_objects(objects, config)` is the same check as a library call (the offline plan uses it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field

import jsonschema

from common.untrusted import (
    MAX_MANIFEST_FILE_BYTES,
    MAX_PACK_CONFIG_BYTES,
    InputLimitError,
    excerpt,
    file_kind,
    is_regular_file,
    loads_json,
    read_text_file,
)
from policies.objects import as_str
from policies.registry import BY_NAME, DISABLED, LEVELS, MANDATORY, RULES, level_and_config
from policies.resource import Resource, from_object
from policies.waivers import WaiverError
from policies.waivers import apply as apply_waivers
from policies.waivers import load as load_waivers
from safe_yaml import YamlInputError, go_reading, load_all
from safe_yaml.bounded import check_events, json_value_problems

# Largest magnitude a numeric setting may have: thresholds are seconds or counts, and beyond 2^53 a
# float no longer holds every integer.
MAX_SETTING_NUMBER = 2**53


class InputError(ValueError):
    """Input the checker cannot read; the message is one line naming the file/key and the fix."""


@dataclass
class Verdict:
    kind: str
    name: str
    policy: str
    level: str
    message: str
    file: str | None = None
    container: str | None = None
    namespace: str | None = None
    # The resource the verdict is about (by identity: the report groups verdicts with `is`, so two
    # objects that share file, kind and name, but not namespace, keep their own verdicts).
    resource: Resource | None = field(default=None, compare=False, repr=False)


def allowed_values(schema: dict) -> str:
    """A setting's JSON-schema property as words: "a number >= 0", "a boolean", "one of a, b"."""
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    # Keyed by whatever the schema's "type" holds (None when it has none).
    words: dict[object, str] = {
        "boolean": "a boolean",
        "number": "a number",
        "integer": "an integer",
        "string": "a string",
    }
    out = [words.get(schema.get("type"), f"a {schema.get('type', 'value')}")]
    for key, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if isinstance(schema.get(key), (int, float)) and not isinstance(schema.get(key), bool):
            out.append(f"{op} {schema[key]:g}")
    if isinstance(schema.get("minLength"), int):
        out.append(f"of at least {schema['minLength']} characters")
    return " ".join(out)


def _setting_is_valid(schema: dict, value) -> bool:
    # The same JSON-schema check the engine runs on PolicyConfigSchema properties (type, minimum, ...).
    return jsonschema.Draft7Validator(schema).is_valid(value)


def validate_config(config) -> dict:
    """Check a pack config against the rules' schemas; raise InputError naming the bad key."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise InputError('config must be a JSON object of {"policy-name": {"enforcementLevel": ..., ...}}')
    for key, value in config.items():
        if key != "all" and key not in BY_NAME:
            raise InputError(f"config names unknown policy {excerpt(key)}; known policies: {', '.join(BY_NAME)}")
        if isinstance(value, str):
            value = {"enforcementLevel": value}
        if not isinstance(value, dict):
            raise InputError(f"config['{key}'] must be an enforcement level string or an object")
        level = value.get("enforcementLevel")
        if level is not None and level not in LEVELS:
            raise InputError(f"config['{key}'].enforcementLevel is {excerpt(level)}; use one of {', '.join(LEVELS)}")
        rule = BY_NAME.get(key)
        for setting, setting_value in value.items():
            if setting == "enforcementLevel":
                continue
            if rule is None or setting not in rule.schema:
                known = ", ".join(rule.schema) if rule and rule.schema else "none"
                raise InputError(
                    f"config['{key}'] has unknown setting {excerpt(setting)}; settings of this policy: {known}"
                )
            schema = rule.schema[setting]
            # JSON Schema's "type: number" admits NaN, and every comparison with NaN is false: a NaN
            # threshold would silently turn its rule off. Infinity is no threshold either.
            if isinstance(setting_value, float) and not math.isfinite(setting_value):
                raise InputError(
                    f"config['{key}'].{setting} is {setting_value}; use a finite number ({allowed_values(schema)})"
                )
            if (
                isinstance(setting_value, int)
                and not isinstance(setting_value, bool)
                and abs(setting_value) > MAX_SETTING_NUMBER
            ):
                # The rules compare in floats; a 400-digit integer has no float.
                raise InputError(
                    f"config['{key}'].{setting} is {excerpt(setting_value)}; use a number of at most "
                    f"{MAX_SETTING_NUMBER:.0e} ({allowed_values(schema)})"
                )
            if not _setting_is_valid(schema, setting_value):
                raise InputError(
                    f"config['{key}'].{setting} must be {allowed_values(schema)}, not {excerpt(setting_value)}"
                )
    return config


def _effective_level(level: str) -> str:
    # Remediation is not implemented by these rules; the engine reports a remediate-level
    # violation as mandatory, and so does the checker.
    return MANDATORY if level == "remediate" else level


def _verdict(r: Resource, policy: str, level: str, finding: str) -> Verdict:
    namespace = r.namespace if r.is_kubernetes else None
    return Verdict(
        r.kind, r.name, policy, level, str(finding), r.file, getattr(finding, "container", None), as_str(namespace), r
    )


def check_resources(resources: list[Resource], config: dict | None = None) -> list[Verdict]:
    config = validate_config(config)
    verdicts: list[Verdict] = []
    for rule in RULES:
        level, settings = level_and_config(rule, config)
        if level == DISABLED:
            continue
        level = _effective_level(level)
        if rule.stack:
            for r, finding in rule.check(resources, settings):
                verdicts.append(_verdict(r, rule.name, level, finding))
            continue
        for r in resources:
            if rule.applies is not None and not rule.applies(r):
                continue
            for finding in rule.check(r, settings):
                verdicts.append(_verdict(r, rule.name, level, finding))
    return verdicts


def _flatten(obj: dict) -> list[dict]:
    kind = obj.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list):
        out = []
        for item in obj["items"]:
            if isinstance(item, dict):
                out.extend(_flatten(item))
        return out
    return [obj]


def check_objects(objects: list[dict], config: dict | None = None) -> list[Verdict]:
    """Run every rule (resource and stack rules) over `objects`.

    Each object is a Kubernetes object dict (camelCase, as in YAML), or a Pulumi-shaped record
    `{"type": "aws:eks/nodeGroup:NodeGroup", "name": "gpu", "props": {...camelCase inputs...}}` for
    cloud resources and Helm releases. `config` has the Pulumi pack-config shape. Raises ValueError
    (InputError) on a malformed config.
    """
    resources = []
    for obj in objects:
        for item in _flatten(obj):
            resources.append(from_object(item))
    return check_resources(resources, config)


def _yaml_files(path: str) -> list[str]:
    """The manifest files a PATH argument names: the file itself, or a folder's *.yaml / *.yml.

    Only regular files: a FIFO would block the read forever and a device would never end, so a
    folder's other entries are skipped (with a note) and a PATH naming one is refused.
    """
    if os.path.isdir(path):
        found = []
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith((".yaml", ".yml")):
                    continue
                full = os.path.join(root, name)
                if is_regular_file(full):
                    found.append(full)
                else:
                    print(f"check: {full}: skipped, {_kind(full)}", file=sys.stderr)
        if not found:
            raise InputError(f"{path}: folder holds no *.yaml or *.yml files; pass manifest files or a folder of them")
        return found
    if os.path.exists(path):
        if not is_regular_file(path):
            raise InputError(f"{path}: {_kind(path)}; pass manifest files or folders")
        return [path]
    raise InputError(f"{path}: no such file or folder; pass existing manifest files or folders")


def _kind(path: str) -> str:
    try:
        return f"is {file_kind(os.stat(path).st_mode)}, not a regular file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"


def load_file(path: str) -> list[Resource]:
    try:
        text = read_text_file(path, MAX_MANIFEST_FILE_BYTES)
        check_events(text, path)  # depth and aliases first: the walk below is then bounded
        # What kubectl would read differently from what this checker reads is refused, not guessed.
        disagreements = go_reading.disagreements(text, path, limit=3)
        if disagreements:
            raise InputError("; ".join(disagreements))
        docs = load_all(text, path)
    except YamlInputError as e:
        raise InputError(f"{e}; fix the YAML") from None
    except InputLimitError as e:
        raise InputError(str(e)) from None
    resources = []
    for index, doc in enumerate(docs, start=1):
        if doc is None:
            continue  # an empty document ('---' at the end of a file)
        if not isinstance(doc, dict):
            raise InputError(
                f"{path}: document {index} is a {type(doc).__name__}, not a mapping; every YAML "
                f"document must be one Kubernetes object"
            )
        # Values no API server accepts (a 400-digit integer, .nan) make the file unusable, and the
        # rules' arithmetic must never meet them.
        for where, problem in json_value_problems(doc, plain_only=False, limit=1):
            raise InputError(f"{path}: document {index}: {where}: {problem}; Kubernetes would refuse it")
        for item in _flatten(doc):
            if not isinstance(item.get("kind"), str):
                print(
                    f"check: {path}: document {index} has no 'kind'; skipped (not a Kubernetes object)", file=sys.stderr
                )
                continue
            resources.append(from_object(item, path))
    return resources


def _json_report(resources: list[Resource], verdicts: list[Verdict]) -> dict:
    # Verdicts carry the Resource object they are about; group by that identity, never by
    # (file, kind, name), which two objects in different namespaces can share.
    by_resource: dict[int, list[Verdict]] = {}
    for v in verdicts:
        by_resource.setdefault(id(v.resource), []).append(v)
    return {
        "resources": [
            {
                "file": r.file,
                "kind": r.kind,
                "name": r.name,
                "namespace": as_str(r.namespace) if r.is_kubernetes else None,
                "violations": [
                    {"policy": v.policy, "level": v.level, "message": v.message} for v in by_resource.get(id(r), [])
                ],
            }
            for r in resources
        ]
    }


def text_line(v: Verdict) -> str:
    """One violation as `file: Kind/name[ -n namespace]: container: policy [level]: message`."""
    ref = f"{v.kind}/{v.name}" + (f" -n {v.namespace}" if v.namespace else "")
    return f"{v.file}: {ref}: {v.container or '-'}: {v.policy} [{v.level}]: {v.message}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m policies.check",
        description="Check Kubernetes manifests against the llm-serving policy pack.",
        epilog="exit status: 0 no mandatory violation; 1 a mandatory violation; 2 "
        "unusable input (unreadable or oversized files, YAML past the nesting or "
        "alias limits, values no API server takes, a bad --config)",
    )
    parser.add_argument(
        "--config", metavar="FILE.json", help='per-policy settings, e.g. {"image-tag-pinned": {"requireDigest": true}}'
    )
    parser.add_argument(
        "--waivers", metavar="FILE.yaml", help="waivers of rendered chart findings (policies/config/waivers.yaml)"
    )
    parser.add_argument("--stack", metavar="NAME", help="the stack whose waivers apply (with --waivers)")
    parser.add_argument("--json", action="store_true", help="print one JSON report instead of lines")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="manifest files or folders")
    args = parser.parse_args(argv)
    if bool(args.waivers) != bool(args.stack):
        print("check: error: --waivers and --stack go together: name the waiver file and the stack", file=sys.stderr)
        return 2
    try:
        config = None
        if args.config:
            try:
                what = f"--config {args.config}"
                config = loads_json(
                    read_text_file(args.config, MAX_PACK_CONFIG_BYTES, what), what, max_bytes=MAX_PACK_CONFIG_BYTES
                )
            except InputLimitError as e:
                raise InputError(str(e)) from None
        config = validate_config(config)
        resources: list[Resource] = []
        for path in args.paths:
            for file in _yaml_files(path):
                resources += load_file(file)
        waivers = load_waivers(args.waivers) if args.waivers else []
        verdicts = check_resources(resources, config)
    except (InputError, WaiverError) as e:
        print(f"check: error: {e}", file=sys.stderr)
        return 2
    applied = apply_waivers(verdicts, waivers, args.stack or "")
    verdicts = applied.kept
    stale = applied.stale_lines(args.waivers) if args.waivers else []
    if args.json:
        report = _json_report(resources, verdicts)
        if args.waivers:
            report["waived"] = [
                {"file": v.file, "kind": v.kind, "name": v.name, "policy": v.policy, "waiver": w.index}
                for v, w in applied.waived
            ]
            report["staleWaivers"] = stale
        print(json.dumps(report, indent=2))
    else:
        for v in verdicts:
            print(text_line(v))
        for line in stale:
            print(f"check: {line}", file=sys.stderr)
        mandatory = sum(v.level == MANDATORY for v in verdicts)
        print(
            f"check: {_count(len(resources), 'resource')}, {_count(len(verdicts), 'violation')} "
            f"({mandatory} mandatory)" + (f", {len(applied.waived)} waived" if args.waivers else ""),
            file=sys.stderr,
        )
    return 1 if stale or any(v.level == MANDATORY for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
