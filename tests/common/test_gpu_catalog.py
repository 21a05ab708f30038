"""Every CUDA total in the GPU catalog cites a public log that states it for the named GPU (issue 19)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from common import gpus

_CITATION = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|blob)/\S+ \(.+\)$")


def cited(gpu: gpus.Gpu) -> bool:
    """A GitHub URL (issue, PR or file at a commit), then the quoted lines in brackets, which must carry
    the catalog's figure to two decimals: a source that quotes another figure does not confirm this one."""
    source = gpu.cuda_total_source
    return bool(source and _CITATION.match(source) and f"{gpu.cuda_total_gib:.2f}" in source)


@pytest.mark.parametrize("name", sorted(gpus.CATALOG))
def test_every_catalog_gpu_cites_the_log_that_states_its_cuda_total(name):
    gpu = gpus.CATALOG[name]
    assert gpu.cuda_total_confirmed and cited(gpu), f"{name}: {gpu.cuda_total_source!r}"


def test_a_source_that_quotes_another_figure_or_no_url_does_not_count():
    a10g = gpus.CATALOG["A10G"]
    assert cited(a10g)
    # Broken variants: the figure moved without its source, a bare quote with no URL, no source at all.
    assert not cited(dataclasses.replace(a10g, cuda_total_gib=22.05))
    assert not cited(dataclasses.replace(a10g, cuda_total_source='"GPU 0 has a total capacity of 21.99 GiB"'))
    assert not cited(dataclasses.replace(a10g, cuda_total_source=None))
