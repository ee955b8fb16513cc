# Veneer: `make run` serves the development environment, `make test` runs every test.
# Both install what the build needs first (libyaml-dev through apt) when it is missing.

SWIFT   ?= swift
PREFIX  ?= /usr/local
DESTDIR ?=
ARGS    ?=
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export PATH := $(PATH):/opt/swift/usr/bin

.PHONY: all deps build release run test check bench clean

all: build

# libyaml (pkg-config yaml-0.1) is the one system library Veneer links.
deps:
	@if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists yaml-0.1; then \
		echo "make: installing libyaml-dev and pkg-config"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libyaml-dev pkg-config; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product veneer

# Serve the development environment of config/veneer.yaml on 127.0.0.1:8080 (ARGS="-e staging" etc.).
run: release
	.build/release/veneer run $(ARGS)

# Debug build only: CI builds from a fresh clone every time.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test

check: build
	.build/debug/veneer check --all

# Side-by-side benchmark against nginx, Varnish and HAProxy (see bench/README.md).
bench: release
	bench/run.sh

clean:
	rm -rf .build
