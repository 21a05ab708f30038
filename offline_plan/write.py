"""`make plan`: evaluate a stack offline and write what it would ask for.

    python -m offline_plan --stack dev [--out build]

This is NOT `pulumi preview`. It runs the real program under the Pulumi SDK's mock runtime, with
no CLI, no credentials and no cloud: Helm charts are rendered offline from charts/, values a cloud computes (IDs,
endpoints, ARNs) are placeholders, and encrypted secrets are never decrypted. What it does show is
exactly what the program asks for: every Kubernetes object as YAML, the resource tree, the sizing
of every model and the policy pack's verdicts on all of it.

Exit status: 0 planned; 1 a mandatory policy violation, or an internal error (a defect of the program,
said as "internal error"); 2 the stack file or its config is unusable (one line per problem naming
the stack file and the key; limits in docs/hostile-input.md).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from common import images, pod_security
from common.untrusted import excerpt, loads_json, read_text_file
from components.model_store import store
from components.serving import kserve, writable
from offline_plan import (
    deployer_report,
    failures,
    helm,
    lifecycle,
    object_names,
    placeholders,
    plan_json,
    review,
    update_diff,
)
from offline_plan.capacity import capacity_section
from offline_plan.controllers import controllers_section
from offline_plan.credentials import credentials_section
from offline_plan.gpu_stack import gpu_stack_section
from offline_plan.helm import policy as helm_policy
from offline_plan.mock_runtime import ROOT, STACK_NAME_RE, Evaluation, evaluate_stack, redact_secrets, whole_numbers
from offline_plan.waits import GITHUB_HOSTED_JOB_LIMIT_MINUTES, WORKFLOW_SETUP_SECONDS, chain_table
from policies.check import check_objects
from policies.workloads import workload
from safe_yaml.go_reading import dump_for_go
from stack_config.errors import ConfigError
from stack_config.loader import PROJECT
from stack_config.policy_config import PACK_CONFIG_FOLDER, POLICY_CONFIG_KEY, pack_config_choice

NOT_PREVIEW = (
    "Offline plan, not `pulumi preview`: evaluated with the Pulumi SDK's mock runtime; Helm charts are "
    "rendered offline from charts/, cloud-computed values are placeholders and secrets stay encrypted."
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
        head: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
        ordered = {**head, **{k: v for k, v in obj.items() if k not in head}}
        path.write_text(dump_for_go(ordered))
        written.append(path)
    return written


PACK_CONFIG_DIR = Path(PACK_CONFIG_FOLDER)
MAX_PACK_CONFIG_BYTES = 64 * 1024


def named_pack_config(config: dict[str, str]) -> str | None:
    """The pack config a stack file names (`policyConfig`, validated with the rest of the stack file)."""
    return config.get(f"{PROJECT}:{POLICY_CONFIG_KEY}") or None


def pack_config(stack: str, project_dir: Path = ROOT, named: str | None = None) -> dict[str, Any] | None:
    """The policy pack's config for this stack (the one its stack file names, else
    policies/config/<stack>.json), as the workflows pass it to `pulumi preview`/`up`; None (the pack's
    defaults) when the stack names none and has no file of its own. A named file that does not exist
    is an error: the stack asked for settings it would not get."""
    choice = pack_config_choice(stack, named)
    path = project_dir / choice.path
    if not path.exists():
        if choice.named:
            raise ConfigError([f"Pulumi.{stack}.yaml: {POLICY_CONFIG_KEY}: {choice.path} does not exist"])
        return None
    return loads_json(
        read_text_file(path, MAX_PACK_CONFIG_BYTES, choice.path), choice.path, max_bytes=MAX_PACK_CONFIG_BYTES
    )


def _pack_config_line(stack: str, config: dict[str, Any] | None, named: str | None = None) -> str:
    """Which pack config the verdicts used and why: the stack file names it, or the stack's own by its
    name; without either the pack's defaults apply, which is said, not silent."""
    choice = pack_config_choice(stack, named)
    if config is None:
        return (
            f"Pack config: none (`{choice.path}` does not exist and Pulumi.{stack}.yaml sets no "
            f"`{POLICY_CONFIG_KEY}`), so the pack's defaults apply: image digests are not required. Name one with "
            f"`{POLICY_CONFIG_KEY}: {PACK_CONFIG_DIR / 'prod.json'}` in the stack file for a production stack, or "
            f"create `{choice.path}`."
        )
    digests = "; image digests required" if requires_digest(config) else ""
    return f"Pack config: `{choice.path}` ({choice.why(stack)}{digests})."


