"""`make plan`: what it writes, what it says about itself, and how it fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from common import images
from offline_plan import mock_runtime
from offline_plan import pack_config as pack_config_cli
from offline_plan import write as offline_plan
from stack_config import ConfigError
from tests.support import paths
from tests.support.committed import committed_stack
from tests.support.committed_plans import committed_plan

ROOT = paths.ROOT
# prod's pack config requires image digests (policies/config/prod.json): while common/images.py
# lacks one, prod's plan is written but exits 1, its only mandatory findings those images.
PROD_EXIT = 1 if images.unresolved() else 0


@pytest.fixture(scope="module")
def prod_plan():
    # The plan `python -m offline_plan --stack prod` writes, shared with the other plan readers.
    run = committed_plan("prod")
    return run.returncode, run.folder


def test_writes_one_manifest_per_object_and_a_plan_that_says_what_it_is(prod_plan):
    code, folder = prod_plan
    assert code == PROD_EXIT
    evaluation = committed_stack("prod")
    # The program's own objects; the rendered Helm releases' are `helm.*` (tests/offline_plan/test_helm_render.py).
    manifests = sorted(p for p in (folder / "manifests").glob("*.yaml") if not p.name.startswith("helm."))
    assert len(manifests) == len(evaluation.kubernetes_objects)
    for path in manifests:
        [doc] = list(yaml.safe_load_all(path.read_text()))
        assert list(doc)[:3] == ["apiVersion", "kind", "metadata"], path.name
    plan_md = (folder / "plan.md").read_text()
    assert "not `pulumi preview`" in plan_md
    assert "| llama-3-3-70b-instruct | 38ff4e01a70559264c95945aa04b900a11e68422 | h100 | H100-80GB | 4 | 1 |" in plan_md
    # Each model's numbers are explained: memory split, KV cache and start-up budget.
    assert "- **Memory per GPU**: 79.19 GiB CUDA total x 0.9 = " in plan_md
    assert "the startup probe allows 590 s (1.5 x the estimate, at least 300 s)" in plan_md
    assert "| h100 | H100-80GB | p5.48xlarge | 8 | 1 | 2 | on-demand | 500 |" in plan_md
    assert "## Policy verdicts" in plan_md
    if PROD_EXIT:
        verdicts = plan_md.split("## Policy verdicts", 1)[1].split("## Resources", 1)[0]
        mandatory = [line for line in verdicts.splitlines() if line.startswith("| mandatory |")]
        assert mandatory and all(
            "| image-tag-pinned |" in line and images.RESOLVE_COMMAND in line for line in mandatory
        )
        assert "NOT DEPLOYABLE with requireDigest" in plan_md
    else:
        assert "No violations." in plan_md
    # The resource tree shows components with their children, types and names.
    assert "llm-serving:k8s:VllmServer  llama-3-3-70b-instruct\n  kubernetes:apps/v1:Deployment" in plan_md
    assert "`hfToken` is not set in Pulumi.prod.yaml; this plan used a placeholder" in plan_md


def test_the_plan_shows_the_network_nat_autoscaler_and_what_driver_facts_are_unresolved(prod_plan):
    _, folder = prod_plan
    plan_md = (folder / "plan.md").read_text()
    assert "## Cluster platform (network, NAT, node autoscaling)" in plan_md
    # prod's VPC and NAT are the deployer stack's (Pulumi.prod-deployer.yaml), found by their tag.
    assert "- **Network**: the deployer stack's (prod-deployer), found by tag llm-serving/deployer" in plan_md
    assert "- **NAT**: the deployer stack's (private subnets checked)" in plan_md
    assert "- **Node autoscaler**: Karpenter 1.14.1" in plan_md
    # The zones are the mock runtime's answers (offline_plan/placeholders.py), and say so.
    assert (
        "| h100 | p5.48xlarge | us-east-1b, us-east-1d (placeholder) | us-east-1b (placeholder) | private | 1 | 1 | "
        "placement group |"
    ) in plan_md
    assert "aws:ec2/natGateway:NatGateway" not in plan_md and "kubernetes:karpenter.sh/v1:NodePool" in plan_md
    assert (
        "| llama-3-3-70b-instruct | h100 | 13.0 (unresolved) | 580.159.03 | runs (CUDA 13.0 needs >= 580.95.05) |"
        in plan_md
    )
    assert (
        '`docker run --rm --entrypoint python3 vllm/vllm-openai:v0.32.0 -c "import torch; print(torch.version.cuda)"`'
        in plan_md
    )
    dev = committed_plan("dev")
    assert dev.returncode == 0, dev.stderr
    dev_md = (dev.folder / "plan.md").read_text()
    assert "- **Google APIs enabled**: container.googleapis.com, compute.googleapis.com" in dev_md
    assert "gcloud services enable serviceusage.googleapis.com cloudresourcemanager.googleapis.com" in dev_md
    assert "| llama-3-1-8b-instruct | l4 | 13.0 (unresolved) | unknown (unresolved) | unknown |" in dev_md
    assert "nvidia-smi --query-gpu=driver_version" in dev_md


def test_no_secret_value_reaches_a_plan_file(tmp_path, monkeypatch):
    token = "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123"
    monkeypatch.setattr(offline_plan, "evaluate_stack", lambda stack, project_dir=None: _with_secret(stack, token))
    assert offline_plan.run("prod", tmp_path) == PROD_EXIT
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert token not in path.read_text(), path
    secrets = list((tmp_path / "prod" / "manifests").glob("Secret-*hf-token.yaml"))
    assert secrets and all("<secret>" in p.read_text() for p in secrets)


def _with_secret(stack, token):
    """The stack evaluated with a real-looking HF token set as secret config (as `pulumi up` has it)."""
    config, secret_keys = mock_runtime.stack_file_config(stack)
    config["llm-serving:hfToken"] = token
    config["llm-serving:apiKey"] = "sk-not-a-real-key-but-looks-like-one"
    return mock_runtime.evaluate(stack, config, [*secret_keys, "llm-serving:hfToken", "llm-serving:apiKey"])


@pytest.mark.parametrize(
    "content, message",
    [
        ("config: [1, 2]\n", "Pulumi.broken.yaml: the top level must be a mapping with a `config:` mapping of keys"),
        ("- just\n- a list\n", "Pulumi.broken.yaml: the top level must be a mapping with a `config:` mapping of keys"),
        ("config:\n  llm-serving:cloud: [unclosed\n", "Pulumi.broken.yaml:3:1: not valid YAML:"),
        (
            "config:\n  llm-serving:cloud: gcp\n  llm-serving:cloud: aws\n",
            "Pulumi.broken.yaml:3:3: not valid YAML: key 'llm-serving:cloud' is defined twice (first on line 2)",
        ),
    ],
)
def test_a_malformed_stack_file_is_one_clear_line(tmp_path, content, message, capsys):
    shutil.copy(ROOT / "__main__.py", tmp_path / "__main__.py")
    (tmp_path / "Pulumi.broken.yaml").write_text(content)
    with pytest.raises(ConfigError) as info:
        mock_runtime.stack_file_config("broken", tmp_path)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


def test_an_unknown_stack_names_the_ones_that_exist():
    with pytest.raises(ConfigError, match=r"no stack file Pulumi\.staging\.yaml; stacks here: dev, prod"):
        mock_runtime.stack_file_config("staging")
    assert offline_plan.run("staging", Path("/tmp/unused-plan-out")) == 2


def test_the_plan_lists_the_add_ons_with_versions_and_reasons_and_the_longest_wait(prod_plan):
    _, folder = prod_plan
    plan_md = (folder / "plan.md").read_text()
    assert "## Add-ons" in plan_md
    assert (
        "| KEDA (`keda`) | 2.20.2 | installed: keda 2.20.2 | models[0] (llama-3-1-8b-instruct) scales with "
        "autoscaling.kind keda (a ScaledObject) |"
    ) in plan_md
    assert "installed: prometheus-operator-crds 31.0.0; kube-prometheus-stack 88.3.0" in plan_md
    assert (
        "## Longest blocking wait" in plan_md
        and "`kubernetes:batch/v1:Job llama-3-3-70b-instruct-mirror` | 11400 |" in plan_md
    )


def test_the_plan_says_which_pack_config_its_verdicts_used(prod_plan, tmp_path, monkeypatch):
    _, folder = prod_plan
    assert (
        "Pack config: `policies/config/prod.json` (named by `policyConfig` in Pulumi.prod.yaml; "
        "image digests required)."
    ) in (folder / "plan.md").read_text()
    # A stack without a pack config of its own gets the pack's defaults: said, not silent.
    monkeypatch.setattr(offline_plan, "pack_config", lambda stack, project_dir=None, named=None: None)
    offline_plan.run("dev", tmp_path)
    text = (tmp_path / "dev" / "plan.md").read_text()
    assert (
        "Pack config: none (`policies/config/dev.json` does not exist and Pulumi.dev.yaml sets no `policyConfig`)"
    ) in text
    assert "image digests are not required" in text


# --- which pack config: named by the stack file, so a copy of prod keeps its gate ------------------


def _project_with(tmp_path: Path, stack_files: dict[str, str]) -> Path:
    """A project folder that is this repository (linked) plus the given stack files."""
    project = tmp_path / "project"
    project.mkdir()
    for entry in ROOT.iterdir():
        if not entry.name.startswith("Pulumi.") or entry.name == "Pulumi.yaml":
            (project / entry.name).symlink_to(entry)
    for name, text in stack_files.items():
        (project / f"Pulumi.{name}.yaml").write_text(text)
    return project


def test_a_copy_of_prod_under_another_name_keeps_require_digest(tmp_path):
    prod_file = (ROOT / "Pulumi.prod.yaml").read_text()
    assert "llm-serving:policyConfig: policies/config/prod.json" in prod_file
    project = _project_with(tmp_path, {"staging": prod_file})
    assert not (project / "policies" / "config" / "staging.json").exists()
    assert pack_config_cli.stack_pack_config_path("staging", project) == "policies/config/prod.json"
    assert offline_plan.run("staging", tmp_path / "build", project) == PROD_EXIT
    plan_md = (tmp_path / "build" / "staging" / "plan.md").read_text()
    assert (
        "Pack config: `policies/config/prod.json` (named by `policyConfig` in Pulumi.staging.yaml; "
        "image digests required)."
    ) in plan_md
    if images.unresolved():
        assert "NOT DEPLOYABLE with requireDigest (policies/config/prod.json)" in plan_md


def test_without_the_key_the_stack_s_own_file_or_the_defaults_apply_and_the_plan_says_which(tmp_path):
    prod_file = (ROOT / "Pulumi.prod.yaml").read_text()
    unnamed = "".join(line + "\n" for line in prod_file.splitlines() if "llm-serving:policyConfig" not in line)
    project = _project_with(tmp_path, {"staging": unnamed, "broken": prod_file.replace("prod.json", "nope.json")})
    assert pack_config_cli.stack_pack_config_path("staging", project) == "policies/config/staging.json"
    assert offline_plan.pack_config("staging", project) is None
    line = offline_plan._pack_config_line("staging", None)
    assert "Pack config: none" in line and "image digests are not required" in line
    assert "`policyConfig: policies/config/prod.json`" in line
    assert offline_plan._pack_config_line("dev", {}) == (
        "Pack config: `policies/config/dev.json` (the stack's own by its name (Pulumi.dev.yaml sets no "
        "`policyConfig`))."
    )
    # A named file that does not exist is refused, not replaced by the defaults.
    with pytest.raises(ConfigError, match=r"Pulumi\.broken\.yaml: policyConfig: policies/config/nope\.json does not"):
        pack_config_cli.stack_pack_config_path("broken", project)
    with pytest.raises(ConfigError, match=r"policyConfig: policies/config/nope\.json does not exist"):
        offline_plan.pack_config("broken", project, "policies/config/nope.json")


def test_the_pack_config_command_prints_the_path_or_one_line(capsys):
    assert pack_config_cli.main(["--stack", "prod"]) == 0
    assert capsys.readouterr().out == "policies/config/prod.json\n"
    assert pack_config_cli.main(["--stack", "no-such-stack"]) == 2
    assert capsys.readouterr().err.startswith("error: no stack file Pulumi.no-such-stack.yaml")
