# The README's commands. Each works alone on a fresh clone: it installs what is missing first.
#   make test   install everything, then lint, type-check and run the whole test suite
#   make run    the suite's main job: a local control plane, 3 real nodes and the Typesense
#               operator managing a real 3-node Typesense cluster you can query
#   make down   stop what `make run` started

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= $(HOME)/.cache/operator-suite/venv
RUN_DIR ?= $(HOME)/.local/state/operator-suite/sandbox
BIN := $(VENV)/bin
export PATH := $(BIN):$(PATH)
# Keep bytecode and tool caches out of the work tree.
export PYTHONPYCACHEPREFIX := $(HOME)/.cache/operator-suite/pycache

.PHONY: install binaries tools node-tools image-tools image lint test unit integration e2e run down journey crds

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The editable install points at one checkout; the stamp names it, so another clone reinstalls,
# and installing removes the other checkouts' stamps, so that coming back reinstalls here too.
STAMP := $(VENV)/.installed-$(shell pwd | md5sum | cut -c1-12)

# Two distributions: the runtime (operator-suite, what an image installs) and the test kit.
$(STAMP): pyproject.toml testkit/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e ./testkit
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

# The control-plane binaries (all the main job needs).
binaries: install
	$(BIN)/operator-suite-dev binaries

# The control-plane binaries, then the Cluster Stack tests' helm, OCI registry and Cluster API CRDs,
# Prometheus and promtool for the alert-rule tests, the S3 server of the Typesense backup tests, and the
# real nodes' kubelet, kube-proxy, containerd, CoreDNS and pause.
tools: install node-tools
	$(BIN)/operator-suite-dev binaries --clusterstack --nodes

# What real nodes take from Debian: runc (with libseccomp), the CNI plugins, iptables and conntrack for
# kube-proxy, busybox for the small test images, buildah and mmdebstrap to build every image, and Maven
# to resolve the jars of Monocle's search engine (OpenSearch, operator_testkit.nodes.opensearch).
NODE_PACKAGES := runc containernetworking-plugins iptables conntrack busybox-static buildah mmdebstrap maven
# apt's own output goes to a log that the step's line names, and is shown only when it fails (issue 67).
# $(1): the packages; $(2): apt-get install's options besides.
APT_LOG := $(HOME)/.cache/operator-suite/apt.log
define apt_install
	echo "[make] installing Debian packages: $(1) (log: $(APT_LOG))"; \
	mkdir -p $(dir $(APT_LOG)); started=$$(date +%s); \
	if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) $(1)) >$(APT_LOG) 2>&1; \
	then echo "[make] Debian packages: done in $$(( $$(date +%s) - started )) s"; \
	else tail -n 40 $(APT_LOG); echo "[make] apt-get failed: the whole log is $(APT_LOG)"; exit 1; fi
endef

node-tools:
	@dpkg -s $(NODE_PACKAGES) >/dev/null 2>&1 || { $(call apt_install,$(NODE_PACKAGES),--no-install-recommends); }

# The runtime image is built without a Docker engine: mmdebstrap makes its Debian base, buildah builds
# the Dockerfile (operator_testkit.image).
image-tools:
	@test -x /usr/bin/buildah -a -x /usr/bin/mmdebstrap || { $(call apt_install,buildah mmdebstrap); }

image: install image-tools
	$(BIN)/operator-suite-dev image

lint: install
	$(BIN)/ruff check src testkit tests bench
	$(BIN)/ruff format --check src testkit tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/operator-suite crds --check

# pytest exits 5 when it collected no test; that is a failure here, never a pass.
define pytest
	$(BIN)/pytest $(1); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests: failing the run"; exit 1; fi; \
	exit $$status
endef

# Most e2e time is waiting (for raft elections, grace periods, pods), so three workers shorten it even on
# two cores (decision 54); each worker starts its own control planes and real nodes, on its own loopback
# addresses.
TEST_WORKERS ?= 3

# Every test's time goes to a JUnit report outside the work tree, for finding where the run's time goes.
TEST_REPORT ?= $(HOME)/.cache/operator-suite/last-test-run.xml

test: tools image-tools lint
	$(call pytest,-n $(TEST_WORKERS) --dist worksteal --durations=40 --junitxml=$(TEST_REPORT) tests)

unit: install
	$(call pytest,-m unit tests)

integration: tools
	$(call pytest,-m integration tests)

e2e: tools image-tools
	$(call pytest,-m e2e tests)

crds: install
	$(BIN)/operator-suite crds

# Only what the sandbox runs is built: none of the tests' own tools (Prometheus alone is 6 min cold).
# Cold, the Go programs hold both cores for minutes while Debian's packages and the images made of them
# mostly wait on the network: those go alongside (apt, then the suite's, Typesense's and nginx's images),
# and `sandbox up` starts once both are done. Where things are is noise here; progress is on stderr.
run: install
	@{ $(MAKE) --no-print-directory node-tools image-tools && \
	   $(BIN)/operator-suite-dev sandbox images >/dev/null; } & alongside=$$!; \
	$(BIN)/operator-suite-dev binaries --nodes --sandbox >/dev/null; built=$$?; \
	wait $$alongside; made=$$?; \
	if [ $$built -ne 0 ] || [ $$made -ne 0 ]; then echo "[make] run: a step above failed"; exit 1; fi
	$(BIN)/operator-suite-dev sandbox up --dir $(RUN_DIR)

down: install
	$(BIN)/operator-suite-dev sandbox down --dir $(RUN_DIR)

# The Cluster Stack operator's whole journey on two control planes of its own; stops them at the end.
journey: tools
	$(BIN)/operator-suite-dev sandbox journey
