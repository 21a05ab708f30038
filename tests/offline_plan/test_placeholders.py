"""What the mock runtime makes up is marked as a placeholder wherever plan.md prints it."""

from __future__ import annotations

import pytest

from offline_plan import mock_runtime, placeholders
from offline_plan import write as offline_plan
from offline_plan.mock_runtime import Evaluation, evaluate_stack
from tests.support.committed import committed_stack


def test_a_table_cell_a_bullet_and_a_tree_line_are_marked_and_nothing_else():
    text = "\n".join(
        [
            "- **Zones**: us-east-1a, us-east-1b",
            "| pool | zones | note |",
            "|---|---|---|",
            "| h100 | us-east-1b | a \\| b |",
            "```",
            "  aws:efs/mountTarget:MountTarget  efs-mount-subnet-0000000000001aaaa",
            "```",
            "- **Region**: us-east-1",
            "- sg-x (placeholder: the id a real preview looks up)",
            "- us-east-1bz is another token",
        ]
    )
    marked, any_marked = placeholders.mark(text, {"us-east-1a", "us-east-1b", "subnet-0000000000001aaaa", "sg-x"})
    lines = marked.split("\n")
    assert any_marked
    assert lines[0] == "- **Zones**: us-east-1a, us-east-1b (placeholder)"
    assert lines[3] == "| h100 | us-east-1b (placeholder) | a \\| b |"
    assert lines[5].endswith("efs-mount-subnet-0000000000001aaaa  (placeholder)")
    assert lines[7:] == text.split("\n")[7:], "the region, an already marked value and a longer token stay as they are"
    assert placeholders.unmarked_lines(marked, {"us-east-1a", "us-east-1b", "subnet-0000000000001aaaa"}) == []
    assert placeholders.mark(text, set()) == (text, False)


def test_invented_values_are_the_mocks_answers_not_the_programs_arguments_or_the_stack_files_values():
    evaluation = Evaluation(
        stack="s",
        resources=[],
        config={"llm-serving:cluster": '{"region": "us-west-2"}'},
        call_results=[
            (
                "aws:index/getAvailabilityZones:getAvailabilityZones",
                {"region": "us-west-2", "filters": ["given-by-program"]},
                {"id": "mock-lookup", "region": "us-west-2", "filters": ["given-by-program"], "names": ["us-west-2a"]},
            ),
            ("aws:index/getRegion:getRegion", {}, {"name": "us-west-2", "partition": "aws"}),
        ],
    )
    assert placeholders.invented(evaluation) == {"us-west-2a"}


@pytest.fixture(scope="module")
def plans():
    out = {}
    for stack in ("dev", "prod"):
        evaluation = committed_stack(stack)
        config = offline_plan.pack_config(stack)
        out[stack] = (
            evaluation,
            offline_plan.render_plan(evaluation, offline_plan.policy_verdicts(evaluation, config), [], config),
        )
    evaluation = evaluate_stack("prod-deployer")
    out["prod-deployer"] = (evaluation, offline_plan.render_plan(evaluation, [], []))
    return out


@pytest.mark.parametrize("stack", ["dev", "prod", "prod-deployer"])
def test_no_line_of_a_committed_stacks_plan_prints_a_made_up_value_as_fact(plans, stack):
    evaluation, text = plans[stack]
    assert placeholders.unmarked_lines(text, placeholders.invented(evaluation)) == []


def test_prods_scarce_zones_and_its_zone_list_are_marked(plans):
    _, text = plans["prod"]
    scarce = ", ".join(f"us-east-1{s}" for s in mock_runtime.MOCK_SCARCE_ZONES)
    assert f"| {scarce} (placeholder) |" in text
    assert "- **Zones**: us-east-1a, us-east-1b, us-east-1c, us-east-1d (placeholder)" in text
    assert placeholders.LEGEND in text.split("## What to decide", 1)[0]
