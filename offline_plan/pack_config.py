"""`python -m offline_plan.pack_config --stack STACK`: the policy pack config file of a stack's gate.

Prints one path, relative to the project: the one Pulumi.<stack>.yaml names with `policyConfig`, else
`policies/config/<stack>.json` (stack_config/policy_config.py). The workflows pass what it prints to
`pulumi preview`/`up` (`policyPackConfigs`), and the offline plan runs the pack with the same file, so a
copy of prod's stack file under another name keeps prod's gate. Exit 2, one line on stderr, when the
stack file is unusable or names a file that does not exist.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from offline_plan.mock_runtime import ROOT, stack_file_config
from stack_config.errors import ConfigError
from stack_config.loader import PROJECT
from stack_config.policy_config import POLICY_CONFIG_KEY, pack_config_choice, policy_config_problem


def stack_pack_config_path(stack: str, project_dir: Path = ROOT) -> str:
    """The pack config path of `stack`; ConfigError (naming the file and key) when it cannot be used."""
    values, _ = stack_file_config(stack, project_dir)
    named = values.get(f"{PROJECT}:{POLICY_CONFIG_KEY}") or None
    problem = policy_config_problem(named) if named else None
    if problem:
        raise ConfigError([f"Pulumi.{stack}.yaml: {POLICY_CONFIG_KEY}: {problem}"])
    choice = pack_config_choice(stack, named)
    if choice.named and not (project_dir / choice.path).exists():
        raise ConfigError([f"Pulumi.{stack}.yaml: {POLICY_CONFIG_KEY}: {choice.path} does not exist"])
    return choice.path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offline_plan.pack_config", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True, help="stack name: reads Pulumi.<stack>.yaml")
    args = parser.parse_args(argv)
    try:
        print(stack_pack_config_path(args.stack))
    except ConfigError as err:
        for problem in err.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
