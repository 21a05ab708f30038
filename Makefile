# Two commands on a fresh machine (each creates ./venv, the virtualenv Pulumi.yaml names):
#   make plan [STACK=prod]   the offline plan of a stack (not `pulumi preview`; no CLI, no cloud)
#   make test                every test, including the ones against a real vLLM on CPU

PYTHON ?= python3.11
VENV   := venv
PY     := $(VENV)/bin/python
STACK  ?= dev
STAMP  := $(VENV)/.installed-from-requirements

.PHONY: plan test test-fast venv bench clean

venv: $(STAMP)

# The stamp holds a copy of the requirements it was built from: a changed file reinstalls.
$(STAMP): requirements.txt
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-input -r requirements.txt
	cp requirements.txt $@

plan: $(STAMP)
	$(PY) -m offline_plan --stack $(STACK)

# Real-vLLM tests are part of `make test` and must run (not skip) here: LLM_SERVING_REQUIRE_VLLM
# turns a missing vLLM into a failure.
test: $(STAMP) vllm-venv
	LLM_SERVING_REQUIRE_VLLM=1 $(PY) -m pytest -q

# Everything but the real-vLLM tests (no 2.5 GB install), for quick iterations.
test-fast: $(STAMP)
	$(PY) -m pytest -q --ignore=tests/vllm

bench: $(STAMP)
	$(PY) benchmarks/plan_many_models.py

clean:
	rm -rf build .pytest_cache .hypothesis

include mk/vllm.mk
