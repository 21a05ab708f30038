"""Run a tool's main() on case after case in a worker process with bounded memory and time.

A subprocess per case would spend most of its time importing Pulumi and pydantic; a worker imports
once and runs many cases, which keeps `make test` fast and lets `make fuzz` try thousands. The
worker runs under RLIMIT_AS, so unbounded memory growth is a MemoryError (or the worker's death)
instead of a machine that swaps; the parent kills a worker whose case outlives its wall-clock limit
and reports a hang. Every outcome is classified by `Outcome`.

Parent side: `Worker(tool)`. Child side: `python -m tests.support.fuzz.harness <tool>`, one JSON case per
line on stdin, one JSON outcome per line on stdout.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import select
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from tests.support import paths

ROOT = paths.ROOT

# Address space of a worker. An alias bomb in the stack file used to grow past 5 GB within a minute.
# The plan renders the Helm charts with Helm's Go SDK (offline_plan/helm), whose runtime maps a large
# PROT_NONE reservation for its page allocator that RLIMIT_AS counts although nothing is resident
# (golang/proposal design/35112-scaling-the-page-allocator.md, "ulimit -v, which restricts even
# PROT_NONE mappings"; golang/go#38010): a worker that has rendered once then failed the next
# evaluation with MemoryError under 2 GiB. A dev plan's VmPeak is ~2.6 GB at ~0.35 GB resident, so
# the plan's cap is 3 GiB, still far below the bomb.
MEMORY_LIMIT_BYTES = {"plan": 3 * 1024**3, "sizing": 1 * 1024**3, "check": 2 * 1024**3}
# A worker is replaced after this many cases, so one case's leftovers never decide another's fate.
CASES_PER_WORKER = 40


def limit_memory(limit: int):
    """A preexec_fn that caps the child's address space."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


@dataclass
class Outcome:
    exit: int | None
    stdout: str
    stderr: str
    seconds: float
    traceback: str | None = None
    hang: bool = False
    crashed: bool = False

    @property
    def clean(self) -> bool:
        """Ended by itself, with an exit code, without a traceback anywhere."""
        return (
            not self.hang
            and not self.crashed
            and self.traceback is None
            and "Traceback (most recent call last)" not in self.stderr + self.stdout
        )

    def describe(self) -> str:
        if self.hang:
            return f"hang (killed after {self.seconds:.0f} s)"
        if self.crashed:
            return f"worker died: {self.stderr[-500:]}"
        if self.traceback:
            return f"traceback:\n{self.traceback[-3000:]}"
        return f"exit {self.exit} in {self.seconds:.1f} s; stderr: {self.stderr[-1500:]}"


class Worker:
    """A worker process for one tool; `run(case, seconds)` returns an Outcome."""

    def __init__(self, tool: str):
        self.tool = tool
        self.proc: subprocess.Popen | None = None
        self.cases = 0

    def _start(self) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.fuzz.harness", self.tool],
            cwd=ROOT,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.cases = 0

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream:
                    stream.close()
            self.proc = None

    def run(self, case: dict, seconds: float) -> Outcome:
        if self.proc is None or self.proc.poll() is not None or self.cases >= CASES_PER_WORKER:
            self.stop()
            self._start()
        assert self.proc and self.proc.stdin and self.proc.stdout
        self.cases += 1
        started = time.monotonic()
        try:
            self.proc.stdin.write(json.dumps(case) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._died(started)
        ready, _, _ = select.select([self.proc.stdout], [], [], seconds)
        if not ready:
            self.stop()
            return Outcome(None, "", "", time.monotonic() - started, hang=True)
        line = self.proc.stdout.readline()
        if not line:
            return self._died(started)
        return Outcome(**json.loads(line))

    def _died(self, started: float) -> Outcome:
        err = ""
        if self.proc is not None:
            self.proc.wait()
            err = (self.proc.stderr.read() if self.proc.stderr else "")[-2000:]
            err = f"exit status {self.proc.returncode}; {err}"
        self.stop()
        return Outcome(None, "", err, time.monotonic() - started, crashed=True)


# ---------------------------------------------------------------------------------------------
# Child side


def _run_plan(case: dict, scratch: Path) -> int:
    from offline_plan import write

    project = scratch / "project"
    project.mkdir(exist_ok=True)
    main = project / "__main__.py"
    if not main.exists():
        main.symlink_to(ROOT / "__main__.py")
    # The pack configs a stack file names (policyConfig: policies/config/prod.json), as in the project.
    if not (project / "policies").exists():
        (project / "policies").symlink_to(ROOT / "policies")
    stack = case.get("stack", "fuzz")
    for old in project.glob("Pulumi.*.yaml"):
        old.unlink()
    if "stack_text" in case:
        (project / f"Pulumi.{stack}.yaml").write_bytes(case["stack_text"].encode("utf-8", "surrogateescape"))
    return write.run(stack, scratch / "out", project)


def _run_sizing(case: dict, scratch: Path) -> int:
    from planner import sizing_cli

    argv = [
        arg.replace("{config}", str(scratch / "config.json")).replace("{log}", str(scratch / "startup.log"))
        for arg in case["argv"]
    ]
    if "log_bytes" in case:
        (scratch / "startup.log").write_bytes(case["log_bytes"].encode("latin-1"))
    path = scratch / "config.json"
    if path.exists() or path.is_symlink():
        path.unlink()
    if "config_bytes" in case:
        path.write_bytes(case["config_bytes"].encode("latin-1"))
    elif "config_link" in case:
        path.symlink_to(case["config_link"])
    return sizing_cli.main(argv)


def _run_check(case: dict, scratch: Path) -> int:
    from policies import check

    folder = scratch / "manifests"
    if folder.exists():
        for f in folder.iterdir():
            f.unlink()
    else:
        folder.mkdir()
    for name, data in case.get("files", {}).items():
        (folder / name).write_bytes(data.encode("latin-1"))
    for name in case.get("fifos", []):
        os.mkfifo(folder / name)
    config = scratch / "config.json"
    if "config_bytes" in case:
        config.write_bytes(case["config_bytes"].encode("latin-1"))
    argv = [arg.replace("{folder}", str(folder)).replace("{config}", str(config)) for arg in case["argv"]]
    return check.main(argv)


RUNNERS = {"plan": _run_plan, "sizing": _run_sizing, "check": _run_check}


def _child(tool: str) -> None:
    # The worker caps its own address space, before it imports the tool, rather than the parent
    # through a preexec_fn: that would run Python between fork and exec in a parent with threads
    # (pytest-xdist's, a fault server's), which the subprocess documentation calls unsafe.
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES[tool], MEMORY_LIMIT_BYTES[tool]))
    runner = RUNNERS[tool]
    scratch = Path(tempfile.mkdtemp(prefix=f"fuzz-{tool}-"))
    protocol = sys.stdout
    for line in sys.stdin:
        case = json.loads(line)
        out, err = io.StringIO(), io.StringIO()
        started = time.monotonic()
        trace = None
        code: int | None = None
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = runner(case, scratch)
        except SystemExit as exc:  # argparse exits 2 on a usage error, as the real command would
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            trace = traceback.format_exc()
        protocol.write(
            json.dumps(
                {
                    "exit": code,
                    "stdout": out.getvalue()[-20000:],
                    "stderr": err.getvalue()[-20000:],
                    "seconds": time.monotonic() - started,
                    "traceback": trace,
                }
            )
            + "\n"
        )
        protocol.flush()


if __name__ == "__main__":
    _child(sys.argv[1])
