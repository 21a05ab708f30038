"""Validate `vllm serve` command lines with vLLM's own argument parser, without starting a server.

    .venv-vllm/bin/python tools/vllm-cpu/check_serve_args.py < lines.json > verdicts.json

Input (stdin): a JSON list of {"name": str, "argv": [str, ...]}. argv may start with "vllm", "serve"
(as a container command does) or be the arguments after `serve`.
Output (stdout): a JSON list of {"name": str, "ok": bool, "error": str}, one per input, in order.

Each line goes through the parser `vllm serve` itself builds (make_arg_parser in
vllm.entrypoints.launchers.cli_args), then validate_parsed_serve_args, then
AsyncEngineArgs.from_cli_args, so an unknown or misspelled flag, a bad value type or choice, and
the cross-flag checks vLLM runs before loading a model all fail here as they would in the pod.
Importing vLLM takes 10-15 s, which is why every line is checked in one process.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import serve  # noqa: F401  (answers importlib.metadata.version("vllm") as vLLM's CLI does)


def check(argv: list[str]) -> str:
    """'' when vLLM accepts the command line, else vLLM's error message (one line)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    args = list(argv)
    if args[:2] == ["vllm", "serve"]:
        args = args[2:]
    elif args[:1] == ["serve"]:
        args = args[1:]
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    captured = io.StringIO()
    try:
        # argparse reports errors by printing usage to stderr and exiting 2; keep the message.
        with contextlib.redirect_stderr(captured):
            parsed = parser.parse_args(args)
    except SystemExit:
        lines = [line for line in captured.getvalue().splitlines() if line.strip()]
        return lines[-1] if lines else "rejected by vllm serve's argument parser"
    try:
        if getattr(parsed, "model_tag", None):
            parsed.model = parsed.model_tag
        validate_parsed_serve_args(parsed)
        AsyncEngineArgs.from_cli_args(parsed)
    except Exception as exc:  # vLLM raises ValueError/TypeError and its own types here
        return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    return ""


def main() -> int:
    try:
        lines = json.load(sys.stdin)
        if not isinstance(lines, list) or not all(
            isinstance(item, dict) and isinstance(item.get("argv"), list) for item in lines
        ):
            raise ValueError('expected a list of {"name": ..., "argv": [...]}')
    except ValueError as exc:
        print(f"check_serve_args: bad input on stdin: {exc}", file=sys.stderr)
        return 2
    # vLLM logs to stdout; send file descriptor 1 to stderr while it runs so stdout carries only
    # the JSON verdicts.
    sys.stdout.flush()
    verdict_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    verdicts = []
    for item in lines:
        error = check([str(a) for a in item["argv"]])
        verdicts.append({"name": str(item.get("name", "")), "ok": not error, "error": error})
    sys.stdout.flush()
    json.dump(verdicts, verdict_out, indent=2)
    verdict_out.write("\n")
    verdict_out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