def requires_digest(config: dict[str, Any] | None) -> bool:
    rule = (config or {}).get("image-tag-pinned")
    return isinstance(rule, dict) and rule.get("requireDigest") is True


def policy_verdicts(evaluation: Evaluation, config: dict[str, Any] | None = None) -> list[Any]:
    """Run the policy pack, with the stack's pack config, over the Kubernetes objects and cloud
    resources the program asks for."""
    # Kubernetes objects go in as the dicts the API server would get; cloud resources and Helm
    # releases as the engine's (type, name, props) records, so pool and bucket rules run too.
    cloud = [
        {"type": r.type, "name": r.name, "props": whole_numbers(redact_secrets(r.inputs))}
        for r in evaluation.resources
        if r.custom and not r.is_kubernetes_object
    ]
    return list(check_objects(evaluation.kubernetes_objects + cloud, config))


def _deployed_images(evaluation: Evaluation) -> set[str]:
    """Every image reference the stack's pods and the Helm values carry (any "image" string, the
    picker's and the add-ons' image mappings, the GPU Operator's operands)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            image = value.get("image")
            if (
                isinstance(image, str)
                and isinstance(value.get("repository"), str)
                and isinstance(value.get("version"), str)
            ):
                # The GPU Operator's operand style (components/operators/values.py operand_image):
                # `repository/image@version` for a digest, else `repository/image:version`. An operand
                # turned off (`enabled: false`, the MIG manager on GKE) pulls nothing.
                if value.get("enabled") is False:
                    return
                sep = "@" if value["version"].startswith("sha256:") else ":"
                found.add(f"{value['repository']}/{image}{sep}{value['version']}")
            elif isinstance(image, str):
                found.add(image)
                if isinstance(value.get("tag"), str) and value["tag"]:
                    # KServe's controller: `image` and `tag` side by side, joined "image:tag".
                    found.add(f"{image}:{value['tag']}")
            if isinstance(value.get("repository"), str) and isinstance(value.get("tag"), str) and value["tag"]:
                # An add-on chart's image mapping (components/addons: KEDA, LWS, cert-manager, Prometheus):
                # [registry/]repository:tag[@digest], as those charts' templates join them.
                registry = value.get("registry")
                # cert-manager names it `digest`; kube-prometheus-stack `sha`, the hex alone.
                # kube-state-metrics takes the whole "sha256:..." there.
                sha = value.get("sha") if isinstance(value.get("sha"), str) and value.get("sha") else None
                digest = value.get("digest") or (
                    None if sha is None else sha if sha.startswith("sha256:") else f"sha256:{sha}"
                )
                found.add(
                    (f"{registry}/" if isinstance(registry, str) and registry else "")
                    + f"{value['repository']}:{value['tag']}"
                    + (f"@{digest}" if isinstance(digest, str) else "")
                )
            elif isinstance(image, dict) and isinstance(image.get("registry"), str):
                found.add(f"{image['registry']}/{image.get('repository')}:{image.get('tag')}")
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(evaluation.kubernetes_objects)
    walk([r.inputs.get("values") for r in evaluation.resources if r.type == "kubernetes:helm.sh/v3:Release"])
    return found


def _in_stack(image: images.Image, deployed: set[str]) -> bool:
    # Matched on repository and tag, through a digest or a pull-through cache prefix; or on
    # repository and digest where a chart takes the digest in place of the tag (GPU Operator).
    by_digest = f"{image.repository}@{image.digest.value}" if image.resolved else None
    return any(
        ref == by_digest
        or ref.partition("@")[0] == image.tagged
        or ref.partition("@")[0].endswith("/" + image.tagged)
        or ref.partition("@")[0].endswith("/" + images.split_reference(image.tagged)[1] + ":" + image.tag)
        for ref in deployed
    )


def missing_digests(evaluation: Evaluation) -> list[str]:
    """The images this stack deploys that have no known digest (common/images.py), each once."""
    deployed = _deployed_images(evaluation)
    return list(dict.fromkeys(i.tagged for i in images.unresolved() if _in_stack(i, deployed)))


def image_rows(evaluation: Evaluation) -> list[dict[str, Any]]:
    """The image table's rows this stack deploys (common/images.py): reference, digest (None while unresolved) and
    who uses it; for plan.json."""
    deployed = _deployed_images(evaluation)
    rows = [
        {"repository": i.repository, "tag": i.tag, "digest": i.digest.value, "usedBy": i.used_by}
        for i in images.IMAGES.values()
        if _in_stack(i, deployed)
    ]
    return sorted(rows, key=lambda r: (r["repository"], r["tag"], r["usedBy"]))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _images_section(evaluation: Evaluation, config: dict[str, Any] | None) -> list[str]:
    """Every image of the program's table (common/images.py): what is pinned by digest, what is not,
    and which of them this stack deploys."""
    deployed = _deployed_images(evaluation)
    out = ["## Images", "", "| image | tag | digest | in this stack | source | used by |", "|---|---|---|---|---|---|"]
    for image in images.IMAGES.values():
        digest = image.digest.value  # None while unresolved
        if digest is None:
            state = "**unresolved**"
        else:
            state = f"`{digest[:19]}...`" + ("" if image.digest.established else " (unverified)")
        used = "yes" if _in_stack(image, deployed) else "no"
        out.append(
            f"| `{image.repository}` | `{image.tag}` | {state} | {used} | {_cell(image.digest.source)} | "
            f"{_cell(image.used_by)} |"
        )
    out.append("")
    missing = [i for i in images.unresolved() if _in_stack(i, deployed)]
    unverified = [i for i in images.unverified() if _in_stack(i, deployed)]
    if missing:
        names = ", ".join(dict.fromkeys(f"`{i.tagged}`" for i in missing))
        if requires_digest(config):
            pack_path = pack_config_choice(evaluation.stack, named_pack_config(evaluation.config)).path
            out.append(
                f"**NOT DEPLOYABLE with requireDigest ({pack_path}) until resolved**: "
                f"{names} (no known digest). On a machine that can reach the registries run "
                f"`{images.RESOLVE_COMMAND}`, review the diff of common/images.py and commit it."
            )
        else:
            out.append(f"Deployed by tag only (no known digest): {names}. Settle with `{images.RESOLVE_COMMAND}`.")
        out.append("")
    if unverified:
        out.append(
            "Digests read in a published list, not yet from the registry (verify with the same command): "
            + ", ".join(f"`{i.tagged}`" for i in unverified)
            + "."
        )
        out.append("")
    out.append(
        "Every image the Helm releases render where the chart takes an image setting comes from this table "
        "(the add-ons, the GPU Operator with its operands and Node Feature Discovery, Karpenter, the EFA device "
        "plugin), through the stack's pull-through cache where it has one; each counts as in this stack only "
        'where the stack installs it. The pack checks the rendered pods too ("Policy verdicts over rendered '
        "charts\"); tests/offline_plan/test_rendered_chart_images.py lists the operands the GPU Operator's "
        "ClusterPolicy names but no stack here runs."
    )
    out.append("")
    return out


# plan.md's "Models" table: the numbers plan.json carries for the diff, one source for both.
SUMMARY_COLUMNS = ["model", *plan_json.TABLE_FIELDS]


def _markdown_table(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    return lines


def _interconnect_note(row: dict[str, Any]) -> str:
    """What the non-torch memory is, by what joins the replica's GPUs (planner/sizing.py)."""
    kind = row.get("interconnect", "single")
    if row["tensorParallelSize"] == 1:
        return "CUDA workspaces" + ("; unified memory counts the host's growth too" if kind == "unified" else "")
    return {
        "nvswitch": "NCCL over NVSwitch, with NVLS buffers on Hopper and newer",
        "pcie": "NCCL ring buffers over PCIe",
    }.get(kind, f"NCCL over {kind}")


