"""Golden greedy prompts (endpoint_tools/golden.py): the record's format, the comparison, the smoke
command's --record-golden / --golden / --golden-exact against the fault server, and malformed records."""

from __future__ import annotations

import json

import pytest

from endpoint_tools import golden, smoke
from tests.support.fuzz.endpoint_runs import clean_problems, run_tool
from tests.support.fuzz.fault_server import MODEL

KEY = {"revision": "a" * 40, "engine": "vllm 0.32.0", "quantization": None, "kvCacheDtype": "auto"}


def _out(pid: str, text: str, ids=None) -> golden.Output:
    return golden.Output(pid, text, None if ids is None else tuple(ids), "length")


def _record(*outputs: golden.Output, **key) -> golden.Record:
    return golden.Record("m", golden.normalized_key({**KEY, **key}), outputs)


# -- comparison --------------------------------------------------------------------------------------


def test_identical_answers_and_key_compare_identical():
    rec = _record(_out("a", "one two", [1, 2]), _out("b", "three"))
    result = golden.compare(rec, KEY, (_out("a", "one two", [1, 2]), _out("b", "three")))
    assert result.identical and not result.key_changes
    assert result.describe() == "2/2 golden prompts identical to the record (key unchanged)"


def test_a_differing_token_is_reported_at_its_position():
    rec = _record(_out("a", "one two three", [1, 2, 3]), _out("b", "x"))
    result = golden.compare(rec, KEY, (_out("a", "one two four", [1, 2, 4]), _out("b", "x")))
    assert not result.identical
    assert result.describe() == (
        "1 of 2 golden prompts differ from the record (key unchanged); a at token 2 ('one two three' -> 'one two four')"
    )


def test_text_is_compared_by_character_when_either_side_lacks_token_ids():
    rec = _record(_out("a", "hello world", [1, 2]))
    result = golden.compare(rec, KEY, (_out("a", "hello there"),))
    assert [(d.prompt, d.unit, d.position) for d in result.diffs] == [("a", "chars", 6)]
    assert "a at char 6 ('world' -> 'there')" in result.describe()


def test_equal_ids_with_other_text_is_a_difference():
    # A new detokenizer can change the text of the same ids; the user sees that too.
    rec = _record(_out("a", "hello", [1]))
    result = golden.compare(rec, KEY, (_out("a", "hellò", [1]),))
    assert [(d.unit, d.position) for d in result.diffs] == [("chars", 4)]


def test_a_longer_answer_differs_where_the_shorter_ends():
    rec = _record(_out("a", "abc", [1, 2]))
    result = golden.compare(rec, KEY, (_out("a", "abcdef", [1, 2, 3]),))
    assert [(d.unit, d.position) for d in result.diffs] == [("tokens", 2)]


@pytest.mark.parametrize(
    "field, old, new",
    [
        ("revision", "a" * 40, "b" * 40),
        ("engine", "vllm 0.32.0", "vllm 0.33.0"),
        ("quantization", None, "fp8"),
        ("kvCacheDtype", "auto", "fp8"),
    ],
)
def test_each_changed_key_field_is_named(field, old, new):
    rec = _record(_out("a", "x"))
    result = golden.compare(rec, {**KEY, field: new}, (_out("a", "x"),))
    assert result.key_changes == ((field, old, new),)
    shown_old = "unknown" if old is None else repr(old)
    assert f"key changed: {field} {shown_old} -> {new!r}" in result.describe()
    assert result.identical  # the key alone is not a difference in the answers


def test_prompts_missing_on_either_side_are_differences():
    rec = _record(_out("a", "x"), _out("b", "y"))
    result = golden.compare(rec, KEY, (_out("a", "x"), _out("c", "z")))
    assert not result.identical
    assert result.describe() == (
        "1 of 2 golden prompts differ from the record (key unchanged); b: not in the live run; not in the record: c"
    )


def test_a_record_round_trips_through_its_json():
    rec = golden.Record("m", golden.normalized_key(KEY), (_out("a", "x", [5]), _out("b", "y")))
    assert golden.parse_record(json.loads(rec.dumps())) == rec
    assert json.loads(rec.dumps())["sampling"] == {"temperature": 0, "seed": 0, "maxTokens": golden.MAX_TOKENS}


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(format=2), "the golden record.format must be 1, not 2"),
        (lambda d: d.update(model=""), "the golden record.model must be the served model name"),
        (lambda d: d["key"].update(gpu="L4"), "the golden record.key must be an object with only revision"),
        (lambda d: d["key"].update(revision=7), "the golden record.key.revision must be a string"),
        (lambda d: d.update(outputs=[]), "the golden record.outputs must be a list of 1 to 64 outputs"),
        (
            lambda d: d["outputs"].append(dict(d["outputs"][0])),
            "the golden record.outputs[1].prompt must be a prompt id",
        ),
        (lambda d: d["outputs"][0].update(text=None), "the golden record.outputs[0].text must be a string"),
        (lambda d: d["outputs"][0].update(tokenIds=[1, -2]), "the golden record.outputs[0].tokenIds must be null"),
        (lambda d: d["outputs"][0].update(tokenIds=[True]), "the golden record.outputs[0].tokenIds must be null"),
        (lambda d: d["outputs"][0].update(text="x" * 20_000), "at most 16,384 characters"),
        (lambda d: d["outputs"][0].update(finishReason={"a": 1}), "finishReason must be a short string"),
    ],
)
def test_a_malformed_record_is_one_line_naming_the_field(mutate, message):
    doc = json.loads(_record(_out("a", "x", [1])).dumps())
    mutate(doc)
    with pytest.raises(golden.GoldenError) as err:
        golden.parse_record(doc)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_parse_key_takes_known_fields_once():
    assert golden.parse_key("revision=abc, engine=vllm 0.32.0") == {"revision": "abc", "engine": "vllm 0.32.0"}
    for bad in ("gpu=L4", "revision", "revision=", "revision=a,revision=b"):
        with pytest.raises(ValueError, match="is not FIELD=VALUE with FIELD one of"):
            golden.parse_key(bad)


