"""model-revision-pinned and hub-offline-serving: serve exactly the weights that were reviewed.

A Hub branch ('main') or tag moves; a server restarted next week on `--revision main` may load
different weights and a different tokenizer than the ones sized and tested. Everything that names
a revision (mirror Jobs' `hf download --revision`, any `--revision` flag, KServe `hf://org/model:rev`
storage URIs, the revision label) must name the 40-hex commit, and a vLLM server that loads a Hub repo
id (`vllm serve org/model`) must name one with --revision.

A server that reads mirrored weights must not reach for the Hub at all: without HF_HUB_OFFLINE=1,
huggingface_hub still calls the Hub for metadata, so a Hub outage or rate limit turns into a failed
rollout even though the weights are on disk.
"""

from __future__ import annotations

import re

from common.contract import LABEL_REVISION, MODEL_MOUNT_PATH
from policies.commands import flag_values, is_reference, literal_env, tokens
from policies.gpu import is_gpu_container
from policies.objects import Finding, as_dict, as_list, as_str, is_commit, is_unknown
from policies.workloads import ContainerView, kserve_components, workload

REVISION_FLAGS = ("--revision", "--tokenizer-revision", "--code-revision")
# Container templates that KServe merges into an InferenceService's pod (policies/workloads.py).
KSERVE_RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
_HF_URI_RE = re.compile(r"hf://[^\s\"']+")
# huggingface_hub's constants._is_true: these spellings mean "on".
_TRUE = {"1", "ON", "YES", "TRUE"}


def hf_uri_problem(uri: str) -> str | None:
    """`hf://org/model:<rev>` (KServe's Hugging Face storage URI) must end in a 40-hex commit."""
    path = uri[len("hf://") :]
    _, colon, rev = path.rpartition(":") if ":" in path else (path, "", "")
    if not colon or not rev:
        return f"storage URI '{uri}' names no revision, so it follows the moving 'main' branch"
    if not is_commit(rev):
        return f"storage URI '{uri}' names revision '{rev}', a branch or tag rather than a 40-hex commit"
    return None


def _is_hub_download(toks: list[str]) -> bool:
    for i, t in enumerate(toks[:-1]):
        if t.rsplit("/", 1)[-1] in ("hf", "huggingface-cli") and toks[i + 1] == "download":
            return True
    return False


# A Hub repo id as vLLM takes it for its model: `org/name` (huggingface_hub's repo id rules: letters,
# digits, '-', '_', '.'), not a path (absolute, `./`, `~`) and not a URI.
_HUB_REPO_ID_RE = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")
# The vllm/vllm-openai image's entrypoint is `vllm serve` (vllm-project/vllm docker/Dockerfile, the
# vllm-openai target's `ENTRYPOINT ["vllm", "serve"]`), so a container of it with only `args` starts with the model.
_VLLM_IMAGE_RE = re.compile(r"(^|/)vllm-openai([:@]|$)")


# vLLM's model when none is named: vllm@v0.32.0 vllm/config/model.py `ModelConfig.model = "Qwen/Qwen3-0.6B"`,
# taken by `vllm serve` when neither the positional model_tag nor --model is given
# (vllm@v0.32.0 vllm/entrypoints/cli/serve.py ServeSubcommand.cmd). It is a Hub repo id like any other.
VLLM_DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
# Flags whose value looks like `org/name` but is not the model the server loads.
_NOT_THE_MODEL_FLAGS = ("--served-model-name",)


def _serve_line_models(rest: list[str], default: bool = True) -> list[str]:
    """The model of one `vllm serve` line (the tokens after `serve`).

    argparse takes the positional model_tag anywhere among the options, so a model after the flags
    (`vllm serve --port 8000 org/model`) counts too: any argument that is not the value of a flag
    known not to name the model. With no model and no --model at all, vLLM loads its default.
    """
    if rest and not rest[0].startswith("-"):
        return [rest[0]]
    if flag_values(rest, ("--model",)):
        return []  # --model is read on its own
    found = []
    for i, t in enumerate(rest):
        if t.startswith("-") or (i > 0 and rest[i - 1] in _NOT_THE_MODEL_FLAGS):
            continue
        if t.startswith(("/", "./", "~")) or _HUB_REPO_ID_RE.fullmatch(t) or is_reference(t):
            found.append(t)
    return found[:1] if found or not default else [VLLM_DEFAULT_MODEL]


def served_models(container: dict, toks: list[str], template: bool = False) -> list[str]:
    """The model a vLLM server container loads: `vllm serve <model>` (before or after its flags),
    `--model <model>` / `--model=<model>`, vLLM's default model when a `vllm serve` line names none, or
    the first argument of the vllm-openai image's own `vllm serve` entrypoint. `$(VAR)`, `$VAR` and
    `${VAR}` were already replaced with the container's literal env values (VLLM_MODEL, MODEL_ID, ...).
    A `template` (a KServe ServingRuntime's container) gets the InferenceService model container's
    args merged in at admission, so a `vllm serve` there without a model names none yet."""
    models = [value for _, value in flag_values(toks, ("--model",)) if value]
    for i, t in enumerate(toks[:-1]):
        if t.rsplit("/", 1)[-1] == "vllm" and toks[i + 1] == "serve":
            models.extend(_serve_line_models(toks[i + 2 :], default=not template))
    image = as_str(container.get("image")) or ""
    if not container.get("command") and _VLLM_IMAGE_RE.search(image):
        if toks and not toks[0].startswith("-"):
            models.append(toks[0])
        elif not models:
            models.extend(_serve_line_models(toks, default=not template))
    return list(dict.fromkeys(models))


