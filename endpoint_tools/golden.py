"""Golden greedy prompts: what a model answered at one revision and engine release, and the diff to now.

A rollout can change the answer a model gives without failing any health check: a new model
revision, a new vLLM release (kernels, sampler, tokenizer handling), another weight quantization or
an fp8 KV cache. A few fixed prompts answered greedily (temperature 0, a fixed seed and max_tokens)
make such a change visible: the record of one rollout is compared with the live answers of the next.

A record (JSON, `golden/<served-name>.json` in the repo; docs/verification.md):

    {"format": 1, "model": NAME,
     "key": {"revision": ..., "engine": ..., "quantization": ..., "kvCacheDtype": ...},
     "sampling": {"temperature": 0, "seed": 0, "maxTokens": 32},
     "outputs": [{"prompt": ID, "text": ..., "tokenIds": [...] or null, "finishReason": ...}, ...]}

The key says what produced the outputs; comparing names the key fields that changed and, for each
prompt whose answer differs, the first differing position (in tokens when both sides carry token
ids, else in characters). Greedy decoding is deterministic on one build and one GPU type, not across
them: a difference is a reason to look, not proof of a regression, so the default only reports it and
exact agreement is asked for in config (models[].verification.golden: exact).

Saving the records the verification Job printed (its first run for a model has no record yet):

    kubectl -n llm-serving logs job/llm-serving-verify > verify.log
    python -m endpoint_tools.golden save verify.log golden/

writes golden/<model>.json for each `golden-record:` line (checked as any record is).

Standard library only (the verification Job runs it from a plain Python image). Records are read
bounded (common.untrusted) and any malformed record is one GoldenError line, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from common.untrusted import InputLimitError, excerpt, loads_json, read_text_file
from endpoint_tools.openai_client import Client, EndpointError, error_message, whole_number

FORMAT = 1
# What identifies the build that produced the outputs; the order is the report's.
KEY_FIELDS = ("revision", "engine", "quantization", "kvCacheDtype")
# Fixed prompts, short so the whole set costs a few seconds even on the CPU build. Each asks for
# something with one obvious answer, so a changed answer stands out to a reader of the report.
PROMPTS: tuple[tuple[str, str], ...] = (
    ("count", "Count from one to ten, separated by commas."),
    ("capital", "What is the capital of France? Answer in one sentence."),
    ("arithmetic", "What is 17 times 23? Show the steps."),
    ("code", "Write a Python function that returns the square of a number."),
)
MAX_TOKENS = 32
SEED = 0
SAMPLING = {"temperature": 0, "seed": SEED, "maxTokens": MAX_TOKENS}
# Bounds of a record read from disk or from the verification Job's targets file.
MAX_RECORD_BYTES = 256 * 1024
MAX_OUTPUTS = 64
MAX_TEXT_CHARS = 16_384
MAX_TOKEN_IDS = 4_096
MAX_KEY_CHARS = 256
MAX_PROMPT_ID_CHARS = 64
# The verification Job prints a model's record on one line with this prefix when it has none yet.
LOG_PREFIX = "golden-record: "
# The largest log `save` reads (a Job's log of many models with their context checks).
MAX_LOG_BYTES = 64 * 1024 * 1024


class GoldenError(ValueError):
    """A record that cannot be used, or an answer that cannot be recorded; one line saying why."""


@dataclass(frozen=True)
class Output:
    prompt: str
    text: str
    token_ids: tuple[int, ...] | None
    finish_reason: str | None

    def as_json(self) -> dict:
        return {
            "prompt": self.prompt,
            "text": self.text,
            "tokenIds": list(self.token_ids) if self.token_ids is not None else None,
            "finishReason": self.finish_reason,
        }


@dataclass(frozen=True)
class Record:
    model: str
    key: dict[str, str | None]
    outputs: tuple[Output, ...]

    def as_json(self) -> dict:
        return {
            "format": FORMAT,
            "model": self.model,
            "key": dict(self.key),
            "sampling": dict(SAMPLING),
            "outputs": [o.as_json() for o in self.outputs],
        }

    def dumps(self) -> str:
        return json.dumps(self.as_json(), indent=1, ensure_ascii=False) + "\n"


# -- running the prompts ---------------------------------------------------------------------------


def request_body(model: str, content: str) -> dict:
    # return_token_ids asks vLLM for the generated ids (choices[].token_ids); a server that does not
    # know the field ignores it and the record keeps text only.
    return {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "seed": SEED,
        "return_token_ids": True,
    }


def run_prompt(client: Client, model: str, prompt_id: str, content: str) -> Output:
    resp = client.post("/v1/chat/completions", request_body(model, content))
    if resp.status != 200:
        raise GoldenError(
            f"prompt {prompt_id!r}: chat completion answered HTTP {resp.status}: {error_message(resp)[:120]}"
        )
    data = resp.json()
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
        raise GoldenError(
            f"prompt {prompt_id!r}: the answer has no text of at most {MAX_TEXT_CHARS:,} characters "
            f"(choices[0].message.content: {excerpt(text, 60)})"
        )
    assert isinstance(choice, dict)  # the text was read from it
    ids = _token_ids(choice.get("token_ids"))
    finish = choice.get("finish_reason")
    return Output(prompt_id, text, ids, finish if isinstance(finish, str) and len(finish) <= 64 else None)


def _token_ids(value: object) -> tuple[int, ...] | None:
    if not isinstance(value, list) or len(value) > MAX_TOKEN_IDS:
        return None
    ids = [whole_number(v) for v in value]
    kept = [i for i in ids if i is not None and i >= 0]
    return tuple(kept) if len(kept) == len(ids) else None


def run_prompts(client: Client, model: str) -> tuple[Output, ...]:
    return tuple(run_prompt(client, model, pid, content) for pid, content in PROMPTS)


def record(client: Client, model: str, key: Mapping[str, str | None]) -> Record:
    return Record(model, normalized_key(key), run_prompts(client, model))


# -- reading a record ------------------------------------------------------------------------------


def normalized_key(key: Mapping[str, object]) -> dict[str, str | None]:
    """Every key field, in order; a field not given is None ("not known")."""
    return {f: (None if key.get(f) is None else str(key.get(f))) for f in KEY_FIELDS}


def parse_record(doc: object, where: str = "the golden record") -> Record:
    """A Record from parsed JSON, or GoldenError naming the field."""
    if not isinstance(doc, dict):
        raise GoldenError(f"{where} must be a JSON object")
    if doc.get("format") != FORMAT:
        raise GoldenError(f"{where}.format must be {FORMAT}, not {excerpt(doc.get('format'), 40)}")
    model = doc.get("model")
    if not isinstance(model, str) or not 0 < len(model) <= MAX_KEY_CHARS:
        raise GoldenError(f"{where}.model must be the served model name")
    key = doc.get("key")
    if not isinstance(key, dict) or set(key) - set(KEY_FIELDS):
        raise GoldenError(f"{where}.key must be an object with only {', '.join(KEY_FIELDS)}")
    for name, value in key.items():
        if value is not None and (not isinstance(value, str) or len(value) > MAX_KEY_CHARS):
            raise GoldenError(f"{where}.key.{name} must be a string of at most {MAX_KEY_CHARS} characters or null")
    outputs = doc.get("outputs")
    if not isinstance(outputs, list) or not 0 < len(outputs) <= MAX_OUTPUTS:
        raise GoldenError(f"{where}.outputs must be a list of 1 to {MAX_OUTPUTS} outputs")
    parsed, seen = [], set()
    for i, out in enumerate(outputs):
        at = f"{where}.outputs[{i}]"
        if not isinstance(out, dict):
            raise GoldenError(f"{at} must be an object")
        pid, text, ids, finish = out.get("prompt"), out.get("text"), out.get("tokenIds"), out.get("finishReason")
        if not isinstance(pid, str) or not 0 < len(pid) <= MAX_PROMPT_ID_CHARS or pid in seen:
            raise GoldenError(f"{at}.prompt must be a prompt id, once per record")
        if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
            raise GoldenError(f"{at}.text must be a string of at most {MAX_TEXT_CHARS:,} characters")
        token_ids = None if ids is None else _token_ids(ids)
        if ids is not None and token_ids is None:
            raise GoldenError(f"{at}.tokenIds must be null or a list of at most {MAX_TOKEN_IDS:,} token ids")
        if finish is not None and (not isinstance(finish, str) or len(finish) > 64):
            raise GoldenError(f"{at}.finishReason must be a short string or null")
        seen.add(pid)
        parsed.append(Output(pid, text, token_ids, finish))
    return Record(model, normalized_key(key), tuple(parsed))


def load_record(path: str) -> Record:
    """Read a record file within MAX_RECORD_BYTES; GoldenError (one line) when it cannot be used."""
    try:
        text = read_text_file(path, MAX_RECORD_BYTES, "the golden record")
        doc = loads_json(text, "the golden record", max_bytes=MAX_RECORD_BYTES)
    except (InputLimitError, OSError) as exc:
        raise GoldenError(" ".join(str(exc).split())) from None
    return parse_record(doc)


# -- comparing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptDiff:
    prompt: str
    # "tokens" or "chars": where `position` counts; "missing" when the live run lacks the prompt.
    unit: str
    position: int
    recorded: str
    live: str

    def describe(self) -> str:
        if self.unit == "missing":
            return f"{self.prompt}: not in the live run"
        return (
            f"{self.prompt} at {self.unit[:-1]} {self.position} "
            f"({excerpt(self.recorded, 40)} -> {excerpt(self.live, 40)})"
        )


@dataclass(frozen=True)
class Comparison:
    key_changes: tuple[tuple[str, str | None, str | None], ...]
    diffs: tuple[PromptDiff, ...]
    compared: int
    # Prompts answered live that the record does not hold (a record from another prompt set).
    unrecorded: tuple[str, ...] = ()

    @property
    def identical(self) -> bool:
        return not self.diffs and not self.unrecorded

    def describe(self) -> str:
        key = (
            "key unchanged"
            if not self.key_changes
            else "key changed: " + ", ".join(f"{f} {_show(old)} -> {_show(new)}" for f, old, new in self.key_changes)
        )
        if self.identical:
            return f"{self.compared}/{self.compared} golden prompts identical to the record ({key})"
        parts = [f"{len(self.diffs)} of {self.compared} golden prompts differ from the record ({key})"]
        parts += [d.describe() for d in self.diffs]
        if self.unrecorded:
            parts.append("not in the record: " + ", ".join(self.unrecorded))
        return "; ".join(parts)


def _show(value: str | None) -> str:
    return "unknown" if value is None else excerpt(value, 48)


def _first_difference(a, b) -> int:
    # The shorter one may be a prefix of the other: then they differ where it ends.
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def diff_output(recorded: Output, live: Output) -> PromptDiff | None:
    """None when the answers agree; tokens are compared when both sides have ids, else the text."""
    if recorded.token_ids is not None and live.token_ids is not None:
        if recorded.token_ids == live.token_ids and recorded.text == live.text:
            return None
        if recorded.token_ids != live.token_ids:
            pos = _first_difference(recorded.token_ids, live.token_ids)
            return PromptDiff(recorded.prompt, "tokens", pos, recorded.text, live.text)
    if recorded.text == live.text:
        return None
    pos = _first_difference(recorded.text, live.text)
    return PromptDiff(recorded.prompt, "chars", pos, recorded.text[pos : pos + 40], live.text[pos : pos + 40])


def compare(recorded: Record, live_key: Mapping[str, str | None], live: tuple[Output, ...]) -> Comparison:
    live_key = normalized_key(live_key)
    changes = tuple((f, recorded.key[f], live_key[f]) for f in KEY_FIELDS if recorded.key[f] != live_key[f])
    by_id = {o.prompt: o for o in live}
    diffs = []
    for out in recorded.outputs:
        if out.prompt not in by_id:
            diffs.append(PromptDiff(out.prompt, "missing", 0, out.text, ""))
            continue
        found = diff_output(out, by_id[out.prompt])
        if found:
            diffs.append(found)
    recorded_ids = {o.prompt for o in recorded.outputs}
    return Comparison(
        changes, tuple(diffs), len(recorded.outputs), tuple(o.prompt for o in live if o.prompt not in recorded_ids)
    )


def parse_key(text: str) -> dict[str, str]:
    """`revision=abc,engine=0.32.0,...` (the smoke command's --golden-key) as a dict; ValueError if not."""
    key: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or name not in KEY_FIELDS or not value or len(value) > MAX_KEY_CHARS or name in key:
            raise ValueError(
                f"{excerpt(part, 60)} is not FIELD=VALUE with FIELD one of {', '.join(KEY_FIELDS)} (each at most once)"
            )
        key[name] = value
    return key


def server_engine(client: Client) -> str | None:
    """The engine release the server reports (vLLM's GET /version), or None when it does not say."""
    try:
        resp = client.get("/version")
        data = resp.json() if resp.status == 200 else None
    except EndpointError:
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return f"vllm {version}" if isinstance(version, str) and 0 < len(version) <= 64 else None


# -- saving the records a verification log printed -----------------------------------------------


def records_in_log(text: str) -> list[Record]:
    """Every `golden-record:` line of a verification Job's log, parsed as a record."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.startswith(LOG_PREFIX):
            continue
        try:
            doc = loads_json(line[len(LOG_PREFIX) :], f"line {n}", max_bytes=MAX_RECORD_BYTES)
        except InputLimitError as exc:
            raise GoldenError(" ".join(str(exc).split())) from None
        found.append(parse_record(doc, f"the record on line {n}"))
    return found


def main(argv: list[str] | None = None) -> int:
    import argparse
    import os
    import re

    parser = argparse.ArgumentParser(
        prog="python -m endpoint_tools.golden", description="Save the golden records a verification Job's log printed."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    save = sub.add_parser("save", help="write DIR/<model>.json for each golden-record: line of LOG")
    save.add_argument("log", help="the Job's log (kubectl logs job/llm-serving-verify > FILE)")
    save.add_argument("dir", help="the folder of records, e.g. golden/")
    args = parser.parse_args(argv)
    try:
        records = records_in_log(read_text_file(args.log, MAX_LOG_BYTES, "the log"))
    except (GoldenError, InputLimitError, OSError) as exc:
        parser.error(" ".join(str(exc).split()))
    if not records:
        print(f"golden: no {LOG_PREFIX.strip()} lines in {args.log} (every model already had a record)")
        return 0
    for rec in records:
        # Served names are DNS labels (stack_config); anything else is not written as a file name.
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", rec.model):
            parser.error(f"the record of model {excerpt(rec.model, 60)} has no usable file name")
        path = os.path.join(args.dir, f"{rec.model}.json")
        os.makedirs(args.dir, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(rec.dumps())
        print(
            f"golden: wrote {path} ({len(rec.outputs)} answers; key "
            + ", ".join(f"{k}={v}" for k, v in rec.key.items() if v is not None)
            + ")"
        )
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
