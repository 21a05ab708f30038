"""The mirror Job's signature check: OpenSSF model signing (`model-signing`) against the publisher.

The mirror proves the bytes are the Hub's at the pinned commit; a signature proves they are the
publisher's. With `models[].signature`, the Job runs, in order (components/model_store/store.py):

1. `mirror.py fetch --defer-manifest`: download, check against the Hub, write the manifest aside;
2. `verify-signature`: the model-signing CLI verifies the folder against the signature file the
   repo carries and the configured identity and issuer (or key / certificate chain); any mismatch
   exits non-zero, the pod fails, and the Job fails after its retries;
3. `seal`: `mirror.py seal` records what was verified in the manifest and puts it in place.

Servers check the manifest at start (components/serving/vllm.py), so a folder whose signature did
not verify never serves. CLI spelling read from model_signing 1.1.1 (PyPI wheel,
model_signing/_cli.py: `verify sigstore MODEL_PATH --signature --identity --identity_provider`,
`verify key ... --public_key`, `verify certificate ... --certificate_chain`, `--ignore-paths`).
"""

from __future__ import annotations

from common import images
from common.facts import Fact
from stack_config.models import SignatureConfig

# The CLI's container image, published by the Sigstore project from sigstore/model-transparency.
# Its tag is the one Sigstore's own model-validation-operator pins as its default verifier
# (sigstore/model-validation-operator internal/constants/images.go: ModelTransparencyCliImage =
# "ghcr.io/sigstore/model-transparency-cli:v1.0.1"). PyPI's newest release is model-signing 1.1.1
# (read here); whether a v1.1.1 image exists, and the v1.0.1 image's digest, could not be checked
# without registry access.
# The reference (with its digest once resolved) lives in common/images.py with every other image.
VERIFIER_IMAGE = images.reference("model-signing")
VERIFIER_IMAGE_FACT = Fact(
    subject=f"model-signing CLI image {images.IMAGES['model-signing'].tagged}",
    value=images.IMAGES["model-signing"].tagged,
    source="sigstore/model-validation-operator internal/constants/images.go (default verifier image)",
    established=False,
    resolve_with="crane ls ghcr.io/sigstore/model-transparency-cli && crane digest "
    "ghcr.io/sigstore/model-transparency-cli:v1.0.1",
)
# Where the public key or certificate chain (a ConfigMap) is mounted in the verifier.
TRUST_MOUNT_PATH = "/etc/llm-serving-signature"
TRUST_FILE = "trust.pem"


def verifier_args(signature: SignatureConfig, local_dir: str, ignore: list[str]) -> list[str]:
    """Arguments after the image's entrypoint (the `model_signing` CLI)."""
    args = ["verify", signature.method, local_dir, "--signature", f"{local_dir}/{signature.file}"]
    for path in ignore:
        args += ["--ignore-paths", path]
    if signature.method == "sigstore":
        # SignatureConfig refuses a sigstore signature without both.
        assert signature.identity is not None and signature.issuer is not None
        args += ["--identity", signature.identity, "--identity_provider", signature.issuer]
    elif signature.method == "key":
        args += ["--public_key", f"{TRUST_MOUNT_PATH}/{TRUST_FILE}"]
    else:
        args += ["--certificate_chain", f"{TRUST_MOUNT_PATH}/{TRUST_FILE}"]
    return args


def trust_pem(signature: SignatureConfig) -> str | None:
    """The PEM the verifier reads from a ConfigMap (key and certificate methods), else None."""
    if signature.method == "key":
        return signature.publicKey
    if signature.method == "certificate":
        return signature.certificateChain
    return None
