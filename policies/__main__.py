"""Entry point the Pulumi CLI runs (`pulumi preview --policy-pack policies`).

Constructing PolicyPack starts the analyzer server and blocks, so this file does nothing else and
nothing imports it. The Pulumi CLI runs it with policies/ as the working directory; the repository
root goes on sys.path so `policies.*` and `common.contract` import as they do everywhere else.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.pack import build_policies

PolicyPack(
    name="llm-serving",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=build_policies(),
)
