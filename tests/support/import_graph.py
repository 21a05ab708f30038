"""The project's import graph, read with grimp: cycles, and what a package imports from outside.

Run as `python tests/support/import_graph.py cycles` from a checkout to print every import cycle (exit 1
if there is one); tests/repo/test_layout.py runs it on the tree and on copies with a planted import.
"""

from __future__ import annotations

import sys

import grimp

# The project's top-level packages (`__main__.py` is a script and imports them all).
PACKAGES = (
    "common",
    "stack_config",
    "planner",
    "components",
    "endpoint_tools",
    "offline_plan",
    "policies",
    "safe_yaml",
)


def build(include_external: bool = False) -> grimp.ImportGraph:
    # Imports under `if TYPE_CHECKING:` exist for annotations only and never run, so they cannot
    # make a cycle at import time.
    return grimp.build_graph(*PACKAGES, include_external_packages=include_external, exclude_type_checking_imports=True)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every set of modules that import each other in a circle (Tarjan's strongly connected
    components of more than one module, or a module importing itself), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    modules = sorted(graph.modules)

    def edges(module: str) -> list[str]:
        return sorted(m for m in graph.find_modules_directly_imported_by(module) if m in index or m in graph.modules)

    for root in modules:
        if root in index:
            continue
        # Iterative Tarjan: a deep import chain must not hit the recursion limit.
        work = [(root, iter(edges(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges(child))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.find_modules_directly_imported_by(node):
                    found.append(sorted(component))
    return sorted(found)


def external_imports(graph: grimp.ImportGraph, package: str) -> dict[str, set[str]]:
    """Top-level names of modules outside the project that `package`'s modules import directly."""
    out: dict[str, set[str]] = {}
    for module in graph.find_children(package) | graph.find_descendants(package) | {package}:
        for imported in graph.find_modules_directly_imported_by(module):
            top = imported.split(".")[0]
            if top not in PACKAGES:
                out.setdefault(module, set()).add(top)
    return out


if __name__ == "__main__":
    found = cycles(build())
    for cycle in found:
        print("import cycle: " + " <-> ".join(cycle))
    sys.exit(1 if found else 0)
