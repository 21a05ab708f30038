"""Every Helm release of an evaluated stack, rendered by Helm's own engine from charts/.

`rendered(evaluation)` renders them once per evaluation (a HelmReleaseError, a ValueError, names
the release that cannot be rendered); `write_manifests` puts the objects in the plan's manifests
folder; `plan_section` is plan.md's section on them, ending with where their pods can schedule and
whether the system pool holds them (`placement_report`, whose `problems` are plan warnings).
"""

from __future__ import annotations

from pathlib import Path

from offline_plan.helm.engine import HelmReleaseError, RenderedRelease, render
from offline_plan.helm.fit_report import Report, report
from offline_plan.helm.manifests import write
from offline_plan.helm.pod_security import namespace_levels
from offline_plan.helm.pods import summaries
from offline_plan.helm.pools import pools as stack_pools
from offline_plan.helm.releases import Release
from offline_plan.helm.releases import releases as stack_releases
from offline_plan.helm.summary import section
from offline_plan.mock_runtime import Evaluation

__all__ = [
    "HelmReleaseError",
    "Release",
    "RenderedRelease",
    "Report",
    "placement_report",
    "plan_section",
    "rendered",
    "write_manifests",
]

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


def placement_report(evaluation: Evaluation) -> Report:
    """The rendered pods and the program's own against the pools the stack creates."""
    return report(
        rendered(evaluation), summaries(evaluation.kubernetes_objects), stack_pools(evaluation), evaluation.stack
    )


def plan_section(evaluation: Evaluation) -> list[str]:
    lines = section(rendered(evaluation), namespace_levels(evaluation.kubernetes_objects))
    return lines + placement_report(evaluation).lines
