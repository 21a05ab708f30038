"""Decisions shared by every part of the stack, made once.

The program, its tests and the policy pack all import these names; a literal that appears in two
modules drifts, and a drifted taint key or annotation is exactly the kind of bug that only shows up
as a Pending pod on a real cluster.
"""

from __future__ import annotations

# The GPU and Network Operators' daemonsets tolerate this taint key by default, and the EKS/GKE GPU
# node images advertise the resource under the same name, so one key serves both purposes.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_EFFECT = "NoSchedule"
GPU_RESOURCE = "nvidia.com/gpu"

# Label and annotation keys. A DNS-style prefix keeps them apart from other tools' keys.
PREFIX = "llm-serving.io"
LABEL_POOL = f"{PREFIX}/pool"
# The LABEL_POOL value of the untainted CPU nodes of a cluster this program creates.
SYSTEM_POOL = "system"
LABEL_ACCELERATOR = f"{PREFIX}/accelerator"
LABEL_MODEL = f"{PREFIX}/model"
# A 40-hex commit fits the 63-character label value limit, so the revision can be selected on.
LABEL_REVISION = f"{PREFIX}/revision"
LABEL_COMPONENT = f"{PREFIX}/component"
ANNOTATION_REPO = f"{PREFIX}/hub-repo"
# Seconds the sizing engine expects the engine to need before /health answers. The policy pack's
# startup-probe-budget rule compares the startup probe against this number.
ANNOTATION_LOAD_SECONDS = f"{PREFIX}/load-time-estimate-seconds"

# Where a server finds its weights inside the container, whichever way they got there.
MODEL_MOUNT_PATH = "/models"

# Port vLLM's OpenAI-compatible server listens on (also its /metrics).
SERVER_PORT = 8000
