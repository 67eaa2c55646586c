# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
STAMP := .make/installed-$(shell $(PYTHON) -c 'import sys; print(sys.prefix.replace("/", "_"))')

.PHONY: demo test lint install

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@mkdir -p .make && touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PYTHON) -m exporter --demo --log.format console $(ARGS)

lint: $(STAMP)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy exporter

test: $(STAMP)
	$(PYTHON) -m pytest $(ARGS)
