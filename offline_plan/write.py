"""`make plan`: evaluate a stack offline and write what it would ask for.

    python -m offline_plan --stack dev [--out build]

This is NOT `pulumi preview`. It runs the real program under the Pulumi SDK's mock runtime, with
no CLI, no credentials and no cloud: Helm charts are not rendered, values a cloud computes (IDs,
endpoints, ARNs) are placeholders, and encrypted secrets are never decrypted. What it does show is
exactly what the program asks for: every Kubernetes object as YAML, the resource tree, the sizing
of every model and the policy pack's verdicts on all of it.

Exit status: 0 planned; 1 a mandatory policy violation; 2 the stack file or its config is unusable
(one line per problem naming the stack file and the key; limits in docs/hostile-input.md).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from common.untrusted import excerpt
from offline_plan.mock_runtime import ROOT, STACK_NAME_RE, Evaluation, evaluate_stack, redact_secrets, whole_numbers
from policies.check import check_objects

NOT_PREVIEW = (
    "Offline plan, not `pulumi preview`: evaluated with the Pulumi SDK's mock runtime; Helm charts are "
    "not rendered, cloud-computed values are placeholders and secrets stay encrypted."
)


def manifest_filename(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    parts = [obj.get("kind", "Object"), meta.get("namespace", ""), meta.get("name", "unnamed")]
    return "-".join(re.sub(r"[^A-Za-z0-9.-]+", "_", p) for p in parts if p) + ".yaml"


def write_manifests(objects: list[dict[str, Any]], directory: Path) -> list[Path]:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    written = []
    for obj in objects:
        path = directory / manifest_filename(obj)
        n = 2
        while path in written:
            path = path.with_name(f"{path.stem}-{n}.yaml")
            n += 1
        # Conventional order: apiVersion, kind, metadata first, as people write manifests.
        head = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
        ordered = {**head, **{k: v for k, v in obj.items() if k not in head}}
        path.write_text(yaml.safe_dump(ordered, sort_keys=False, default_flow_style=False))
        written.append(path)
    return written


def policy_verdicts(evaluation: Evaluation) -> list[Any]:
    """Run the policy pack over the Kubernetes objects and cloud resources the program asks for."""
    # Kubernetes objects go in as the dicts the API server would get; cloud resources and Helm
    # releases as the engine's (type, name, props) records, so pool and bucket rules run too.
    cloud = [
        {"type": r.type, "name": r.name, "props": whole_numbers(redact_secrets(r.inputs))}
        for r in evaluation.resources
        if r.custom and not r.is_kubernetes_object
    ]
    return list(check_objects(evaluation.kubernetes_objects + cloud))


SUMMARY_COLUMNS = ["model", "revision", "pool", "gpu", "tensorParallelSize", "pipelineParallelSize",
                   "minReplicas", "maxReplicas", "maxModelLen", "kvCacheTokens", "startupBudgetSeconds"]


def _markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    return lines


def _model_story(row: dict[str, Any]) -> list[str]:
    """Where one model's numbers come from, in the order the sizing derives them."""
    gpus = row["tensorParallelSize"] * row["pipelineParallelSize"]
    lines = [
        f"### {row['model']}",
        "",
        f"- **Weights**: `{row['repo']}` at `{row['revision']}`, {row['weightsGiB']} GiB in total, "
        f"{row['weightsGiBPerGpu']} GiB on each of {gpus} {row['gpu']} GPU(s).",
        f"- **Memory per GPU**: {row['gpuMemoryGiB']} GiB CUDA total x {row['gpuMemoryUtilization']} = "
        f"{row['requestedGiBPerGpu']} GiB for vLLM: weights {row['weightsGiBPerGpu']} + activations "
        f"{row['activationGiB']} + non-torch {row['nonTorchGiB']} + CUDA graphs {row['cudaGraphGiB']} + "
        f"KV cache {row['kvCacheGiBPerGpu']} GiB.",
        f"- **KV cache**: {row['kvCacheTokens']:,} tokens, room for {row['maxConcurrency']} requests of "
        f"{row['maxModelLen']:,} tokens at once.",
        f"- **Start-up**: about {row['loadSecondsEstimate']} s (weights read from the {row['loadFrom']} at "
        f"{row['readMBps']} MB/s, plus engine start-up); the startup probe allows {row['startupBudgetSeconds']} s "
        f"(1.5 x the estimate, at least 300 s"
        + (f", plus {row['workerWaitSeconds']} s for the other nodes of the replica to join" if row["workerWaitSeconds"] else "")
        + ").",
        "",
    ]
    return lines


