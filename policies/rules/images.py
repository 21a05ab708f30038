"""image-tag-pinned: every image names an immutable version.

What counts as a tag follows the image reference grammar (distribution/reference): the tag is the
part after the last ':' of the LAST path component, so `registry:5000/app` has no tag (5000 is a
port) while `registry:5000/app:1.2` has tag 1.2; a digest (`@sha256:...`) pins the image whatever
the tag says. The same verdicts as the Gatekeeper library's k8sdisallowedtags, Kyverno's
disallow-latest-tag and checkov's CKV_K8S_14/CKV_K8S_43 (see tests/policies/test_policies_community.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from common import images as image_table
from policies.objects import Finding, as_str, is_unknown
from policies.workloads import workload

# algorithm ":" hex, as in distribution/reference's digest grammar (length is not enforced here,
# like checkov: the registry rejects a malformed digest at pull time anyway).
_DIGEST_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]+$")


@dataclass(frozen=True)
class ImageRef:
    repository: str
    tag: str | None
    digest: str | None


def parse_image(image: str) -> ImageRef:
    name, _, digest = image.partition("@")
    head, slash, last = name.rpartition("/")
    repo_last, colon, tag = last.partition(":")
    return ImageRef(head + slash + repo_last, tag if colon and tag else None, digest or None)


def image_problem(image: str, require_digest: bool = False) -> str | None:
    """What is wrong with an image reference, as a clause, or None when it is pinned."""
    ref = parse_image(image.strip())
    if ref.digest is not None and not _DIGEST_RE.match(ref.digest):
        return f"carries a malformed digest '@{ref.digest}'"
    if require_digest:
        return None if ref.digest else "has no digest, and this pack is configured with requireDigest"
    if ref.digest:
        return None
    if ref.tag is None:
        return "has no tag, so it means ':latest'"
    if ref.tag == "latest":
        return "uses the mutable tag 'latest'"
    return None


def _fix_for(image: str, fix: str) -> str:
    """The fix, naming this program's image table entry when the image is one of its own (its digest
    is then unresolved there, and the resolver settles it)."""
    entries = [e for e in image_table.entries_for(image.strip()) if not e.resolved]
    if not entries:
        return fix
    keys = ", ".join(f"'{e.key}'" for e in entries)
    return (
        f"{fix}: it is the program's image {keys} in common/images.py, whose digest is unresolved; "
        f"on a machine that can reach the registry run `{image_table.RESOLVE_COMMAND}` and commit the result"
    )


def image_tag_pinned(obj: dict, config: dict) -> list[Finding]:
    w = workload(obj)
    if w is None:
        return []
    require_digest = bool(config.get("requireDigest", False))
    fix = (
        "pin it by digest (image@sha256:...)"
        if require_digest
        else "pin an explicit version tag (e.g. ':v0.32.0') or a digest ('@sha256:...')"
    )
    out = []
    for pod in w.pods:
        for c in pod.containers:
            image = c.container.get("image")
            if is_unknown(image):
                continue  # decided at deploy time (e.g. an image built by another resource)
            image_s = as_str(image) or ""
            if not image_s.strip():
                # Only the KServe model container may leave the image out: its ServingRuntime
                # supplies it. Anywhere else the API server rejects the pod (checkov CKV_K8S_14
                # and Kyverno's require-image-tag fail it too).
                if c.section != "model":
                    what = "has no image" if image is None else "has an empty image"
                    out.append(
                        Finding(
                            f"{w.ref}: {c.label} {what}; set an image with an explicit version tag or digest.", c.name
                        )
                    )
                continue
            problem = image_problem(image_s, require_digest)
            if problem:
                out.append(
                    Finding(f"{w.ref}: {c.label} image '{image_s}' {problem}; {_fix_for(image_s, fix)}.", c.name)
                )
    return out
