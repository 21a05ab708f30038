"""Does the NVIDIA driver on each model's nodes run the CUDA its engine image was built with?

One row per model for the stack outputs and plan.md: the engine image's CUDA and the pool's driver
(common/engine.py, common/driver_versions.py), each with whether it is established, and the
verdict. A fact that is not established is still checked with its best value, and the row says
which command settles it. tests/support/first_apply_cloud.py checks the same from the resources the program
creates (the pinned AMI releases, the GKE driver setting, the GPU Operator's values).
"""

from __future__ import annotations

from common import driver_versions, engine
from common.facts import Fact
from common.gpu_driver import OperatorValuesError
from planner.plan import ModelPlan
from stack_config import StackConfig


def engine_cuda(image: str, engine_name: str) -> Fact:
    """Both engines run the model's image (`models[].image`): the KServe path's own ServingRuntime
    runs it too (components/serving/kserve.py)."""
    known = engine.image_cuda(image)
    if known is not None:
        return known
    return Fact(
        subject=f"CUDA of {image}",
        value=None,
        source="not recorded in common/engine.py",
        established=False,
        resolve_with=f'docker run --rm --entrypoint python3 {image} -c "import torch; print(torch.version.cuda)"',
    )


def pool_driver(config: StackConfig, gke_driver_version: str | None) -> Fact:
    gpu_operator = config.operators.gpuOperator
    mode = gpu_operator.driver if gpu_operator.enabled else "auto"
    try:
        return driver_versions.driver_fact(config.cloud.value, mode, gke_driver_version)
    except OperatorValuesError:
        # Without the GPU Operator on an existing cluster, the driver is whatever the nodes have.
        return driver_versions.PREINSTALLED_DRIVER


def verdict(cuda: Fact, driver: Fact) -> str:
    if cuda.value is None or driver.value is None:
        return "unknown"
    runs = driver_versions.driver_runs(driver.value, cuda.value)
    if runs is None:
        return "unknown"
    needed = driver_versions.minimum_driver(cuda.value)
    return f"runs (CUDA {cuda.value} needs >= {needed})" if runs else f"TOO OLD (CUDA {cuda.value} needs >= {needed})"


def driver_rows(config: StackConfig, plans: list[ModelPlan]) -> list[dict[str, str]]:
    rows = []
    for p in plans:
        cuda = engine_cuda(p.model.image, p.model.engine)
        driver = pool_driver(config, p.pool.gkeDriverVersion if config.cloud.value == "gcp" else None)
        rows.append(
            {
                "model": p.served_name,
                "pool": p.pool.name,
                "engineCuda": cuda.describe(),
                "driver": driver.describe(),
                "verdict": verdict(cuda, driver),
                "toResolve": " | ".join(f.resolve_with for f in (cuda, driver) if not f.established and f.resolve_with),
                "sources": " | ".join(f.source for f in (cuda, driver)),
            }
        )
    return rows
