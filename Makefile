# Horus developer entry points. Every target works from a fresh clone (each calls `setup` as needed).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HORUS := $(BIN)/horus
PYTEST_ARGS ?=

.PHONY: setup control-plane helm kueue jobset image demo test test-unit test-compiled test-e2e compiled uncompiled lint cluster-up cluster-down reproduce bench chaos clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# Compiles kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and kwok once; cached.
control-plane:
	bash hack/build-control-plane.sh

# Compiles helm (charts/horus: linted below, rendered and installed by tests/e2e/test_helm_chart.py) once; cached.
helm:
	bash hack/build-helm.sh

# Compiles Kueue's manager and copies its CRDs (tests/e2e/test_kueue.py runs them) once; cached.
kueue:
	bash hack/build-kueue.sh >/dev/null

# Compiles the controller managers of JobSet and of Kubeflow Trainer and copies their CRDs
# (tests/e2e/test_jobset.py runs them) once; cached.
jobset:
	bash hack/build-jobset.sh >/dev/null
	bash hack/build-jobset.sh trainer >/dev/null

# The operator image horus-operator:<version> as out/image/*.oci.tar and *.docker.tar, built without a
# container engine from Debian packages and the project's wheel (docs/image.md); cached.
image: setup
	PYTHON=$(BIN)/python bash hack/build-image.sh

demo: setup control-plane
	bash hack/demo.sh

# Unit tests, then the e2e suite against the real local control plane.
# pytest exits 5 when it collected nothing: that fails the target like any other failure.
test: setup control-plane kueue jobset
	$(BIN)/pytest -m "not e2e" $(PYTEST_ARGS)
	$(MAKE) test-compiled
	$(BIN)/pytest -m e2e --durations=15 $(PYTEST_ARGS)

test-unit: setup
	$(BIN)/pytest -m "not e2e" $(PYTEST_ARGS)

# The compiled build (hack/compile.py) in a copy of the tracked files, out/compiled: the unit suite there
# (less the tests that subclass the core's classes) and tests/unit/sim/test_compiled.py, which checks that
# it simulates byte for byte as the sources do. About 3 minutes on 2 cores.
test-compiled: setup
	$(BIN)/python hack/compile.py --tree out/compiled
	cd out/compiled && PYTHONPATH=$$PWD ../../$(BIN)/pytest -m "not e2e and not interpreted" -p no:cacheprovider $(PYTEST_ARGS)

test-e2e: setup control-plane kueue jobset
	$(BIN)/pytest -m e2e $(PYTEST_ARGS)

lint: setup helm
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	"$$(bash hack/build-helm.sh)" lint --strict charts/horus
	"$$(bash hack/build-helm.sh)" lint --strict charts/horus -f charts/horus/ci/everything-on-values.yaml

# The placement core and the simulator's event loop compiled with mypyc beside their sources, about 1.7x
# faster (docs/benchmarks.md); `import horus_operator` refuses the build once a source changes.
compiled: setup
	$(BIN)/python hack/compile.py

uncompiled:
	$(PYTHON) hack/compile.py --clean

cluster-up: setup control-plane
	$(HORUS) cluster up

cluster-down: setup
	$(HORUS) cluster down

reproduce: setup
	$(HORUS) simulate --workload horus-2500 --policy horus,exclusive,binpack --seed 1 --output out/reproduce

# The reliability table (docs/reliability.md): 1,000 DLJobs while the operator, the API server, etcd or
# GPU nodes die; prints it and writes out/chaos/*.json. About 15 minutes.
chaos: setup control-plane
	$(BIN)/python bench/chaos.py

bench: setup control-plane
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean: uncompiled
	rm -rf $(VENV) out .pytest_cache .ruff_cache