def _unpinned_hub_models(container: dict, toks: list[str], template: bool) -> list[str]:
    """Hub repo ids a vLLM server loads with no --revision: vLLM then downloads the moving 'main'."""
    if flag_values(toks, ("--revision",)):
        return []  # a --revision is checked on its own above
    models = served_models(container, toks, template)
    return [m for m in models if not is_reference(m) and _HUB_REPO_ID_RE.fullmatch(m)]


def _container_revision_problems(c: ContainerView, template: bool = False) -> list[str]:
    problems = []
    toks = tokens(c.container)
    for model in _unpinned_hub_models(c.container, toks, template):
        named = model in toks or any(v == model for _, v in flag_values(toks, ("--model",)))
        what = f"Hub model '{model}'" if named else f"no model, so vLLM's default Hub model '{model}',"
        problems.append(
            f"serves {what} with no --revision, so vLLM loads whatever the moving 'main' branch "
            f"holds when the pod starts"
        )
    for flag, value in flag_values(toks, REVISION_FLAGS):
        if value is None:
            problems.append(f"passes {flag} without a value")
        elif is_reference(value):
            continue  # comes from a ConfigMap/Secret; cannot be checked here
        elif not is_commit(value):
            problems.append(f"passes {flag} '{value}', a branch or tag rather than a 40-hex commit")
    if _is_hub_download(toks) and not any(f == "--revision" for f, _ in flag_values(toks, ("--revision",))):
        problems.append("runs 'hf download' without --revision, which downloads the moving 'main' branch")
    texts = list(toks) + list(literal_env(c.container).values())
    if c.section == "model":
        uri = as_str(c.container.get("storageUri"))
        texts += [uri] if uri else []
    for text in texts:
        for uri in _HF_URI_RE.findall(text):
            problem = hf_uri_problem(uri)
            if problem and problem not in problems:
                problems.append(problem)
    return problems


def model_revision_pinned(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    out = []
    labels = [("workload", as_dict(w.metadata.get("labels")))] + [
        (f"pod template ({p.where})", p.labels) for p in w.pods
    ]
    seen = set()
    for where, lab in labels:
        value = lab.get(LABEL_REVISION)
        if value is None or is_unknown(value) or (str(value), where) in seen:
            continue
        seen.add((str(value), where))
        if not is_commit(str(value)):
            out.append(
                Finding(
                    f"{w.ref}: the {where} label '{LABEL_REVISION}' is '{value}', not a 40-hex commit; "
                    f"set it to the commit the weights were mirrored from.",
                    None,
                )
            )
    for pod in w.pods:
        for c in pod.containers:
            for problem in _container_revision_problems(c, template=w.kind in KSERVE_RUNTIME_KINDS):
                out.append(
                    Finding(
                        f"{w.ref}: {c.label} {problem}; pin the 40-hex commit sha of the model "
                        f"revision (see the Hub's 'main' ref at review time).",
                        c.name,
                    )
                )
    # storageUri directly on a KServe component (older API shape).
    if w.kind == "InferenceService":
        spec = as_dict(obj.get("spec"))
        for where, comp in kserve_components(spec):
            uri = as_str(comp.get("storageUri"))
            uri_problem = hf_uri_problem(uri) if uri and uri.startswith("hf://") else None
            if uri_problem:
                out.append(
                    Finding(
                        f"{w.ref}: {where} {uri_problem}; pin the 40-hex commit sha ('hf://org/model:<sha>').", None
                    )
                )
    return out


def _mounts_models(c: ContainerView) -> bool:
    for m in as_list(c.container.get("volumeMounts")):
        path = (as_str(as_dict(m).get("mountPath")) or "").rstrip("/")
        if path == MODEL_MOUNT_PATH or path.startswith(MODEL_MOUNT_PATH + "/"):
            return True
    return False


def _offline_set(c: ContainerView) -> bool | None:
    """True/False when HF_HUB_OFFLINE is known; None when it comes from elsewhere (valueFrom/envFrom)."""
    for e in as_list(c.container.get("env")):
        e = as_dict(e)
        if e.get("name") != "HF_HUB_OFFLINE":
            continue
        if "valueFrom" in e or is_unknown(e.get("value")):
            return None
        return str(e.get("value", "")).strip().upper() in _TRUE
    if c.container.get("envFrom"):
        return None  # a ConfigMap may set it; the checker cannot see ConfigMap contents here
    return False


def hub_offline_serving(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    # Mirror Jobs need the Hub; only long-running servers must be offline.
    if w is None or not w.long_running:
        return []
    out = []
    for pod in w.pods:
        for c in pod.containers:
            if not c.runs_alongside or not (is_gpu_container(c) or _mounts_models(c)):
                continue
            if _offline_set(c) is False:
                reason = (
                    "requests GPUs" if is_gpu_container(c) else f"mounts the mirrored weights at {MODEL_MOUNT_PATH}"
                )
                out.append(
                    Finding(
                        f"{w.ref}: {c.label} {reason} but does not set HF_HUB_OFFLINE=1; add env "
                        f"{{name: HF_HUB_OFFLINE, value: '1'}} so the server never depends on the Hub being up.",
                        c.name,
                    )
                )
    return out
