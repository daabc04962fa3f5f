# duilian: the couplet service. `make` lists the verbs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
PRESET ?= cpu
export PYTHONPATH := $(CURDIR)

.PHONY: help setup sysdeps serve cluster crawl corpora data train eval bench test check lint

help: ## list the verbs
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-8s %s\n", $$1, $$2}'

# uv installs the same versions as pip in about a third of the time (docs/MEASUREMENTS.md, "Test
# time"); pip's own find-links (where a machine keeps wheels such as PyTorch's CPU build) are
# passed on, and pip does it all where uv cannot
FIND_LINKS := $(or $(PIP_FIND_LINKS),$(shell python3 -m pip config get global.find-links 2>/dev/null))
UV_INSTALL = VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/uv pip install --quiet --compile-bytecode \
	--python $(PY) $(foreach f,$(FIND_LINKS),--find-links $(f))

$(PY): pyproject.toml
	python3 -m venv $(VENV)
	if $(PY) -m pip install --quiet uv && $(UV_INSTALL) torch==2.13.0 && $(UV_INSTALL) -e '.[all,dev]'; then \
		:; \
	else \
		echo "uv could not install everything: pip installs it"; \
		$(PY) -m pip install --quiet --upgrade pip && $(PY) -m pip install --quiet torch==2.13.0 && \
		$(PY) -m pip install --quiet -e '.[all,dev]'; \
	fi
	touch $(PY)

setup: $(PY) ## make the virtual environment and install everything

serve: $(PY) ## serve the couplet site on http://127.0.0.1:8000 with the shipped default model
	$(PY) -m serve $(SERVE_ARGS)

cluster: $(PY) sysdeps ## N replicas behind HAProxy with one PostgreSQL and one Redis (CLUSTER_ARGS='--replicas 3')
	$(PY) -m serve.cluster up $(CLUSTER_ARGS)

crawl: $(PY) ## crawl couplet pairs into work/crawl/*.jsonl (CRAWL_ARGS to choose spiders)
	$(PY) -m crawler $(CRAWL_ARGS)

corpora: $(PY) ## download the public corpora (wb14123, chinese-poetry) into DUILIAN_CORPUS_DIR, sha256-checked
	$(PY) -m data.corpora $(CORPORA_ARGS)

data: $(PY) ## normalise, filter, dedup, split, and build the vocabulary into work/data
	$(PY) -m data $(DATA_ARGS)

train: $(PY) ## train the model (PRESET=tiny|cpu|gpu), evaluate, export the bundle
	$(PY) -m model.train --preset $(PRESET) $(TRAIN_ARGS)

eval: $(PY) ## BLEU, perplexity, rule compliance on the wb14123 test set
	$(PY) -m model.evaluate $(EVAL_ARGS)

bench: $(PY) ## benchmarks: data stage, decoding latency, server load, faults under load, crawler
	$(PY) -m bench $(BENCH_ARGS)

sysdeps:
	@bash scripts/sysdeps.sh

# one pytest-xdist worker more than the cores: the tests wait on servers and child processes
# about a fifth of the time, which a third worker fills (docs/MEASUREMENTS.md, "Test time")
WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

test: $(PY) sysdeps ## run the test suite on every core (installs Redis, PostgreSQL, Chromium, wrk if missing)
	$(PY) -m pytest -n $(WORKERS) --dist loadfile $(TEST_ARGS)

# the edit-run loop: lint, then the tests that need no browser, corpus, Redis or PostgreSQL
# and take under about two seconds, on every core, the exported graphs kept between runs
FAST := not slow and not browser and not corpus and not postgres and not redis
check: $(PY) ## lint and the fast tests (about two minutes; make test runs them all)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy bench crawler data duilian model serve tests
	DUILIAN_TEST_GRAPH_CACHE=$(CURDIR)/work/cache/test-onnx $(PY) -m pytest -n auto --dist loadfile -q -m "$(FAST)" $(TEST_ARGS)

lint: $(PY) ## ruff and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy bench crawler data duilian model serve tests
