"""plan.md's "What destroy removes and retains": the order it prints is the order the engine takes
(the reverse of the recorded dependencies), and what it retains comes with its removal commands."""

from __future__ import annotations

import pytest

from offline_plan import lifecycle
from offline_plan.mock_runtime import Evaluation, RecordedResource, evaluate_stack
from tests.support.committed import STACKS, committed_stack
from tests.support.stack_variants import PROD_OWN_VPC


def _step(evaluation, steps, type_=None, kind=None, chart=None) -> list[int]:
    out = []
    for r in evaluation.resources:
        if type_ and r.type != type_:
            continue
        if kind and r.inputs.get("kind") != kind:
            continue
        if chart and not str(r.inputs.get("chart", "")).endswith(chart):
            continue
        out.append(steps[r.urn])
    assert out, (type_, kind, chart)
    return out


def test_a_resource_is_deleted_only_after_everything_that_depends_on_it():
    a = RecordedResource("t:a", "a", {}, None, True, urn="urn:a")
    b = RecordedResource("t:b", "b", {}, None, True, urn="urn:b", dependencies=("urn:a",))
    c = RecordedResource("t:c", "c", {}, None, True, urn="urn:c", parent_urn="urn:b")
    assert lifecycle.destroy_steps(Evaluation("t", [a, b, c])) == {"urn:c": 1, "urn:b": 2, "urn:a": 3}


def test_prod_destroys_karpenter_objects_load_balancers_and_volumes_before_what_they_need():
    # In its own VPC (prod's committed stack takes the deployer stack's, whose subnets it does not create).
    evaluation = evaluate_stack("prod", overrides=PROD_OWN_VPC)
    steps = lifecycle.destroy_steps(evaluation)
    karpenter = min(_step(evaluation, steps, chart="karpenter"))
    assert max(_step(evaluation, steps, kind="NodePool") + _step(evaluation, steps, kind="EC2NodeClass")) < karpenter
    cluster = min(_step(evaluation, steps, type_="aws:eks/cluster:Cluster"))
    subnets = min(_step(evaluation, steps, type_="aws:ec2/subnet:Subnet"))
    gateway = max(_step(evaluation, steps, kind="Gateway"))
    assert gateway < min(cluster, subnets, *_step(evaluation, steps, chart="agentgateway"))
    storage_class = min(_step(evaluation, steps, kind="StorageClass"))
    addon = min(
        steps[r.urn] for r in evaluation.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "aws-efs-csi-driver"
    )
    assert max(_step(evaluation, steps, kind="PersistentVolumeClaim")) < storage_class < addon < cluster


def test_dev_destroys_the_gateway_before_the_proxy_only_subnet_and_the_claim_before_the_cluster():
    evaluation = committed_stack("dev")
    steps = lifecycle.destroy_steps(evaluation)
    subnets = _step(evaluation, steps, type_="gcp:compute/subnetwork:Subnetwork")
    cluster = min(_step(evaluation, steps, type_="gcp:container/cluster:Cluster"))
    assert max(_step(evaluation, steps, kind="Gateway")) < min([*subnets, cluster])
    assert max(_step(evaluation, steps, kind="PersistentVolumeClaim")) < cluster


@pytest.mark.parametrize("stack", STACKS)
def test_the_section_prints_the_steps_in_order_and_what_may_remain(stack):
    lines = lifecycle.destroy_section(committed_stack(stack))
    rows = [line for line in lines if line.startswith("| ") and line[2].isdigit()]
    numbers = [int(row.split("|")[1]) for row in rows]
    assert rows and numbers == sorted(numbers)
    text = "\n".join(lines)
    assert "### Retained on purpose" in text and "### What may remain, and why" in text
    assert ("Filestore" in text) == (stack == "dev") and ("KMS key" in text) == (stack == "prod")