def _model_story(row: dict[str, Any]) -> list[str]:
    """Where one model's numbers come from, in the order the sizing derives them."""
    gpus = row["tensorParallelSize"] * row["pipelineParallelSize"]
    return [
        f"### {row['model']}",
        "",
        (
            f"- **Weights**: `{row['repo']}` at `{row['revision']}`, {row['weightsGiB']} GiB in total, "
            f"{row['weightsGiBPerGpu']} GiB on each of {gpus} {row['gpu']} GPU(s)."
        ),
        f"- **Memory per GPU**: {row['gpuMemoryGiB']} GiB CUDA total x {row['gpuMemoryUtilization']} = "
        f"{row['requestedGiBPerGpu']} GiB for vLLM: weights {row['weightsGiBPerGpu']} + "
        + (f"LoRA slots {row['loraGiBPerGpu']} + " if row.get("loraGiBPerGpu") else "")
        + "activations "
        f"{row['activationGiB']} + non-torch {row['nonTorchGiB']} ({_interconnect_note(row)}) + CUDA graphs "
        f"{row['cudaGraphGiB']} + KV cache {row['kvCacheGiBPerGpu']} GiB"
        + ("" if row.get("cudaTotalConfirmed", True) else " (the CUDA total is not confirmed by a cited log)")
        + ".",
        (
            f"- **KV cache**: {row['kvCacheTokens']:,} tokens, room for {row['maxConcurrency']} requests of "
            f"{row['maxModelLen']:,} tokens at once."
        ),
        *(
            [
                (
                    f"- **LoRA adapters**: {', '.join(f'`{a}`' for a in row['adapters'])}, every one loaded on "
                    f"every replica (--max-loras {len(row['adapters'])}, --max-lora-rank {row['maxLoraRank']} "
                    f"from their adapter_config.json); their slots take {row['loraGiBPerGpu']} GiB per GPU out of the "
                    "KV cache."
                )
            ]
            if row.get("adapters")
            else []
        ),
        f"- **Start-up**: about {row['loadSecondsEstimate']} s (weights read from the {row['loadFrom']} at "
        f"{row['readMBps']} MB/s, plus engine start-up); the startup probe allows {row['startupBudgetSeconds']} s "
        f"(1.5 x the estimate, at least 300 s"
        + (
            f", plus {row['workerWaitSeconds']} s for the other nodes of the replica to join"
            if row["workerWaitSeconds"]
            else ""
        )
        + ")."
        + (
            f" A rollout may take {row['rolloutDeadlineSeconds']} s, including {row['nodeProvisioningSeconds']} s for "
            "a node to be launched (the pool may have to grow for it)."
            if row.get("nodeProvisioningSeconds")
            else (
                f" A rollout may take {row['rolloutDeadlineSeconds']} s." if row.get("rolloutDeadlineSeconds") else ""
            )
        ),
        *(
            [
                f"- **Provenance**: {row['provenance']}"
                + (
                    f" (the sha256 start check is {row['startCheckSeconds']} s of the estimate)"
                    if row.get("startCheckSeconds")
                    else ""
                )
                + "."
            ]
            if row.get("provenance")
            else []
        ),
        "",
    ]


