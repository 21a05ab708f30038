"""plan.md says what each committed stack relies on the clouds' controllers for."""

from __future__ import annotations

from offline_plan.controllers import controllers_section
from offline_plan.mock_runtime import evaluate_stack
from tests.support.committed import committed_stack


def test_dev_plan_names_dataplane_v2_the_filestore_network_and_the_controller_apis():
    text = "\n".join(controllers_section(committed_stack("dev")))
    assert text.startswith("## What the cloud's controllers need")
    assert "GKE Dataplane V2" in text and "replaces the cluster" in text
    assert (
        "`llm-serving-filestore`: created, provisioner `filestore.csi.storage.gke.io`, network `llm-serving-dev`"
        in text
    )
    assert "networkservices.googleapis.com" in text and "file.googleapis.com" in text


def test_prod_plan_names_the_vpc_cni_agent_the_efs_controller_and_the_elb_subnets():
    text = "\n".join(controllers_section(committed_stack("prod")))
    assert "EKS VPC CNI's network policy agent" in text
    assert "AmazonEFSCSIDriverPolicy" in text
    # prod's subnets are the deployer stack's (components/cluster/aws/deployer.py tags them).
    assert "the VPC's owner tags its public subnets kubernetes.io/role/elb" in text


def test_a_stack_without_network_policies_says_nothing_guards_the_servers():
    text = "\n".join(controllers_section(evaluate_stack("dev", overrides={"security": {"networkPolicies": False}})))
    assert "no NetworkPolicies (security.networkPolicies is false)" in text
