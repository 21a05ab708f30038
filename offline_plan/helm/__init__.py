"""Every Helm release of an evaluated stack, rendered by Helm's own engine from charts/.

`rendered(evaluation)` renders them once per evaluation (a HelmReleaseError, a ValueError, names
the release that cannot be rendered); `write_manifests` puts the objects in the plan's manifests
folder; `plan_section` is plan.md's section on them.
"""

from __future__ import annotations

from pathlib import Path

from offline_plan.helm.engine import HelmReleaseError, RenderedRelease, render
from offline_plan.helm.manifests import write
from offline_plan.helm.pod_security import namespace_levels
from offline_plan.helm.releases import Release
from offline_plan.helm.releases import releases as stack_releases
from offline_plan.helm.summary import section
from offline_plan.mock_runtime import Evaluation

__all__ = ["HelmReleaseError", "Release", "RenderedRelease", "plan_section", "rendered", "write_manifests"]

# The last evaluation rendered, kept with it (so its id cannot be reused while cached): the plan
# renders once and its sections read the result.
_LAST: list[tuple[Evaluation, list[RenderedRelease]]] = []


def rendered(evaluation: Evaluation) -> list[RenderedRelease]:
    """Every release rendered; raises HelmReleaseError with one line per release that fails."""
    if _LAST and _LAST[0][0] is evaluation:
        return _LAST[0][1]
    done, problems = [], []
    for release in stack_releases(evaluation):
        try:
            done.append(render(release))
        except HelmReleaseError as err:
            problems.append(str(err))
    if problems:
        raise HelmReleaseError("\n  ".join(problems))
    _LAST[:] = [(evaluation, done)]
    return done


def write_manifests(evaluation: Evaluation, directory: Path) -> list[Path]:
    return write(rendered(evaluation), directory)


def plan_section(evaluation: Evaluation) -> list[str]:
    return section(rendered(evaluation), namespace_levels(evaluation.kubernetes_objects))