PLATFORM_LABELS = {
    "vpc": "Network",
    "zones": "Zones",
    "nodeSubnets": "Node subnets",
    "nat": "NAT",
    "autoscaler": "Node autoscaler",
    "nodeImage": "Node image",
    "apis": "Google APIs enabled",
    "apisByHand": "APIs to enable once by hand",
    "gatewayApi": "Gateway API (the entrance's Gateway controller)",
    "apiEndpoint": "Kubernetes API endpoint",
    "secretsEncryption": "Secrets encryption",
}


def _network_policy_section(summary: dict[str, Any]) -> list[str]:
    """The serving namespace's NetworkPolicies, and the facts they rest on that are not yet settled."""
    out = ["## Network policies (serving namespace)", ""]
    out.append(f"- **Policies**: {', '.join(summary.get('policies') or []) or 'none'}")
    for fact in summary.get("unresolved") or []:
        out.append(f"- **Unresolved**: {fact}")
    return [*out, ""]


def _platform_section(platform: dict[str, Any]) -> list[str]:
    """Network, NAT, autoscaler, APIs and each pool's nodes, as the cluster layer built them."""
    out = ["## Cluster platform (network, NAT, node autoscaling)", ""]
    for key, label in PLATFORM_LABELS.items():
        if key in platform:
            value = platform[key]
            out.append(f"- **{label}**: `{value}`" if key == "apisByHand" else f"- **{label}**: {value}")
    pools = platform.get("pools") or []
    if pools:
        out += ["", *_markdown_table(pools, list(pools[0]))]
    return [*out, ""]


def _driver_section(rows: list[dict[str, Any]]) -> list[str]:
    """Engine CUDA against the nodes' NVIDIA driver; what is not established, and how to settle it."""
    out = ["## NVIDIA driver and engine CUDA", ""]
    out += [*_markdown_table(rows, ["model", "pool", "engineCuda", "driver", "verdict"]), ""]
    unresolved = sorted({cmd for row in rows for cmd in row.get("toResolve", "").split(" | ") if cmd})
    if unresolved:
        out += [
            (
                "Not established here (checked with the best evidence; run these where the tool or cloud is "
                "available and update common/engine.py or common/driver_versions.py):"
            ),
            "",
        ]
        out += [f"- `{cmd}`" for cmd in unresolved] + [""]
    sources = sorted({src for row in rows for src in row.get("sources", "").split(" | ") if src})
    out += ["Sources: " + "; ".join(sources), ""]
    return out


