"""plan.md's opening: what a reviewer must decide before the details.

Deployable or not and why, the policy verdicts by rule, the warnings, and the GPUs the stack asks for with their
cost per hour (common/gpu_prices.py: on-demand and spot, per region, each price with its page and date, or
unresolved with the command that reads it). The same facts go into plan.json (offline_plan/plan_json.py), which
`python -m offline_plan.diff` compares between two plans.
"""

from __future__ import annotations

import json
from typing import Any

from common import gpu_prices
from offline_plan import helm
from offline_plan.mock_runtime import Evaluation
from stack_config import DEFAULT_REGIONS, PROJECT

# Where the pool's capacity type is not priced per hour (an EC2 Capacity Block is paid per reservation).
CAPACITY_BLOCK_PRICES = "https://aws.amazon.com/ec2/capacityblocks/pricing/"


def stack_location(evaluation: Evaluation) -> tuple[str, str | None]:
    """The stack's cloud and region, as the program read them (cluster.region or the cloud's default)."""
    cloud = evaluation.config.get(f"{PROJECT}:cloud", "")
    try:
        cluster = json.loads(evaluation.config.get(f"{PROJECT}:cluster", "{}"))
    except ValueError:
        cluster = {}
    region = cluster.get("region") if isinstance(cluster, dict) else None
    return cloud, region if isinstance(region, str) else DEFAULT_REGIONS.get(cloud)


def _money(value: float | None) -> str:
    return "unresolved" if value is None else f"${value:,.2f}"


def _usd(price: gpu_prices.MachinePrice | None) -> float | None:
    return price.usd_per_hour if price is not None else None


def gpu_costs(evaluation: Evaluation) -> list[dict[str, Any]]:
    """One row per GPU pool: GPU type, GPUs at the pool's minimum and maximum, the machine's hourly price on-demand
    and spot, and the pool's cost per hour at its minimum and maximum at its own capacity type (None: unresolved)."""
    cloud, region = stack_location(evaluation)
    rows = []
    for pool in evaluation.outputs.get("pools") or []:
        machine, capacity = str(pool["machineType"]), str(pool["capacityType"])
        per_node = int(pool["gpusPerNode"])
        lo, hi = int(pool["minNodes"]), int(pool["maxNodes"])
        prices = {
            c: gpu_prices.price(cloud, machine, region or "", c) if region and not machine.startswith("(") else None
            for c in gpu_prices.CAPACITY_TYPES
        }
        per_hour = _usd(prices.get(capacity))
        rows.append(
            {
                "pool": pool["pool"],
                "gpu": pool["gpu"],
                "machineType": machine,
                "region": region,
                "capacityType": capacity,
                "gpusPerNode": per_node,
                "minNodes": lo,
                "maxNodes": hi,
                "minGpus": per_node * lo,
                "maxGpus": per_node * hi,
                "onDemandPerNodeHour": _usd(prices[gpu_prices.ON_DEMAND]),
                "spotPerNodeHour": _usd(prices[gpu_prices.SPOT]),
                "minCostPerHour": None if per_hour is None else round(per_hour * lo, 2),
                "maxCostPerHour": None if per_hour is None else round(per_hour * hi, 2),
                "prices": [p for p in prices.values() if p is not None],
                # The node counts the plan derived from the models' loads (planner/capacity.py derive_pool).
                "nodesDerivedFromLoad": pool.get("derivedFromLoad") or "none",
            }
        )
    return rows