def render_plan(evaluation: Evaluation, verdicts: list[Any], manifests: list[Path]) -> str:
    out = [f"# Offline plan: stack `{evaluation.stack}`", "", f"> {NOT_PREVIEW}", ""]
    table = evaluation.outputs.get("sizing") or []
    out += ["## Models", ""]
    if table:
        out += _markdown_table(table, SUMMARY_COLUMNS)
        out.append("")
        for row in table:
            out += _model_story(row)
    else:
        out.append("(the program exported no sizing table)")
    pools = evaluation.outputs.get("pools") or []
    if pools:
        out += ["## GPU pools", ""] + _markdown_table(pools, list(pools[0])) + [""]
    warnings = list(evaluation.outputs.get("warnings") or [])
    warnings += [
        f"`{key}` is not set in Pulumi.{evaluation.stack}.yaml; this plan used a placeholder. Before `pulumi up`: "
        f"`pulumi config set --secret {key} ... -s {evaluation.stack}`"
        for key in evaluation.assumed_secrets
    ]
    if warnings:
        out += ["## Warnings", ""] + [f"- {w}" for w in warnings]
    out += ["", "## Policy verdicts", ""]
    mandatory = [v for v in verdicts if v.level == "mandatory"]
    if not verdicts:
        out.append("No violations.")
    else:
        out.append(f"{len(mandatory)} mandatory, {len(verdicts) - len(mandatory)} advisory.")
        out.append("")
        out.append("| level | policy | resource | message |")
        out.append("|---|---|---|---|")
        for v in verdicts:
            out.append(f"| {v.level} | {v.policy} | {v.kind}/{v.name} | {v.message} |")
    out += ["", f"## Resources ({len(evaluation.resources)})", "", "```"]
    for depth, type_, name in evaluation.tree():
        out.append(f"{'  ' * depth}{type_}  {name}")
    out += ["```", "", f"## Kubernetes manifests ({len(manifests)})", ""]
    out += [f"- `manifests/{p.name}`" for p in manifests]
    out.append("")
    return "\n".join(out)


def run(stack: str, out_dir: Path, project_dir: Path = ROOT) -> int:
    """Exit status: 0 planned, 1 a mandatory policy violation, 2 the stack file or config is unusable."""
    try:
        evaluation = evaluate_stack(stack, project_dir)
    except Exception as err:  # noqa: BLE001 every failure becomes a message, not a traceback
        problems = getattr(err, "problems", None) or (str(err).strip() or type(err).__name__).splitlines()
        shown = stack if STACK_NAME_RE.fullmatch(stack) else excerpt(stack)
        print(f"plan failed for stack {shown}:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 2
    stack_dir = out_dir / stack
    manifests = write_manifests(evaluation.kubernetes_objects, stack_dir / "manifests")
    verdicts = policy_verdicts(evaluation)
    (stack_dir / "plan.md").write_text(render_plan(evaluation, verdicts, manifests))
    mandatory = [v for v in verdicts if v.level == "mandatory"]
    print(NOT_PREVIEW)
    print(f"stack {stack}: {len(evaluation.resources)} resources, {len(manifests)} Kubernetes objects, "
          f"{len(verdicts)} policy findings ({len(mandatory)} mandatory)")
    for row in evaluation.outputs.get("sizing") or []:
        print(f"  {row['model']}: TP {row['tensorParallelSize']} x PP {row['pipelineParallelSize']} on {row['gpu']}, "
              f"{row['kvCacheTokens']:,} KV-cache tokens ({row['maxConcurrency']} requests of {row['maxModelLen']:,}), "
              f"startup budget {row['startupBudgetSeconds']} s")
    for v in mandatory:
        print(f"  MANDATORY {v.policy}: {v.kind}/{v.name}: {v.message}")
    print(f"wrote {stack_dir / 'plan.md'} and {len(manifests)} manifests in {stack_dir / 'manifests'}")
    return 1 if mandatory else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offline_plan", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default dev)")
    parser.add_argument("--out", type=Path, default=ROOT / "build", help="output folder (default build/)")
    args = parser.parse_args(argv)
    return run(args.stack, args.out)


if __name__ == "__main__":
    sys.exit(main())
