"""plan.md opens with what a reviewer decides: deployable or not and why, verdicts, warnings, GPUs and their cost."""

from __future__ import annotations

import dataclasses
import datetime
import json

import pytest

from common import gpu_prices, gpus
from offline_plan import review
from offline_plan import write as offline_plan
from offline_plan.mock_runtime import Evaluation, evaluate_stack
from policies.check import Verdict
from tests.support.committed import committed_stack


def _evaluation(pools, cloud="aws", region="us-east-1", warnings=(), secrets=()) -> Evaluation:
    cluster = json.dumps({"name": "c", **({"region": region} if region else {})})
    return Evaluation(
        stack="review",
        resources=[],
        outputs={"pools": pools, "warnings": list(warnings)},
        config={"llm-serving:cloud": cloud, "llm-serving:cluster": cluster},
        assumed_secrets=list(secrets),
    )


def _pool(**overrides):
    return {
        "pool": "h100",
        "gpu": "H100-80GB",
        "machineType": "p5.48xlarge",
        "gpusPerNode": 8,
        "minNodes": 1,
        "maxNodes": 3,
        "capacityType": "on-demand",
        **overrides,
    }


def test_every_price_names_its_page_and_date_and_an_unresolved_one_its_command():
    assert gpu_prices.PRICES, "the committed stacks' machines are in the table"
    for key, price in gpu_prices.PRICES.items():
        assert key == (price.cloud, price.machine, price.region, price.capacity)
        assert price.source == gpu_prices.PRICE_PAGES[(price.cloud, price.capacity)] or price.established, price
        assert datetime.date.fromisoformat(price.checked), price
        if price.established:
            # A figure: its page, its region, the date the page states or was read, positive.
            assert price.source.startswith("https://") and price.region, price
            assert price.usd_per_hour is not None and price.usd_per_hour > 0, price
        else:
            assert price.resolve_with and price.machine in price.resolve_with and price.region in price.resolve_with
    with pytest.raises(ValueError, match="a price is positive"):
        dataclasses.replace(next(iter(gpu_prices.PRICES.values())), usd_per_hour=-1.0)


def test_the_table_lists_every_catalog_machine_in_the_committed_stacks_regions_both_capacity_types():
    for cloud, region in gpu_prices.REGIONS.items():
        machines = {m.name for g in gpus.CATALOG.values() for m in g.machines(cloud)}
        assert machines, cloud
        for machine in machines:
            for capacity in gpu_prices.CAPACITY_TYPES:
                assert (cloud, machine, region, capacity) in gpu_prices.PRICES, (cloud, machine, capacity)
    assert ("aws", "p5.48xlarge", "us-east-1", gpu_prices.ON_DEMAND) in gpu_prices.PRICES  # Pulumi.prod.yaml
    assert ("gcp", "g2-standard-8", "us-central1", gpu_prices.SPOT) in gpu_prices.PRICES  # Pulumi.dev.yaml


@pytest.mark.parametrize(
    "change, message",
    [
        ({"source": "aws.amazon.com/ec2/pricing/on-demand/"}, "names the https:// page it is read on"),
        ({"source": ""}, "names the https:// page it is read on"),
        ({"region": ""}, "names its region"),
        ({"checked": "not in the table"}, "`checked` is the date"),
        ({"checked": "2026-13-01"}, "`checked` is the date"),
        ({"capacity": "reserved"}, "capacity 'reserved' is not one of"),
    ],
)
def test_a_figure_without_its_page_region_date_or_purchase_option_is_refused(change, message):
    unresolved = gpu_prices.PRICES[("aws", "p5.48xlarge", "us-east-1", gpu_prices.ON_DEMAND)]
    cited = dataclasses.replace(unresolved, usd_per_hour=1.0, checked="2026-12-04")
    assert cited.established
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(cited, **change)
    # Without a figure, the same fields are an unresolved entry (a machine the table lacks reads "not in the table").
    if "capacity" not in change:
        assert not dataclasses.replace(unresolved, **change).established


def test_a_machine_the_table_lacks_is_unresolved_never_guessed():
    found = gpu_prices.price("aws", "g6e.12xlarge", "eu-west-1", gpu_prices.SPOT)
    assert found is not None and found.usd_per_hour is None
    assert "describe-spot-price-history --region eu-west-1 --instance-types g6e.12xlarge" in found.resolve_with
    assert gpu_prices.price("existing", "x", "r", gpu_prices.ON_DEMAND) is None


