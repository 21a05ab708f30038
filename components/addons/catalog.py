"""What an add-on is: the charts (or manifests) that install it, and the CRDs they bring.

Pure Python: the add-on modules describe themselves with these types, `needs.py` decides which
a stack needs, `install.py` turns them into resources, and the offline plan and the tests read
the same descriptions. Chart facts are cited in each add-on's module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class ValuesFn(Protocol):
    """Values functions receive the node selector of the untainted system pool (None where the
    cluster is not ours to shape) and the stack's pull-through caches (images.pullThrough: upstream
    registry -> the prefix that serves it; common/images.py `chart_image`), and return the chart's values."""

    def __call__(
        self, system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
    ) -> dict[str, Any]: ...


def no_values(
    system_node_selector: Mapping[str, str] | None, image_mirrors: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class HelmChart:
    """One Helm release at an exact chart version."""

    release: str
    """Fixed release name: charts name their objects after it (a Pulumi suffix would rename them)."""
    chart: str
    """Chart name in `repo`, or a full `oci://` reference."""
    version: str
    """Exact chart version, in the form the registry tags it (some charts keep a leading "v")."""
    namespace: str
    values_url: str
    """The chart's values.yaml at this version; tests/fixtures/helm/addon-value-keys.yaml lists the
    keys the program sets with their line numbers there."""
    repo: str | None = None
    """HTTPS Helm repository; None for an `oci://` chart."""
    values: ValuesFn = no_values
    pod_security: str = (
        "baseline: the chart runs controllers and webhooks without host namespaces, host paths, host ports "
        "or privileged containers; their securityContexts were not checked against restricted here, so "
        "warn and audit at restricted report any gap without refusing the pods."
    )
    """The Pod Security level the chart's pods meet, and why it is weaker than restricted: "<level>:
    <reason>" (common/pod_security.py). The add-on's namespace enforces it."""

    @property
    def install_command(self) -> str:
        """The helm command that installs this chart as the program would on a cluster it does not
        shape (no system pool): the same values, as --set flags."""
        source = f"{self.chart}" if self.repo is None else f"{self.chart} --repo {self.repo}"
        flags = "".join(f" --set {path}={value}" for path, value in _flatten(self.values(None)))
        return (
            f"helm upgrade --install {self.release} {source} --version {self.version} "
            f"--namespace {self.namespace} --create-namespace{flags}"
        )


def _flatten(values: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            out += _flatten(value, path)
        else:
            out.append((path, str(value).lower() if isinstance(value, bool) else str(value)))
    return out


@dataclass(frozen=True)
class Manifests:
    """Plain manifests from a release asset (no chart exists), applied with the provider's YAML support."""

    name: str
    url: str
    version: str

    @property
    def install_command(self) -> str:
        return f"kubectl apply --server-side -f {self.url}"


@dataclass(frozen=True)
class CloudFeature:
    """A cluster feature the cloud installs and manages when it is turned on (GKE's Gateway API):
    the cluster layer turns it on for a cluster it creates, so the add-on is always `provided_by`
    the cloud there; on an existing cluster `command` is what the owner runs."""

    name: str
    command: str
    version: str

    @property
    def install_command(self) -> str:
        return self.command


@dataclass(frozen=True)
class Crd:
    """A CRD an add-on installs that the program's own objects use."""

    group: str
    kind: str
    plural: str

    @property
    def name(self) -> str:
        """The CRD object's name, `<plural>.<group>`: what an existing cluster is looked up by."""
        return f"{self.plural}.{self.group}"


@dataclass(frozen=True)
class AddOn:
    key: str
    """The name in `addons.preinstalled` (and in plan.md)."""
    title: str
    version: str
    """The version a person would name it by (the app or chart release)."""
    steps: tuple[HelmChart | Manifests | CloudFeature, ...]
    """What installs it, in order: each step waits for the one before."""
    crds: tuple[Crd, ...]
    """CRDs the program's objects use; their objects wait for the add-on's last step, by then the
    CRDs exist and the controller (and its admission webhooks) answer."""
    requires: tuple[str, ...] = ()
    """Other add-ons installed first (KServe's webhooks need cert-manager's certificates)."""
    crd_step: int = 0
    """Which step installs `crds` (each add-on's first: a CRD chart, or a chart carrying its CRDs)."""
    docs: str = ""

    @property
    def install_commands(self) -> list[str]:
        return [step.install_command for step in self.steps]