def _cost_lines(rows: list[dict[str, Any]]) -> list[str]:
    out = ["### GPUs and their cost per hour", ""]
    if not rows:
        return [*out, "No GPU pools.", ""]
    out += [
        (
            "| pool | gpu | machine | region | capacity | GPUs (min-max) | on-demand per node | spot per node | "
            "cost per hour at min | at max |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["capacityType"] == "capacity-block":
            at_min = at_max = f"per reservation ({CAPACITY_BLOCK_PRICES})"
        else:
            at_min, at_max = _money(r["minCostPerHour"]), _money(r["maxCostPerHour"])
        out.append(
            f"| {r['pool']} | {r['gpu']} | {r['machineType']} | {r['region'] or '-'} | {r['capacityType']} | "
            f"{r['gpusPerNode']} x {r['minNodes']}-{r['maxNodes']} nodes = {r['minGpus']}-{r['maxGpus']} | "
            f"{_money(r['onDemandPerNodeHour'])} | {_money(r['spotPerNodeHour'])} | {at_min} | {at_max} |"
        )
    out.append("")
    prices = sorted({p for r in rows for p in r["prices"]}, key=lambda p: (p.cloud, p.machine, p.region, p.capacity))
    known = [p for p in prices if p.established]
    if known:
        out.append("Prices (US dollars per node-hour, before discounts and taxes):")
        out.append("")
        out += [
            f"- {p.machine} {p.region} {p.capacity}: ${p.usd_per_hour:,.2f} ({p.source}, read {p.checked})"
            for p in known
        ]
        out.append("")
    unresolved = [p for p in prices if not p.established]
    if unresolved:
        out.append(
            "Unresolved prices (not read from a dated public page; common/gpu_prices.py): run each command where the "
            "cloud's CLI has credentials and put the figure, its page and the date in the table."
        )
        out.append("")
        out += [f"- {p.machine} {p.region} {p.capacity} ({p.source}): `{p.resolve_with}`" for p in unresolved]
        out.append("")
    return out


def decision(
    evaluation: Evaluation,
    verdicts: list[Any],
    missing_digests: list[str],
    require_digest: bool,
    chart_reasons: list[str] | None = None,
) -> dict[str, Any]:
    """Deployable or not, with every reason; and what `pulumi up` needs set first. `chart_reasons`: what
    the pack found on the rendered charts that no waiver covers (offline_plan/helm/policy.py)."""
    mandatory = [v for v in verdicts if v.level == "mandatory"]
    reasons = []
    by_policy: dict[str, int] = {}
    for v in mandatory:
        by_policy[v.policy] = by_policy.get(v.policy, 0) + 1
    for policy, count in sorted(by_policy.items()):
        reasons.append(f"{count} mandatory `{policy}` violation(s) (see Policy verdicts)")
    if require_digest and missing_digests:
        reasons.append(
            f"{len(missing_digests)} image(s) this stack deploys have no known digest and the pack config requires "
            "digests (see Images)"
        )
    before_up = [
        f"`{key}` is not set in Pulumi.{evaluation.stack}.yaml; this plan used a placeholder. Set it: "
        f"`pulumi config set --secret {key} ... -s {evaluation.stack}`"
        for key in evaluation.assumed_secrets
    ]
    reasons += chart_reasons or []
    return {"deployable": not reasons, "reasons": reasons, "beforeUp": before_up}


def policy_summary(verdicts: list[Any]) -> list[dict[str, Any]]:
    """Verdicts grouped by level and policy, with the resources each names (sorted, so the plan reads the same)."""
    groups: dict[tuple[str, str], set[str]] = {}
    for v in verdicts:
        groups.setdefault((v.level, v.policy), set()).add(f"{v.kind}/{v.name}")
    return [
        {
            "level": level,
            "policy": policy,
            "count": sum(1 for v in verdicts if (v.level, v.policy) == (level, policy)),
            "resources": sorted(names),
        }
        for (level, policy), names in sorted(groups.items(), key=lambda kv: (kv[0][0] != "mandatory", kv[0]))
    ]


def warnings(evaluation: Evaluation) -> list[str]:
    """The program's warnings, and the add-on pods that fit or schedule on no pool of the stack (the
    secrets the plan stood in for are under "Before `pulumi up`")."""
    found = [str(w) for w in evaluation.outputs.get("warnings") or []]
    return found + helm.placement_report(evaluation).problems


def review_section(
    evaluation: Evaluation,
    verdicts: list[Any],
    pack_config_line: str,
    missing_digests: list[str],
    require_digest: bool,
    chart_reasons: list[str] | None = None,
) -> list[str]:
    """The opening of plan.md: the decision, the verdicts by rule, the warnings, the GPUs and their cost."""
    verdict = decision(evaluation, verdicts, missing_digests, require_digest, chart_reasons)
    out = ["## What to decide", ""]
    if verdict["deployable"]:
        out.append("**Deployable**: no mandatory policy violation, every required digest known.")
    else:
        out.append("**Not deployable** until these are fixed:")
        out.append("")
        out += [f"- {r}" for r in verdict["reasons"]]
    if verdict["beforeUp"]:
        out += ["", "Before `pulumi up`:", ""] + [f"- {b}" for b in verdict["beforeUp"]]
    out += ["", "### Verdicts by policy", "", pack_config_line, ""]
    summary = policy_summary(verdicts)
    if not summary:
        out.append("No violations.")
    else:
        out += ["| level | policy | count | resources |", "|---|---|---|---|"]
        shown = 4
        for row in summary:
            names = ", ".join(row["resources"][:shown]) + (
                f", and {len(row['resources']) - shown} more" if len(row["resources"]) > shown else ""
            )
            out.append(f"| {row['level']} | {row['policy']} | {row['count']} | {names} |")
    out += ["", "### Warnings", ""]
    found = warnings(evaluation)
    out += [f"- {w}" for w in found] if found else ["None."]
    out.append("")
    out += _cost_lines(gpu_costs(evaluation))
    out += ["The details follow.", ""]
    return out
