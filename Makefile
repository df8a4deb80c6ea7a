# The two commands of the README: `make demo` and `make test`.
.PHONY: setup demo test bench-mask

setup:
	@scripts/setup.sh

demo: setup
	.venv/bin/chatsum demo

test: setup
	@scripts/install-test-tools.sh
	.venv/bin/python -m pytest -q
