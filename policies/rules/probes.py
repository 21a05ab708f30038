"""probes-declared and startup-probe-budget: health checks that fit a model server.

A vLLM server answers /health only after the weights are in GPU memory, which takes minutes for a
large model. Kubernetes' default probe timing (periodSeconds 10, failureThreshold 3, so 30 s)
would restart it in a loop, each restart re-reading the weights. So a GPU serving container needs
a startup probe whose budget covers the load-time estimate the program records on the workload
(annotation ANNOTATION_LOAD_SECONDS), and a liveness probe lenient enough to ride out a long
prefill under load.

probes-declared agrees with the Gatekeeper library's k8srequiredprobes (readiness and liveness,
each with a handler) and checkov CKV_K8S_8/9 (Jobs and CronJobs exempt; init containers cannot
have probes). Kyverno's require-probes accepts any ONE probe; this rule is stricter on purpose.
"""

from __future__ import annotations

from common.contract import ANNOTATION_LOAD_SECONDS
from policies.gpu import is_gpu_container
from policies.objects import Finding, as_dict, as_number, is_unknown, seconds
from policies.workloads import ContainerView, PodView, Workload, workload

# Kubernetes defaults for unset probe fields (core/v1 Probe).
DEFAULT_PERIOD = 10.0
DEFAULT_FAILURE_THRESHOLD = 3.0
DEFAULT_INITIAL_DELAY = 0.0
HANDLERS = ("httpGet", "tcpSocket", "exec", "grpc")

DEFAULT_MINIMUM_SECONDS = 180
DEFAULT_LIVENESS_MINIMUM_SECONDS = 60


def _has_probe(c: ContainerView, probe: str) -> bool:
    p = c.container.get(probe)
    if is_unknown(p):
        return True
    return isinstance(p, dict) and any(p.get(h) is not None for h in HANDLERS)


def is_gpu_server(w: Workload, c: ContainerView) -> bool:
    return w.long_running and c.runs_alongside and is_gpu_container(c)


def probes_declared(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None or not w.long_running:
        return []
    out = []
    for pod in w.pods:
        for c in pod.containers:
            if not c.runs_alongside:
                continue
            wanted = ["livenessProbe", "readinessProbe"]
            if is_gpu_container(c):
                wanted.append("startupProbe")
            missing = [p for p in wanted if not _has_probe(c, p)]
            if missing:
                why = (
                    " (a GPU server needs a startup probe so the weight load is not mistaken for a hang)"
                    if "startupProbe" in missing
                    else ""
                )
                out.append(
                    Finding(
                        f"{w.ref}: {c.label} has no {', '.join(missing)} with a handler (httpGet, tcpSocket, exec "
                        f"or grpc){why}; add the missing probes so Kubernetes routes traffic only to a ready server "
                        f"and restarts a hung one.",
                        c.name,
                    )
                )
    return out


def _timing(probe: dict, field: str, default: float) -> float | None:
    value = probe.get(field)
    if value is None:
        return default
    if is_unknown(value):
        return None
    return as_number(value)


def probe_window(probe: dict, with_initial_delay: bool = True) -> float | None:
    """initialDelaySeconds + failureThreshold x periodSeconds, with Kubernetes defaults; None when a
    field is unknown during preview."""
    delay = _timing(probe, "initialDelaySeconds", DEFAULT_INITIAL_DELAY) if with_initial_delay else 0.0
    threshold = _timing(probe, "failureThreshold", DEFAULT_FAILURE_THRESHOLD)
    period = _timing(probe, "periodSeconds", DEFAULT_PERIOD)
    if delay is None or threshold is None or period is None:
        return None
    return delay + threshold * period


def load_estimate(w: Workload, pod: PodView) -> tuple[float | None, str | None]:
    """The program's load-time estimate for this pod (max of workload and pod template annotation),
    and an error clause when the annotation is not a number."""
    best = None
    for annotation_map in (as_dict(w.metadata.get("annotations")), pod.annotations):
        raw = annotation_map.get(ANNOTATION_LOAD_SECONDS)
        if raw is None or is_unknown(raw):
            continue
        try:
            value = float(str(raw).strip())
        except ValueError:
            return None, f"annotation '{ANNOTATION_LOAD_SECONDS}' is '{raw}', not a number of seconds"
        best = value if best is None else max(best, value)
    return best, None


def startup_probe_budget(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None or not w.long_running:
        return []
    minimum = float(config.get("minimumSeconds", DEFAULT_MINIMUM_SECONDS))
    live_min = float(config.get("livenessMinimumSeconds", DEFAULT_LIVENESS_MINIMUM_SECONDS))
    out = []
    for pod in w.pods:
        estimate, error = load_estimate(w, pod)
        for c in pod.containers:
            if not is_gpu_server(w, c):
                continue
            if error:
                out.append(Finding(f"{w.ref}: {error}; write the estimated load time in seconds (e.g. '540').", c.name))
                continue
            required = max(minimum, estimate or 0.0)
            basis = (
                f"the load-time estimate of {seconds(estimate)} ({ANNOTATION_LOAD_SECONDS})"
                if estimate is not None and estimate >= minimum
                else f"the configured minimum of {seconds(minimum)}"
            )
            startup = c.container.get("startupProbe")
            liveness = c.container.get("livenessProbe")
            if isinstance(startup, dict):
                window, which = probe_window(startup), "startup probe"
            elif isinstance(liveness, dict):
                # Without a startup probe the liveness probe starts judging right away.
                window, which = probe_window(liveness), "liveness probe (there is no startup probe)"
            else:
                window, which = None, None
            if window is not None and window < required:
                out.append(
                    Finding(
                        f"{w.ref}: {c.label} gives its {which} a budget of {seconds(window)} (initialDelaySeconds + "
                        f"failureThreshold x periodSeconds), less than {basis}; raise the startup probe's "
                        f"failureThreshold (or periodSeconds) to at least {seconds(required)} so a slow weight load "
                        f"is not killed as a crash.",
                        c.name,
                    )
                )
            if isinstance(liveness, dict):
                live = probe_window(liveness, with_initial_delay=False)
                if live is not None and live < live_min:
                    out.append(
                        Finding(
                            f"{w.ref}: {c.label} liveness probe restarts the server after {seconds(live)} of failed "
                            f"checks (failureThreshold x periodSeconds), less than the minimum of {seconds(live_min)}; "
                            f"a busy GPU server can answer slowly during a long prefill, so raise failureThreshold "
                            f"or periodSeconds.",
                            c.name,
                        )
                    )
    return out