def _addons_section(rows: list[dict[str, Any]]) -> list[str]:
    """The add-ons the stack's custom resources stand on, each with its version and why it is needed."""
    out = ["## Add-ons", ""]
    if not rows:
        return [*out, "None: the stack creates no custom resources that need one.", ""]
    out += ["| add-on | version | how | why |", "|---|---|---|---|"]
    for row in rows:
        out.append(
            f"| {row['title']} (`{row['addon']}`) | {row['version']} | {row['how']} | {'; '.join(row['reasons'])} |"
        )
    return [*out, ""]


ENTRANCE_LABELS = {
    "baseUrl": "Base URL (every model and adapter)",
    "models": "Model names",
    "aliases": "Aliases (rewritten by the endpoint picker)",
    "gateway": "Gateway",
    "implementation": "Implementation",
    "gatewayClass": "GatewayClass",
    "certificate": "HTTPS certificate",
    "bodyRouting": "Body-based routing",
    "loadBalancerIdleTimeoutSeconds": "Load balancer idle timeout (s)",
    "dnsRecord": "DNS record to create",
    "certificateDnsRecord": "DNS record that authorizes the certificate (CNAME, create once)",
}


def _entrance_section(entrance: dict[str, Any]) -> list[str]:
    """The one way in: base URL, names, Gateway and, per base model, its pool and pickers."""
    out = [
        "## Entrance",
        "",
        (
            "Clients call the base URL and choose the model (or adapter) with the request's `model`; plain "
            "HTTP on port 80 redirects to HTTPS (docs/routing.md)."
        ),
        "",
    ]
    for key, label in ENTRANCE_LABELS.items():
        value = entrance.get(key)
        if value is None:
            continue
        if isinstance(value, dict):
            shown = ", ".join(f"`{k}` -> `{v}`" for k, v in value.items())
        elif isinstance(value, list):
            shown = ", ".join(f"`{v}`" for v in value)
        else:
            shown = value
        out.append(f"- **{label}**: {shown}")
    pools = entrance.get("pools") or []
    if pools:
        rows = [{**p, "adapters": ", ".join(p["adapters"]) or "-"} for p in pools]
        out += ["", "Per base model: an InferencePool and its endpoint pickers (llm-d-router-gateway).", ""]
        out += _markdown_table(rows, list(rows[0]))
    unresolved = entrance.get("unresolved") or []
    if unresolved:
        out += ["", "Not established here (no registry or cluster was reachable); settle each where one is:", ""]
        out += [f"- {f['subject']} ({f['source']}): `{f['resolveWith']}`" for f in unresolved]
    return [*out, ""]


def _pod_security_section(objects: list[dict[str, Any]]) -> list[str]:
    """Each namespace's enforced Pod Security level with its reason, and every pod that waives a
    control of common/pod_security.py with why (docs/security.md "Pods and namespaces")."""
    out = ["## Pod security", "", "| namespace | enforces | why not restricted |", "|---|---|---|"]
    for obj in objects:
        if obj.get("kind") != "Namespace":
            continue
        meta = obj.get("metadata") or {}
        level = (meta.get("labels") or {}).get(f"{pod_security.PSA_PREFIX}/enforce", "(none)")
        reason = (meta.get("annotations") or {}).get(pod_security.LEVEL_REASON_ANNOTATION, "")
        out.append(f"| {meta.get('name')} | {level} | {reason} |")
    waivers = []
    for obj in objects:
        w = workload(obj)
        if w is None:
            continue
        for pod in w.pods:
            waived = pod_security.parse_exceptions(pod.annotations.get(pod_security.EXCEPTION_ANNOTATION))
            for control, reason in waived.items():
                waivers.append(f"- {w.ref} ({pod.where}) waives {control}: {reason}")
    out += [
        "",
        (
            "Pods that waive a control (every other container runs non-root on a read-only root, "
            "with no capabilities, no privilege escalation, the runtime's seccomp profile and no API token):"
        ),
        "",
    ] + (waivers or ["- none"])
    facts = [*writable.UNRESOLVED, store.SYNC_NON_ROOT, kserve.STORAGE_INITIALIZER_CONTEXT]
    out += ["", "Not settled on this machine (settle on a cluster):", ""]
    out += [f"- {f.subject} ({f.source}): `{f.resolve_with}`" for f in facts]
    return [*out, ""]