# -- the smoke command -------------------------------------------------------------------------------


def _smoke(srv, *extra: str):
    return run_tool(
        "components.smoke", ["--base-url", srv.url, "--model", MODEL, "--timeout", "2", "--total-timeout", "8", *extra]
    )


def _line(proc, check="golden") -> str:
    return next(line for line in proc.stdout.splitlines() if line.split()[1:2] == [check])


def test_record_compare_and_tamper_against_the_fault_server(server, tmp_path):
    server.set({})
    path = tmp_path / "golden" / "m.json"  # the folder does not exist yet
    proc, seconds = _smoke(server, "--record-golden", str(path), "--golden-key", "revision=" + "a" * 40)
    assert not clean_problems(proc, seconds) and proc.returncode == 0, proc.stdout + proc.stderr
    # The fault server has no /version: the engine stays unknown, the given revision is kept.
    assert _line(proc).startswith(
        f"PASS  golden   recorded {len(golden.PROMPTS)} golden answers (0 with token ids) "
        f"to {path}; key revision={'a' * 40}"
    )
    doc = json.loads(path.read_text())
    assert doc["key"] == {"revision": "a" * 40, "engine": None, "quantization": None, "kvCacheDtype": None}

    proc, _ = _smoke(server, "--golden", str(path), "--golden-exact", "--golden-key", "revision=" + "a" * 40)
    assert proc.returncode == 0 and "identical to the record (key unchanged)" in _line(proc)

    doc["outputs"][0]["text"] = "changed"
    path.write_text(json.dumps(doc))
    proc, _ = _smoke(server, "--golden", str(path), "--golden-key", "revision=" + "b" * 40)
    assert proc.returncode == 0, proc.stdout
    assert _line(proc).startswith(
        f"PASS  golden   1 of {len(golden.PROMPTS)} golden prompts differ from the record "
        f"(key changed: revision '{'a' * 40}' -> '{'b' * 40}'); count at char 0"
    )
    proc, _ = _smoke(server, "--golden", str(path), "--golden-exact")
    assert proc.returncode == smoke.EXIT_GOLDEN_DIFFERS, proc.stdout
    assert _line(proc).startswith("FAIL  golden ") and proc.stdout.rstrip().endswith("failed: golden")


@pytest.mark.parametrize(
    "scenario",
    [
        {"chat": "choices_empty"},
        {"chat": "status_500"},
        {"chat": "not_json"},
        {"chat": "content_number"},
        {"chat": "stall_after_headers"},
    ],
)
def test_a_misbehaving_server_fails_the_golden_check_in_one_line(server, tmp_path, scenario):
    server.set(scenario)
    proc, seconds = _smoke(server, "--record-golden", str(tmp_path / "g.json"))
    assert not clean_problems(proc, seconds), clean_problems(proc, seconds)
    assert proc.returncode == smoke.EXIT_FAILED and _line(proc).startswith("FAIL  golden ")
    assert not (tmp_path / "g.json").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[" * 100_000,
        b"\xff\xfe",
        b'{"format": 1}',
        b"x" * 300_000,
        b'{"format": 1, "model": "other", "key": {}, "outputs": [{"prompt": "a", "text": ""}]}',
    ],
)
def test_a_malformed_record_file_is_a_usage_error_in_one_line(server, tmp_path, content):
    path = tmp_path / "golden.json"
    path.write_bytes(content)
    proc, seconds = _smoke(server, "--golden", str(path))
    assert not clean_problems(proc, seconds), clean_problems(proc, seconds)
    assert proc.returncode == smoke.EXIT_USAGE and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].startswith("python -m components.smoke: error: --golden ")


def test_golden_usage_errors(tmp_path):
    for argv in (
        ["--golden-exact"],
        ["--golden", "a", "--record-golden", "b"],
        ["--golden-key", "gpu=L4", "--record-golden", "b"],
    ):
        with pytest.raises(SystemExit) as exc:
            smoke.main(["--base-url", "http://127.0.0.1:9", "--model", "m", *argv])
        assert exc.value.code == smoke.EXIT_USAGE
    with pytest.raises(SystemExit):
        smoke.main(["--base-url", "http://127.0.0.1:9", "--names", "m", "--entrance", "--record-golden", "x"])
