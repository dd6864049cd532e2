# lakebus — two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# the `lakebus` console command (pyproject's [project.scripts]); `lakebus --help` lists what it does
LAKEBUS := $(VENV)/bin/lakebus
STACK := $(LAKEBUS) stack
PYTEST_ARGS ?=
MAVEN_POM := infra/maven/pom.xml
#: lakebus's own Java: its Connect plugin (door, REST extension) and its Iceberg sink connector
JAVA_MODULES := connect-plugin-lakebus,connect-sink-lakebus
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install lock test-tools deploy-tools demo test java-test unit stack-up stack-down stack-status stack-logs dagster-up dagster-down bench clean

## install: the Python environment only (pip's cache is reused between runs); the jars come with
## stack-up. This is all `make demo` installs: Python 3.11, Java 17, Maven and the package registries.
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "[install] pip install -e .[dev] -c constraints.txt (the locked versions; first run downloads pyspark, ~400 MB)"
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' -c constraints.txt
	@touch $@

## lock: refresh constraints.txt (every package's exact version) from a clean venv of pyproject.toml's
## dependencies; run it after changing them, review the diff, commit it
LOCK_VENV := build/lock-venv
lock:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install -q -e '.[dev]'
	@{ sed -n '1,3p' constraints.txt; $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf $(LOCK_VENV)
	@echo "[lock] constraints.txt refreshed: review git diff constraints.txt and commit it"

## test-tools: what only the tests need (`make test` depends on it; docs/testing.md says why):
## Debian's chromium (the browser tests: Playwright drives /usr/bin/chromium, it never downloads a
## browser), Debian's PostgreSQL server (the Dagster-on-Postgres test) and compose implementation
## (`docker-compose config` checks deploy/compose.yaml, no daemon), and kubectl-validate (deploy/k8s
## against the API server's schemas) built with `go install` into ~/.cache/lakebus/tools (never into
## the repository). Each is installed only when missing.
DEPLOY_TOOLS := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/lakebus/tools
KUBECTL_VALIDATE_VERSION := v0.0.4
test-tools:
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "[test-tools] /usr/bin/chromium missing: apt-get update -qq && apt-get install -y -qq chromium"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi
	@missing=""; ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	if [ -n "$$missing" ]; then \
		echo "[test-tools] apt-get install -y --no-install-recommends$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@if [ ! -x $(DEPLOY_TOOLS)/kubectl-validate ]; then \
		echo "[test-tools] go install sigs.k8s.io/kubectl-validate@$(KUBECTL_VALIDATE_VERSION) into $(DEPLOY_TOOLS)"; \
		go=$$(command -v go || echo /usr/local/go/bin/go); \
		[ -x "$$go" ] || { echo "[test-tools] ERROR: the Go toolchain (go) is needed to build kubectl-validate"; exit 1; }; \
		mkdir -p $(DEPLOY_TOOLS) && GOBIN=$(DEPLOY_TOOLS) "$$go" install sigs.k8s.io/kubectl-validate@$(KUBECTL_VALIDATE_VERSION); \
	fi

## deploy-tools: the former name of test-tools
deploy-tools: test-tools

## stack-up / stack-down / stack-status / stack-logs: the local stack's seven processes (s3, kafka,
## rest-catalog, connect, spark-master, spark-worker, spark-connect)
stack-up: install
	$(STACK) up
stack-down: install
	$(STACK) down
stack-status: install
	$(STACK) status
stack-logs: install
	$(STACK) logs

## demo: stack + Dagster UI (webserver and daemon) on http://127.0.0.1:3000, then, through the UI's
## GraphQL API: provision the bus, send sample events (only to an empty bus), wait for the sink,
## materialize the DWS partitions; rerunning starts no duplicate processes, events or rows
demo: stack-up
	$(LAKEBUS) ui up
	$(LAKEBUS) demo

dagster-up: stack-up
	$(LAKEBUS) ui up
dagster-down: install
	$(LAKEBUS) ui down

## test: every test, in stages that each print their time: java-test (JUnit of lakebus's Connect plugin
## and its Iceberg sink connector, reports in infra/maven/<module>/target/surefire-reports), unit (no services), stack-up,
## integration (the real stack), then daemon (a real dagster dev: webserver + daemon, against the stack)
## while, beside them on ports of their own, lake-up + lake (lakebus demo twice, the DWS schedule and
## the lakehouse tests on a fresh stack),
## cluster-up + cluster (3 brokers, 2 Connect workers; failover under load), secured-up + secured
## (SASL/SCRAM + ACLs, Connect REST basic auth) and cdc-up + cdc (change capture from PostgreSQL) run
## one after the other
## (lakebus_dagster_tests/stages.py); stops afterwards whatever it started; JUnit in build/junit-<stage>.xml
test: install test-tools java-test
	@PYTEST_ARGS='$(PYTEST_ARGS)' $(PY) -m lakebus_dagster_tests.stages

java-test:
	@start=$$(date +%s); rc=0; \
	mvn -B -q -Dstyle.color=never -f $(MAVEN_POM) -pl $(JAVA_MODULES) test || rc=$$?; \
	echo "[java-test] $(JAVA_MODULES) JUnit finished in $$(( $$(date +%s) - start ))s with exit code $$rc"; \
	exit $$rc

## unit: only the tests that need no stack
unit: install
	$(PY) -m pytest lakebus_dagster_tests/unit $(PYTEST_ARGS)

## bench: every benchmark in benchmarks/, results printed and appended to build/benchmarks.json
bench: stack-up
	$(LAKEBUS) bench

clean:
	rm -rf build .pytest_cache
