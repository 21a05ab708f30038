# Two commands on a fresh machine (each creates ./venv, the virtualenv Pulumi.yaml names):
#   make plan [STACK=prod]   the offline plan of a stack (not `pulumi preview`; no CLI, no cloud)
#   make test                every test, including the ones against a real vLLM on CPU

PYTHON ?= python3.11
VENV   := venv
PY     := $(VENV)/bin/python
STACK  ?= dev
STAMP  := $(VENV)/.installed-from-requirements

.PHONY: plan test test-fast fuzz venv bench clean

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

# The long fuzz run (not part of `make test`): the properties of tests/test_fuzz_*.py with many more
# cases. The seed is printed first and last; `make fuzz SEED=<seed>` replays the same cases.
FUZZ_EXAMPLES ?= 2500
# Drawn once (`:=`), so the seed printed is the seed used.
ifndef SEED
SEED := $(shell $(PYTHON) -c "import random; print(random.randrange(2**32))")
endif
FUZZ_FIGURES := build/fuzz/figures.jsonl
fuzz: $(STAMP)
	@echo "fuzz seed: $(SEED)  (replay: make fuzz SEED=$(SEED) FUZZ_EXAMPLES=$(FUZZ_EXAMPLES))"
	@mkdir -p build/fuzz && rm -f $(FUZZ_FIGURES)
	@LLM_SERVING_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) LLM_SERVING_FUZZ_FIGURES=$(FUZZ_FIGURES) \
		$(PY) -m pytest -q -p no:cacheprovider --hypothesis-seed=$(SEED) tests/test_fuzz_plan.py \
		tests/test_fuzz_sizing.py tests/test_fuzz_check.py tests/test_fuzz_endpoints.py; status=$$?; \
		$(PY) -m tests.fuzz.figures $(FUZZ_FIGURES); echo "fuzz seed: $(SEED)"; exit $$status

bench: $(STAMP)
	$(PY) benchmarks/plan_many_models.py

clean:
	rm -rf build .pytest_cache .hypothesis

include mk/vllm.mk
