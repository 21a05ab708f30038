"""llm-serving: which program this stack runs.

A served stack (Pulumi.dev.yaml, Pulumi.prod.yaml) runs serving_stack.py: cluster, add-ons,
operators, model store, servers, entrance. A deployer stack (`llm-serving:role: deployer`,
Pulumi.prod-deployer.yaml) builds only the VPC and the CodeBuild runner that another stack's
`pulumi up` runs on (docs/deployer.md); its config has keys of its own, so the role is read first.
"""

import runpy
from pathlib import Path

import pulumi

from stack_config import ConfigError
from stack_config.deployer_stack import DEPLOYER_ROLE, load_deployer, stack_role

# resolve(): the program's own directory even when this file is reached through a link.
HERE = Path(__file__).resolve().parent

if stack_role() == DEPLOYER_ROLE:
    from components.cluster.aws.deployer import build_deployer_stack

    try:
        deployer_config = load_deployer()
    except ConfigError as err:
        raise pulumi.RunError("\n".join(err.problems)) from None
    build_deployer_stack(deployer_config)
else:
    # Run, not imported: an evaluation per stack in one process (the offline plan, the tests) must
    # execute the wiring every time.
    runpy.run_path(str(HERE / "serving_stack.py"), run_name="serving_stack")
