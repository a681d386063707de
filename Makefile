# One make surface. `make` alone builds venv/ from requirements.txt.
PY := venv/bin/python
CHECKOV := venv-checkov/bin/checkov
STACK ?= dev

.PHONY: all lock preview plan render check-render docs test validate-check hardening-check program-check lint bench clean

all: venv/.installed

# Quiet pip, but say what is happening: on a fresh clone this takes about a minute.
# requirements.lock pins every package with its hashes (`make lock` regenerates it).
venv/.installed: requirements.lock pyproject.toml
	@echo "venv/: installing requirements.lock (Pulumi SDKs, scipy, ...; about a minute on a fresh clone)"
	@test -x $(PY) || { echo "  [1/4] creating venv/ with $$(python3 --version)"; python3 -m venv venv; }
	@echo "  [2/4] upgrading pip"
	@$(PY) -m pip install -qq --upgrade pip
	@echo "  [3/4] pip install --require-hashes -r requirements.lock (the slow step)"
	@$(PY) -m pip install -qq --require-hashes -r requirements.lock
	@echo "  [4/4] pip install -e . (llmfleet itself)"
	@$(PY) -m pip install -qq --no-deps -e .
	@touch $@
	@echo "venv/: ready"

# requirements.txt (ranges) -> requirements.lock (exact versions and hashes, Linux x86-64,
# Python 3.11); uv keeps the versions already locked where they still satisfy the ranges.
lock: venv/.installed
	@$(PY) -m pip install -qq uv
	venv/bin/uv pip compile requirements.txt --generate-hashes --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 -q -o requirements.lock

# checkov in its own venv: its exact pins would downgrade the Pulumi SDKs in venv/.
venv-checkov/.installed: requirements-checkov.txt
	@echo "venv-checkov/: installing checkov (requirements-checkov.txt; about 20 s)"
	@test -x $(CHECKOV) || python3 -m venv venv-checkov
	@venv-checkov/bin/python -m pip install -qq -r requirements-checkov.txt
	@touch $@

preview: venv/.installed
	$(PY) -m llmfleet preview --stack $(STACK)

plan: venv/.installed
	$(PY) -m llmfleet plan --stack $(STACK)

render: venv/.installed
	$(PY) -m llmfleet render

check-render: venv/.installed
	$(PY) -m llmfleet render --check

# docs/plan.md, generated from the schema's Field(description=...) texts, and README's pasted
# `llmfleet plan --stack dev` output (tests check both are current).
docs: venv/.installed
	$(PY) -m llmfleet.outputs.plan_reference > docs/plan.md
	$(PY) -m llmfleet.outputs.front_door README.md

# `test` (2 workers sharing one FleetPlan cache, llmfleet.disk_memo; 2 to 6 minutes on 2 cores,
# by the machine) leaves out the leave-one-source-out refits (most of a minute),
# the hardening tests (property tests, secret hygiene and the policy pack over every
# stack's preview) and the slow program tests (the Pulumi program under mocks, fresh
# interpreters); `validate-check`, `hardening-check` and `program-check` run exactly
# those. CI runs all four.
test: venv/.installed
	$(PY) -m pytest -n 2 --dist loadfile -m "not validation and not hardening and not slow"

program-check: venv/.installed
	$(PY) -m pytest -m slow

validate-check: venv/.installed
	$(PY) -m pytest -m validation

hardening-check: venv/.installed
	$(PY) -m pytest -m hardening

# zizmor: GitHub Actions static analysis, offline; any medium or high finding fails.
# checkov scans rendered/ (what `render --check` keeps equal to what the stacks render): every
# failed check is fixed or skipped in the manifest with checkov's annotation and the reason.
lint: venv/.installed venv-checkov/.installed
	$(PY) -m ruff check llmfleet components tests policy __main__.py
	$(PY) -m mypy
	venv/bin/zizmor --offline --min-severity medium .github/workflows/
	$(CHECKOV) -d rendered --framework kubernetes --quiet --compact --skip-download

# The simulator's figures first: bench.py exits 1 when a command misses its target, and make
# stops at the first command that fails.
bench: venv/.installed
	$(PY) benchmarks/simulate_bench.py
	$(PY) benchmarks/bench.py

clean:
	rm -rf venv venv-checkov .pytest_cache .mypy_cache .ruff_cache
