# Two commands on a fresh machine (each creates ./venv, the virtualenv Pulumi.yaml names):
#   make plan [STACK=prod]   the offline plan of a stack (not `pulumi preview`; no CLI, no cloud);
#                            installs only the program's requirements.txt
#   make test                the lint and type gate (`make check`), then every test in parallel,
#                            including the ones against a real vLLM on CPU; adds requirements-test.txt

PYTHON ?= python3.11
VENV   := venv
PY     := $(VENV)/bin/python
STACK  ?= dev
STAMP  := $(VENV)/.installed-from-requirements
TEST_STAMP := $(VENV)/.installed-from-requirements-test
# pytest-xdist workers: one per core (tests/support/parallel.py keeps the real-vLLM tests together).
TEST_WORKERS ?= auto
.PHONY: plan test test-fast check format fuzz venv test-venv bench clean

venv: $(STAMP)
test-venv: $(TEST_STAMP)

# Each stamp holds a copy of the requirements it was built from: a changed file reinstalls.
$(STAMP): requirements.txt
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-input -r requirements.txt
	cp requirements.txt $@

$(TEST_STAMP): requirements-test.txt $(STAMP)
	$(PY) -m pip install --quiet --no-input -r requirements-test.txt
	cp requirements-test.txt $@

plan: $(STAMP)
	$(PY) -m offline_plan --stack $(STACK)

# The gate CI holds: ruff's lint and format check over the whole tree (pyproject.toml [tool.ruff]) and
# mypy over the program's packages (pyproject.toml [tool.mypy]). `make format` applies ruff's fixes and format.
check: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m mypy

format: $(TEST_STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Real-vLLM tests are part of `make test` and must run (not skip) here: LLM_SERVING_REQUIRE_VLLM
# turns a missing vLLM into a failure. The Hypothesis seed is fixed and printed at the end
# (tests/support/hypothesis_profiles.py).
test: check vllm-venv
	LLM_SERVING_REQUIRE_VLLM=1 $(PY) -m pytest -q -n $(TEST_WORKERS)

# Everything but the real-vLLM tests (no 2.5 GB install), for quick iterations.
test-fast: $(TEST_STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --ignore=tests/vllm

# The long fuzz run (not part of `make test`): the properties of tests/fuzz/ and the stack-config
# property with many more cases, fresh ones each run. The seed is printed first and last;
# `make fuzz SEED=<seed>` replays the same cases. A case it finds becomes an @example or a test.
FUZZ_EXAMPLES ?= 2500
# Drawn once (`:=`), so the seed printed is the seed used.
ifndef SEED
SEED := $(shell $(PYTHON) -c "import random; print(random.randrange(2**32))")
endif
FUZZ_FIGURES := build/fuzz/figures.jsonl
fuzz: $(TEST_STAMP)
	@echo "fuzz seed: $(SEED)  (replay: make fuzz SEED=$(SEED) FUZZ_EXAMPLES=$(FUZZ_EXAMPLES))"
	@mkdir -p build/fuzz && rm -f $(FUZZ_FIGURES)
	@LLM_SERVING_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) LLM_SERVING_FUZZ_FIGURES=$(FUZZ_FIGURES) \
		$(PY) -m pytest -q -p no:cacheprovider --hypothesis-seed=$(SEED) tests/fuzz \
		tests/stack_config/test_config_property.py; status=$$?; \
		$(PY) -m tests.support.fuzz.figures $(FUZZ_FIGURES); echo "fuzz seed: $(SEED)"; exit $$status

# Every benchmark at its full size, with its figures (`make test` runs each once with --quick).
bench: $(STAMP)
	@for benchmark in benchmarks/*.py; do echo "== $$benchmark"; $(PY) $$benchmark || exit 1; done

clean:
	rm -rf build .pytest_cache .hypothesis .mypy_cache .ruff_cache

include mk/vllm.mk