def test_cost_per_hour_is_the_tables_price_times_the_pools_nodes(monkeypatch):
    key = ("aws", "p5.48xlarge", "us-east-1", gpu_prices.ON_DEMAND)
    known = dataclasses.replace(gpu_prices.PRICES[key], usd_per_hour=10.5, checked="2026-01-02")
    monkeypatch.setitem(gpu_prices.PRICES, key, known)
    [row] = review.gpu_costs(_evaluation([_pool()]))
    assert (row["minGpus"], row["maxGpus"]) == (8, 24)
    assert (row["minCostPerHour"], row["maxCostPerHour"]) == (10.5, 31.5)
    assert row["spotPerNodeHour"] is None  # spot stays unresolved: not in the table as a figure
    text = "\n".join(review.review_section(_evaluation([_pool()]), [], "Pack config: x.", [], False))
    assert (
        "| h100 | H100-80GB | p5.48xlarge | us-east-1 | on-demand | 8 x 1-3 nodes = 8-24 | $10.50 | unresolved |"
        in (text)
    )
    assert f"p5.48xlarge us-east-1 on-demand: $10.50 ({known.source}, read 2026-01-02)" in text
    assert "p5.48xlarge us-east-1 spot (https://aws.amazon.com/ec2/spot/pricing/): `aws ec2" in text


def test_a_spot_pool_is_costed_at_the_spot_price(monkeypatch):
    key = ("gcp", "g2-standard-8", "us-central1", gpu_prices.SPOT)
    monkeypatch.setitem(gpu_prices.PRICES, key, dataclasses.replace(gpu_prices.PRICES[key], usd_per_hour=0.25))
    pool = _pool(pool="l4", gpu="L4", machineType="g2-standard-8", gpusPerNode=1, minNodes=0, capacityType="spot")
    [row] = review.gpu_costs(_evaluation([pool], cloud="gcp", region="us-central1"))
    assert (row["minCostPerHour"], row["maxCostPerHour"]) == (0.0, 0.75)
    assert row["onDemandPerNodeHour"] is None


def test_the_default_region_is_priced_when_the_stack_names_none():
    [row] = review.gpu_costs(_evaluation([_pool()], region=None))
    assert row["region"] == "us-east-1"


def _verdict(level, policy, name):
    return Verdict(kind="Deployment", name=name, policy=policy, level=level, message="m")


def test_a_mandatory_verdict_or_a_missing_required_digest_makes_it_not_deployable():
    evaluation = _evaluation([], warnings=["a warning"], secrets=["hfToken"])
    verdicts = [_verdict("mandatory", "image-tag-pinned", "b"), _verdict("mandatory", "image-tag-pinned", "a")]
    verdicts.append(_verdict("advisory", "resource-limits", "a"))
    text = "\n".join(review.review_section(evaluation, verdicts, "Pack config: p.", ["img:1"], True))
    assert "**Not deployable** until these are fixed:" in text
    assert "- 2 mandatory `image-tag-pinned` violation(s)" in text
    assert "- 1 image(s) this stack deploys have no known digest" in text
    assert "| mandatory | image-tag-pinned | 2 | Deployment/a, Deployment/b |" in text
    assert text.index("| mandatory |") < text.index("| advisory |")
    assert "- a warning" in text and "`hfToken` is not set in Pulumi.review.yaml" in text
    clean = "\n".join(review.review_section(evaluation, [verdicts[2]], "Pack config: p.", ["img:1"], False))
    assert "**Deployable**" in clean and "Not deployable" not in clean


def test_prod_plan_opens_with_the_decision_then_the_details(tmp_path):
    evaluation = committed_stack("prod")
    config = offline_plan.pack_config("prod")
    verdicts = offline_plan.policy_verdicts(evaluation, config)
    text = offline_plan.render_plan(evaluation, verdicts, [], config)
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[:2] == ["## What to decide", "## Models"], heads[:3]
    opening = text.split("## Models", 1)[0]
    for part in ("### Verdicts by policy", "### Warnings", "### GPUs and their cost per hour", "p5.48xlarge"):
        assert part in opening, part
    assert "\n## Warnings" not in text  # not repeated at the end


def test_a_deployer_stacks_plan_opens_with_the_decision_too():
    evaluation = evaluate_stack("prod-deployer")
    text = offline_plan.render_plan(evaluation, [], [])
    assert text.startswith("# Offline plan: stack `prod-deployer` (a deployer stack)")
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[0] == "## What to decide", heads[:2]
    assert "**Deployable**" in text and "No GPU pools." in text
