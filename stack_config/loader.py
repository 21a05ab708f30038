"""Reading the running stack's config: Pulumi's values decoded, validated, secrets kept secret."""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import ValidationError

from common.untrusted import MAX_CONFIG_VALUE_BYTES, InputLimitError, NotJsonError, excerpt, loads_json
from stack_config.errors import ConfigError, format_validation_error
from stack_config.formats import did_you_mean
from stack_config.gcp_project import gcp_project_problems
from stack_config.stack import StackConfig

PROJECT = "llm-serving"
# Config namespaces of the providers and the engine; any other near-miss of PROJECT is a typo.
PROVIDER_NAMESPACES = frozenset({"pulumi", "aws", "gcp", "kubernetes", "random", "tls", "command"})

# Secret config keys: only ever read with require_secret/get_secret, and refused as plain values.
SECRET_KEYS = ("hfToken", "apiKey", "apiKeyNext")
# Secrets set only for a while (a key rotation); the offline plan does not stand in for them.
ROTATION_SECRET_KEYS = ("apiKeyNext",)


def parse_stack_config(raw: dict[str, Any], source: str) -> StackConfig:
    """Validate the project's config keys (namespace already stripped) into a StackConfig.

    `source` names the stack file in every message, so a person knows where to look.
    """
    if not isinstance(raw, dict):
        raise ConfigError([f"{source}: the config must be a mapping of keys, got {type(raw).__name__}"])
    plain = {k: v for k, v in raw.items() if k not in SECRET_KEYS}
    try:
        return StackConfig.model_validate(plain)
    except ValidationError as err:
        raise ConfigError([f"{source}: {p}" for p in format_validation_error(err, StackConfig)]) from None


def decode_config_values(
    values: dict[str, str], secret_keys: set[str], stack: str = "<stack>"
) -> tuple[dict[str, Any], list[str]]:
    """Pulumi hands structured config over as JSON strings; decode them, keeping plain strings.

    The JSON is bounded like every other untrusted input (size, nesting, no NaN): a value that is
    not JSON at all is a plain string, as the CLI meant it; one beyond the limits is a problem.
    """
    raw: dict[str, Any] = {}
    problems: list[str] = []
    for full_key, value in values.items():
        namespace, _, key = full_key.partition(":")
        if namespace != PROJECT:
            # Other namespaces belong to providers (aws:region, gcp:project, ...); one that is
            # nearly this project's name is a typo whose keys would otherwise vanish silently.
            if namespace not in PROVIDER_NAMESPACES and did_you_mean(namespace, [PROJECT]):
                shown = full_key if re.fullmatch(r"[A-Za-z0-9_.:-]{1,100}", full_key) else excerpt(full_key)
                problems.append(f"{shown}: unknown namespace {excerpt(namespace)}{did_you_mean(namespace, [PROJECT])}")
            continue
        if key in SECRET_KEYS:
            if full_key not in secret_keys:
                problems.append(
                    f"{key}: is set as plain text; secrets must be encrypted: `pulumi config rm {key} && "
                    f"pulumi config set --secret {key} <value> -s {stack}` (and rotate it if the stack file was shared)"
                )
            continue
        if not isinstance(value, str):
            raw[key] = value
            continue
        try:
            raw[key] = loads_json(value, key if key.isidentifier() else excerpt(key), max_bytes=MAX_CONFIG_VALUE_BYTES)
        except NotJsonError:
            raw[key] = value
        except InputLimitError as err:
            problems.append(f"{err}; shorten or flatten the value")
    return raw, problems