def _verification_section(verification: dict[str, Any]) -> list[str]:
    """The Job that checks every model after `pulumi up` (components/verification, docs/verification.md)."""
    out = [
        "## Verification",
        "",
        (
            f"After the servers and the entrance, Job `{verification['job']}` runs the smoke checks against every "
            f"vLLM model and compares the KV-cache capacity vLLM allocated with the plan's (fails below "
            f"-{verification['kvTolerancePercent']}%); `pulumi up` waits for it (deadline "
            f"{verification['deadlineSeconds']} s). Report: `{verification['logs']}`."
        ),
        "",
    ]
    rows = [
        {
            "model": m,
            "kvCacheTokens": e["kvCacheTokens"],
            "maxModelLen": e["maxModelLen"],
            "names": ", ".join(e["names"]),
        }
        for m, e in verification["expected"].items()
    ]
    out += _markdown_table(rows, ["model", "kvCacheTokens", "maxModelLen", "names"])
    out += _sweep_lines(verification["expected"])
    unresolved = verification.get("unresolved") or []
    if unresolved:
        out += ["", "Not established here (no registry was reachable); settle each where one is:", ""]
        out += [f"- {f['subject']} ({f['source']}): `{f['resolveWith']}`" for f in unresolved]
    return [*out, ""]


def _sweep_lines(expected: dict[str, Any]) -> list[str]:
    """The models whose Job also runs a short load sweep (models[].verification.sweep), with what the plan predicts
    it measures (planner/sweep_prediction.py; docs/verification.md)."""
    out: list[str] = []
    for model, e in expected.items():
        sweep = e.get("sweep")
        if not sweep:
            continue
        p = sweep["prediction"]
        head = (
            f"Load sweep of {model} after its checks: concurrency {', '.join(map(str, sweep['concurrency']))}; "
            f"{sweep['requestsPerLevel']} requests per level, {sweep['promptTokens']:,} prompt / "
            f"{sweep['outputTokens']:,} output tokens"
        )
        if not p["predicted"]:
            out += ["", f"{head}; measured only, not predicted: {p['notPredicted']}"]
            continue
        out += [
            "",
            (
                f"{head}; the plan predicts ({p['efficiency']}), highest concurrency meeting TTFT p95 "
                f"{p['ttftSloMs']:g} ms and TPOT {p['itlSloMs']:g} ms: {p['highestConcurrencyAtSlo']}:"
            ),
            "",
        ]
        out += _markdown_table(
            [
                {
                    "concurrency": lv["concurrency"],
                    "TTFT mean ms": lv["ttftMeanMs"],
                    "TTFT p95 ms": lv["ttftP95Ms"],
                    "TPOT ms": lv["tpotMs"],
                    "output tokens/s": lv["outputTokensPerSecond"],
                }
                for lv in p["levels"]
            ],
            ["concurrency", "TTFT mean ms", "TTFT p95 ms", "TPOT ms", "output tokens/s"],
        )
    return out


def _waits_section(evaluation: Evaluation) -> list[str]:
    """The longest chain of waits one `pulumi up` may block on (offline_plan/waits.py)."""
    table = chain_table(evaluation)
    out = [
        "## Longest blocking wait",
        "",
        (
            f"`pulumi up` may wait up to {table['totalSeconds'] / 60:.0f} min along this chain (each step's "
            "longest wait: its customTimeouts, Helm's timeout per phase, or the provider's default); with "
            f"{WORKFLOW_SETUP_SECONDS // 60} min of job set-up the `pulumi up` workflow needs "
            f"timeout-minutes >= {table['requiredJobMinutes']} (a GitHub-hosted job stops at "
            f"{GITHUB_HOSTED_JOB_LIMIT_MINUTES})."
        ),
        "",
        "| step | wait (s) | bounded by |",
        "|---|---|---|",
    ]
    out += [f"| `{step['resource']}` | {step['seconds']} | {step['why']} |" for step in table["steps"]]
    return [*out, ""]


def _opening(
    evaluation: Evaluation,
    verdicts: list[Any],
    config: dict[str, Any] | None,
    chart_verdicts: helm_policy.ChartVerdicts | None,
) -> list[str]:
    """plan.md's opening (offline_plan/review.py), the same for a served and a deployer stack."""
    return review.review_section(
        evaluation,
        verdicts,
        _pack_config_line(evaluation.stack, config, named_pack_config(evaluation.config)),
        missing_digests(evaluation),
        requires_digest(config),
        helm_policy.decision_reasons(chart_verdicts),
    )


