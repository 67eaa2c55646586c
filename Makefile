# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
STAMP := .make/installed-$(shell $(PYTHON) -c 'import sys; print(sys.prefix.replace("/", "_"))')

.PHONY: demo test lint install tools

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@mkdir -p .make && touch $(STAMP)

install: $(STAMP)

# The Debian tools the tests need (prometheus, promtool, node_exporter, wrk): installed with
# apt-get as root, or a stop with the command to run.
tools:
	@bash .ci/install-tools

demo: $(STAMP)
	$(PYTHON) -m exporter --demo --log.format console $(ARGS)

lint: $(STAMP)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy exporter bench
	$(PYTHON) -c 'from importlinter.cli import lint_imports_command; lint_imports_command()' --no-cache --no-logo

test: tools $(STAMP)
	$(PYTHON) -m pytest $(ARGS)