def load() -> LoadedConfig:
    """Read and validate the running stack's config (the program's single entry point)."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    stack = pulumi.get_stack()
    source = f"Pulumi.{stack}.yaml"
    # Every key of the stack (not only known ones), so a misspelt top-level key is reported
    # instead of silently ignored. The SDK keeps them in this map; PULUMI_CONFIG is its fallback.
    values = dict(runtime_config.CONFIG.get())
    for k, v in runtime_config.get_config_env().items():
        values.setdefault(k, v)
    secret_keys = {k for k in values if runtime_config.is_config_secret(k)}
    secret_keys |= set(runtime_config.get_config_secret_keys_env())
    raw, problems = decode_config_values(values, secret_keys, stack)
    problems = [f"{source}: {p}" for p in problems]
    try:
        stack_config = parse_stack_config(raw, source)
    except ConfigError as err:
        raise ConfigError(problems + err.problems) from None
    if problems:
        raise ConfigError(problems)
    cfg = pulumi.Config(PROJECT)
    hf_token = cfg.get_secret("hfToken")
    api_key = cfg.get_secret("apiKey")
    gated = [f"models[{i}] ({m.repo})" for i, m in enumerate(stack_config.models) if m.gated]
    if gated and hf_token is None:
        named = ", ".join(gated[:3]) + (f" and {len(gated) - 3} more" if len(gated) > 3 else "")
        raise ConfigError(
            [
                (
                    f"{source}: hfToken: {named} {'is' if len(gated) == 1 else 'are'} gated and need"
                    f"{'s' if len(gated) == 1 else ''} a Hugging Face token; set it with "
                    f"`pulumi config set --secret hfToken hf_... -s {stack}`"
                )
            ]
        )
    api_key_next = cfg.get_secret("apiKeyNext")
    problems = exposure_problems(stack_config, api_key, api_key_next, source, stack)
    problems += gcp_project_problems(stack_config, values, os.environ, source, stack)
    if problems:
        raise ConfigError(problems)
    hub_token = values.get(f"{PROJECT}:hfToken")
    if hub_token is not None and hub_token.startswith("<secret "):
        hub_token = None  # the offline plan's stand-in for a value only the CLI can decrypt
    return LoadedConfig(
        stack=stack,
        source=source,
        config=stack_config,
        hf_token=hf_token,
        api_key=api_key,
        hub_token=hub_token,
        api_key_next=api_key_next,
    )


def exposure_problems(stack_config: StackConfig, api_key, api_key_next, source: str, stack: str) -> list[str]:
    """An endpoint on a Gateway answers whoever reaches it: it needs an API key, or an explicit waiver.

    The key's value is never looked at (it is a secret Output); only whether it is set.
    """
    exposure = stack_config.exposure
    problems = []
    if api_key_next is not None and api_key is None:
        problems.append(
            f"{source}: apiKeyNext: is the second key of a rotation and needs apiKey beside it; set "
            f"`pulumi config set --secret apiKey <key> -s {stack}` or remove apiKeyNext"
        )
    exposed = [
        key
        for key, on in (("exposure.entrance", exposure.entrance), ("exposure.gateway", exposure.gateway))
        if on is not None
    ]
    if exposed and api_key is None and not exposure.allowUnauthenticated:
        problems.append(
            f"{source}: apiKey: {exposed[0]} puts the models on a Gateway, but no API key is set, so anyone who "
            f"reaches it could use them; set one with `pulumi config set --secret apiKey <key> -s {stack}`, or set "
            "exposure.allowUnauthenticated: true to serve without a key knowingly"
        )
    return problems


class LoadedConfig:
    """The validated config plus the secrets, which stay pulumi Output secrets end to end."""

    def __init__(
        self, stack: str, source: str, config: StackConfig, hf_token, api_key, hub_token=None, api_key_next=None
    ):
        self.stack = stack
        self.source = source
        self.config = config
        # Output secrets: what resources receive.
        self.hf_token = hf_token
        self.api_key = api_key
        # The second valid key while clients move to it (docs/security.md#api-access); usually None.
        self.api_key_next = api_key_next
        # The same HF token as a plain string, for one purpose only: authenticating the Hub
        # download of a gated model's config.json while planning. It never reaches a resource.
        self.hub_token = hub_token
