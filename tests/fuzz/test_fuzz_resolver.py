"""Fuzzing the digest resolver against a lying registry.

tests/support/registry_standin.py answers the manifest GET byte for byte as the drawn case says
(tests/support/fuzz/strategies.py `registry_lies`): a status line that is not HTTP or not 200, a
content type that is not a manifest's or another kind's, a body that is empty, HTML, half a
manifest, another kind or random bytes, a body shorter than its Content-Length or cut by a bad
chunk, 150 headers, a lying or malformed Docker-Content-Digest, a token no Bearer header can hold.
Property: the resolver, run as users run it with --write on a copy of common/images.py, ends in
time, prints no traceback, exits as the case says (0 resolved, 1 refused, 3 a digest check failed)
with one line on stderr when it refuses, and writes a digest only when it exits 0, and then the
sha256 of the body served.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from hypothesis import example, given

from tests.support import paths
from tests.support.fuzz import figures
from tests.support.fuzz.resolver_runs import MARGIN, TIMEOUT, run
from tests.support.fuzz.settings import fuzz_settings, survey
from tests.support.fuzz.strategies import RegistryCase, registry_lies
from tests.support.registry_standin import INDEX_TYPE, MANIFEST, Answer


def resolver_problems(case: RegistryCase, proc, seconds: float, module: Path, before: str) -> list[str]:
    found = []
    if "Traceback (most recent call last)" in proc.stdout + proc.stderr:
        found.append(f"traceback:\n{proc.stderr[-3000:]}")
    if seconds > TIMEOUT + MARGIN:
        found.append(f"took {seconds:.1f} s (deadline {TIMEOUT} s + {MARGIN} s)")
    if proc.returncode != case.expected_exit:
        found.append(f"exit {proc.returncode}, expected {case.expected_exit}")
    written = module.read_text(encoding="utf-8")
    if proc.returncode != 0:
        if written != before:
            found.append("common/images.py was rewritten although the image was not resolved")
        lines = proc.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("vllm: "):
            found.append(f"not one line naming the image: {proc.stderr[-600:]!r}")
    elif ("sha256:" + hashlib.sha256(case.answer.body).hexdigest()) not in written:
        found.append("exit 0 but the digest written is not the sha256 of the body served")
    return found


@fuzz_settings(default_examples=8, long_share=0.2)
@given(case=registry_lies())
# Named cases of issue 28: an empty body under a manifest type, HTML under one, half a manifest.
@example(case=RegistryCase(Answer(body=b""), None, 1))
@example(case=RegistryCase(Answer(body=b"<html>login</html>"), None, 1))
@example(case=RegistryCase(Answer(body=MANIFEST, framing="truncated"), None, 1))
@example(case=RegistryCase(Answer(body=MANIFEST, content_type=INDEX_TYPE, framing="bad_chunk"), "tok\u2603", 1))
def test_the_resolver_against_a_lying_registry_writes_only_a_checked_manifest_digest(registry, case):
    registry.fault, registry.answer, registry.token = None, case.answer, case.token
    with tempfile.TemporaryDirectory() as folder:
        module = Path(folder) / "images.py"
        shutil.copy(paths.ROOT / "common" / "images.py", module)
        before = module.read_text(encoding="utf-8")
        try:
            proc, seconds = run(registry, "--only", "vllm", "--write", "--module", str(module))
        finally:
            registry.answer, registry.token = None, None
        found = resolver_problems(case, proc, seconds, module, before)
    kind = None
    if found:
        kind = "traceback" if "traceback" in found[0] else "hang" if found[0].startswith("took") else "wrong_exit"
    figures.record("resolver", kind, seconds, found)
    assert survey() or not found, "\n".join(found) + f"\ncase: {case}\nstderr: {proc.stderr[-1500:]}"