def render_plan(
    evaluation: Evaluation,
    verdicts: list[Any],
    manifests: list[Path],
    config: dict[str, Any] | None = None,
    chart_verdicts: helm_policy.ChartVerdicts | None = None,
) -> str:
    if deployer_report.is_deployer_stack(evaluation):
        text = deployer_report.render_deployer_plan(evaluation, verdicts, NOT_PREVIEW)
        # A deployer stack's plan opens with the same decision (it has no GPU pools to cost).
        opening = _opening(evaluation, verdicts, config, chart_verdicts)
        text = text.replace(f"> {NOT_PREVIEW}\n\n", f"> {NOT_PREVIEW}\n\n" + "\n".join(opening) + "\n", 1)
    else:
        text = _render_served_plan(evaluation, verdicts, manifests, config, chart_verdicts)
    # What the mock runtime made up is marked wherever it is printed, and the opening says what the mark means.
    text, marked = placeholders.mark(text, placeholders.invented(evaluation))
    if marked:
        text = text.replace(f"> {NOT_PREVIEW}\n", f"> {NOT_PREVIEW}\n>\n> {placeholders.LEGEND}\n", 1)
    return text


def _render_served_plan(
    evaluation: Evaluation,
    verdicts: list[Any],
    manifests: list[Path],
    config: dict[str, Any] | None,
    chart_verdicts: helm_policy.ChartVerdicts | None = None,
) -> str:
    if chart_verdicts is None:
        chart_verdicts = helm_policy.chart_verdicts(evaluation, helm.rendered(evaluation), verdicts, config)
    out = [f"# Offline plan: stack `{evaluation.stack}`", "", f"> {NOT_PREVIEW}", ""]
    # What a reviewer decides comes first (offline_plan/review.py); the sections after it are the details.
    out += _opening(evaluation, verdicts, config, chart_verdicts)
    table = evaluation.outputs.get("sizing") or []
    out += ["## Models", ""]
    if table:
        out += _markdown_table(table, SUMMARY_COLUMNS)
        out.append("")
        for row in table:
            out += _model_story(row)
        out += capacity_section(table)
    else:
        out.append("(the program exported no sizing table)")
    pools = evaluation.outputs.get("pools") or []
    if pools:
        out += ["## GPU pools", "", *_markdown_table(pools, list(pools[0])), ""]
    platform = evaluation.outputs.get("platform")
    if platform:
        out += _platform_section(platform)
    drivers = evaluation.outputs.get("drivers") or []
    if drivers:
        out += _driver_section(drivers)
    out += gpu_stack_section(evaluation)
    network_policies = evaluation.outputs.get("networkPolicies")
    if network_policies:
        out += _network_policy_section(network_policies)
    entrance = evaluation.outputs.get("entrance")
    if entrance:
        out += _entrance_section(entrance)
    out += deployer_report.deployer_lines(evaluation)
    out += controllers_section(evaluation)
    out += _addons_section(evaluation.outputs.get("addons") or [])
    out += _pod_security_section(evaluation.kubernetes_objects)
    out += _images_section(evaluation, config)
    out += helm.plan_section(evaluation)
    verification = evaluation.outputs.get("verification")
    if verification:
        out += _verification_section(verification)
    out += _waits_section(evaluation)
    out += credentials_section(evaluation)
    out += update_diff.replaced_section(evaluation)
    out += lifecycle.destroy_section(evaluation)
    # The warnings are in the opening (review.py); every finding of the pack, in full, is here.
    out += [
        "## Policy verdicts",
        "",
        _pack_config_line(evaluation.stack, config, named_pack_config(evaluation.config)),
        "",
    ]
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
    out += ["", *helm_policy.plan_section(chart_verdicts)]
    out += ["", f"## Resources ({len(evaluation.resources)})", "", "```"]
    for depth, type_, name in evaluation.tree():
        out.append(f"{'  ' * depth}{type_}  {name}")
    out += ["```", "", f"## Kubernetes manifests ({len(manifests)})", ""]
    out += [f"- `manifests/{p.name}`" for p in manifests]
    out.append("")
    return "\n".join(out)


def plan_summary(
    evaluation: Evaluation,
    verdicts: list[Any],
    config: dict[str, Any] | None,
    charts: helm_policy.ChartVerdicts | None = None,
) -> dict[str, Any]:
    """plan.json's content: the facts plan.md opens with, as data for `python -m offline_plan.diff`."""
    return plan_json.summary(
        evaluation,
        verdicts,
        image_rows(evaluation),
        missing_digests(evaluation),
        requires_digest(config),
        helm_policy.decision_reasons(charts),
    )


def _print_problems(stack: str, problems: list[str]) -> None:
    print(f"plan failed for stack {stack}:", file=sys.stderr)
    for p in problems:
        print(f"  {p}", file=sys.stderr)


def run(stack: str, out_dir: Path, project_dir: Path = ROOT) -> int:
    """Exit status: 0 planned, 1 a mandatory policy violation or an internal error (the message says
    which), 2 the stack file or config is unusable."""
    shown = stack if STACK_NAME_RE.fullmatch(stack) else excerpt(stack)
    try:
        evaluation = evaluate_stack(stack, project_dir)
    except Exception as err:
        if failures.is_internal(err):
            _print_problems(shown, failures.internal_error_lines(err))
            return 1
        _print_problems(shown, getattr(err, "problems", None) or (str(err).strip() or type(err).__name__).splitlines())
        return 2
    try:
        config = pack_config(stack, project_dir, named_pack_config(evaluation.config))
        verdicts = policy_verdicts(evaluation, config)
        # A release its chart cannot render: HelmReleaseError; a malformed waiver file: WaiverError.
        rendered = helm.rendered(evaluation)
        charts = helm_policy.chart_verdicts(evaluation, rendered, verdicts, config, project_dir)
    except ConfigError as err:  # the stack file names a pack config that is not there
        _print_problems(shown, err.problems)
        return 2
    except ValueError as err:  # a malformed policies/config/<stack>.json, or a chart refusing its values
        if failures.is_internal(err):
            _print_problems(shown, failures.internal_error_lines(err))
            return 1
        print(f"plan failed for stack {stack}: {err}", file=sys.stderr)
        return 2
    name_problems = object_names.stack_problems(evaluation, rendered)
    if name_problems:
        _print_problems(shown, name_problems)
        return 2
    stack_dir = out_dir / stack
    manifests = write_manifests(evaluation.kubernetes_objects, stack_dir / "manifests")
    manifests += helm.write_manifests(evaluation, stack_dir / "manifests")
    (stack_dir / "plan.md").write_text(render_plan(evaluation, verdicts, manifests, config, charts))
    # The same facts as data, for `python -m offline_plan.diff` (offline_plan/plan_json.py).
    plan_json.write(stack_dir / plan_json.FILENAME, plan_summary(evaluation, verdicts, config, charts))
    mandatory = [v for v in verdicts if v.level == "mandatory"]
    print(NOT_PREVIEW)
    print(
        f"stack {stack}: {len(evaluation.resources)} resources, {len(manifests)} Kubernetes objects, "
        f"{len(verdicts)} policy findings ({len(mandatory)} mandatory)"
    )
    for row in evaluation.outputs.get("sizing") or []:
        print(
            f"  {row['model']}: TP {row['tensorParallelSize']} x PP {row['pipelineParallelSize']} on {row['gpu']}, "
            f"{row['kvCacheTokens']:,} KV-cache tokens ({row['maxConcurrency']} requests of {row['maxModelLen']:,}), "
            f"startup budget {row['startupBudgetSeconds']} s"
        )
    for v in mandatory:
        print(f"  MANDATORY {v.policy}: {v.kind}/{v.name}: {v.message}")
    chart_mandatory = [v for v in [*charts.program, *charts.applied.kept] if v.level == "mandatory"]
    print(
        f"  rendered charts: {len(chart_mandatory)} mandatory findings not waived, {len(charts.applied.waived)} "
        f"waived ({helm_policy.WAIVERS}), {len(charts.applied.stale)} stale waivers"
    )
    for line in charts.applied.stale_lines(str(helm_policy.WAIVERS)):
        print(f"  STALE {line}")
    deployed = _deployed_images(evaluation)
    missing = [i.tagged for i in images.unresolved() if _in_stack(i, deployed)]
    if requires_digest(config) and missing:
        print(
            f"  NOT DEPLOYABLE with requireDigest until these digests are resolved: "
            f"{', '.join(dict.fromkeys(missing))}; run `{images.RESOLVE_COMMAND}`"
        )
    print(
        f"wrote {stack_dir / 'plan.md'}, {stack_dir / plan_json.FILENAME} and {len(manifests)} manifests in "
        f"{stack_dir / 'manifests'}"
    )
    return 1 if mandatory or charts.failing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m offline_plan", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stack", default="dev", help="stack name: reads Pulumi.<stack>.yaml (default dev)")
    parser.add_argument("--out", type=Path, default=ROOT / "build", help="output folder (default build/)")
    args = parser.parse_args(argv)
    return run(args.stack, args.out)


if __name__ == "__main__":
    sys.exit(main())
