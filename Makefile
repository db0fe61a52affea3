# paddock - the two commands of the README, and a few more.
#
#   make              build ./build/paddock
#   make run ARGS='…' set up, build, and run `paddock run ARGS` (default: a short demo)
#   make test         set up (Debian packages, tests/clients npm ci), build, run every suite
#                     (unit, fuzz, integration, ASan+UBSan, real clients)
#   make test-clients set up Claude Code too (large), and run it as a real MCP client of
#                     paddock mcp (tests/integration/test-claude.sh; as root)
#   make fuzz         run every libFuzzer target for 60 s (FUZZ_JOBS=N at once)
#   make bench        set up the benches' own tools too, then run the benches
#   make install      build, then install under PREFIX (default /usr/local; DESTDIR=
#                     stages it): bin/paddock, libexec/paddock/paddock-full,
#                     paddock-init and paddock-otlp, share/man/man1/paddock*.1,
#                     share/doc/paddock
#   make uninstall    remove what make install put there (same PREFIX and DESTDIR)
#   make dashboard-shots  run the dashboard suite, keeping a screenshot of each view of the
#                     operator's page in docs/dashboard/ (docs/dashboard.md shows them)
#
# Set-up installs the Debian packages below when run as root, and otherwise
# prints the exact apt-get line to run.

DEB_PACKAGES := build-essential meson ninja-build pkg-config libseccomp-dev libjansson-dev \
	libyaml-dev libcriterion-dev clang libclang-rt-14-dev bubblewrap python3 \
	util-linux procps musl-tools libcap2-bin clang-format bsdutils diffutils patch \
	libsqlite3-dev libssl-dev sqlite3 openssl libcurl4-openssl-dev \
	libevent-dev libhttp-parser-dev libidn2-dev libunistring-dev curl python3-yaml jq \
	zlib1g-dev libzstd-dev libpcre2-dev \
	python3-jsonschema man-db
# The test clients nobody here wrote (tests/clients/package.json, `npm ci`): the MCP SDKs,
# inspector and conformance suite, the reference MCP servers the gateway runs as upstreams,
# E2B's SDKs, playwright-core driving Debian's chromium.
# The images suites and the code interpreter use the rest; the leaks suite holds a sandbox's
# setup at one syscall with strace's fault injection; the jschema unit suite runs Debian's
# json-schema-test-suite (docs/json-schema.md); the workspace suite reads ext4's flags with
# lsattr and sets them with chattr (e2fsprogs).
TEST_DEB_PACKAGES := nodejs chromium umoci mmdebstrap busybox-static zstd \
	python3-ipykernel python3-jupyter-client python3-matplotlib strace json-schema-test-suite \
	e2fsprogs
# Only for the benches: bench/egress runs sandbox-runtime's proxy (package.json, `npm ci`),
# whose SandboxManager will not start without rg and socat. Debian's npm package is
# installed only when no npm command exists: a nodejs package that bundles npm (a repack of
# upstream's) declares a conflict with it. bench/sched-tail records the scheduler with perf
# (linux-perf), run by hand.
BENCH_DEB_PACKAGES := nodejs ripgrep socat linux-perf
NPM_PACKAGE := npm
BUILD ?= build
ASAN_BUILD ?= build-asan
MESON ?= meson
ARGS ?=
# Where `make install` puts paddock. The build compiles PREFIX/libexec/paddock in as the place of
# its helpers (base/paths.h), so install reconfigures the build when PREFIX changed.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR = $(PREFIX)/bin
HELPERDIR = $(PREFIX)/libexec/paddock
MAN1DIR = $(PREFIX)/share/man/man1
DOCDIR = $(PREFIX)/share/doc/paddock

.PHONY: all setup test-setup test-clients-setup test-clients npm-setup bench-setup build run test test-fast fuzz bench format format-check clean \
	install uninstall check-prefix test-images dashboard-shots

all: build

# deb_install PACKAGES...: install those not installed yet (as root), or say how.
define deb_install
missing=""; for p in $(1); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "installing:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		else \
			echo "missing Debian packages; run:"; \
			echo "  sudo apt-get install -y$$missing"; exit 1; \
		fi; \
	fi
endef

setup:
	@$(call deb_install,$(DEB_PACKAGES))

# npm_ci DIR [FLAGS]: `npm ci` in DIR when its lock file differs from the one it last installed
# (a copy kept in node_modules; by content, not time: a checkout's times say nothing).
define npm_ci
if ! cmp -s $(1)/package-lock.json $(1)/node_modules/.paddock-lock.json; then \
		echo "npm ci in $(1)"; \
		(cd $(1) && npm ci --no-audit --no-fund --loglevel=error $(2) >/dev/null && \
			cp package-lock.json node_modules/.paddock-lock.json) || exit 1; \
	fi
endef

npm-setup:
	@if ! command -v npm >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(NPM_PACKAGE) >/dev/null; \
		else echo "npm is missing; run: sudo apt-get install -y $(NPM_PACKAGE)"; exit 1; fi; \
	fi

# Install scripts stay off: nothing a test client runs at install time may reach the network.
test-setup: setup
	@$(call deb_install,$(TEST_DEB_PACKAGES))
	@$(MAKE) --no-print-directory npm-setup
	@$(call npm_ci,tests/clients,--ignore-scripts)

# Claude Code (384 MB) only for make test-clients. Its install script copies the native
# binary out of the platform package npm already fetched; it does not download.
test-clients-setup: test-setup
	@$(call npm_ci,tests/clients/claude)

# Claude Code drives paddock mcp and paddock gateway as an agent would, against a fake
# Messages API on loopback, in a network namespace of its own (no traffic beyond it); as
# root and as nobody.
test-clients: build test-clients-setup
	@PADDOCK='$(CURDIR)/$(BUILD)/paddock' PADDOCK_INIT='$(CURDIR)/$(BUILD)/paddock-init' \
		TESTS_DIR='$(CURDIR)/tests' BUILD_DIR='$(CURDIR)/$(BUILD)' \
		bash tests/integration/test-claude.sh
	@PADDOCK='$(CURDIR)/$(BUILD)/paddock' PADDOCK_INIT='$(CURDIR)/$(BUILD)/paddock-init' \
		TESTS_DIR='$(CURDIR)/tests' BUILD_DIR='$(CURDIR)/$(BUILD)' \
		bash tests/integration/test-claude-gateway.sh

bench-setup: setup
	@$(call deb_install,$(BENCH_DEB_PACKAGES))
	@$(MAKE) --no-print-directory npm-setup
	@$(call npm_ci,.)

$(BUILD)/build.ninja:
	$(MESON) setup --prefix='$(PREFIX)' $(BUILD) >/dev/null

build: setup $(BUILD)/build.ninja
	@ninja -C $(BUILD) >/dev/null || ninja -C $(BUILD)

# ARGS is decided here, not by the shell: it may hold quotes of its own.
run: build
ifeq ($(strip $(ARGS)),)
	@sh tests/demo.sh ./$(BUILD)/paddock
else
	@./$(BUILD)/paddock run $(ARGS)
endif

# Every suite; the last line is "N passed, N failed" over all of them. The ASan+UBSan
# build (clang, with the fuzz targets) is made by tests/run-all.sh beside the first suites.
test: build test-setup
	@sh tests/run-all.sh $(BUILD) $(ASAN_BUILD)

# The Debian image of docs/images.md built from a recipe (mmdebstrap, python3, numpy, pandas)
# and built again from the cache. It reaches the Debian mirror (PADDOCK_TEST_MIRROR, default
# deb.debian.org), so it is not part of the offline `make test`.
test-images: build test-setup
	@t=$$(date +%s); PADDOCK='$(CURDIR)/$(BUILD)/paddock' PADDOCK_INIT='$(CURDIR)/$(BUILD)/paddock-init' \
		TESTS_DIR='$(CURDIR)/tests' BUILD_DIR='$(CURDIR)/$(BUILD)' \
		bash tests/integration/images-debian.sh; rc=$$?; \
		echo "# make test-images: $$(( $$(date +%s) - t )) s"; exit $$rc

# The dashboard suite (tests/integration/test-dashboard.sh) in real Chromium, its root run
# keeping a screenshot of each view for docs/dashboard.md.
dashboard-shots: build test-setup
	DASHBOARD_SHOTS='$(CURDIR)/docs/dashboard' $(MESON) test -C $(BUILD) dashboard --print-errorlogs

check-prefix:
	@case '$(PREFIX)' in /*) ;; *) echo "PREFIX must be an absolute path, not '$(PREFIX)'"; exit 1;; esac

# The build's prefix made PREFIX (meson's "prefix" option), else reconfigured to it: the
# compiled-in helper directory must be where the helpers go. A build directory the caller
# may not write (another user's) is installed as it is, unbuilt.
install: check-prefix setup $(BUILD)/build.ninja
	@have=$$($(MESON) introspect $(BUILD) --buildoptions | python3 -c \
		'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))'); \
	if [ "$$have" != '$(PREFIX)' ]; then \
		echo "reconfiguring $(BUILD) for PREFIX=$(PREFIX) (was $$have)"; \
		$(MESON) configure $(BUILD) -Dprefix='$(PREFIX)' >/dev/null || exit 1; \
	fi
	@if [ -w $(BUILD) ]; then \
		ninja -C $(BUILD) paddock paddock-full paddock-otlp paddock-init >/dev/null || \
			ninja -C $(BUILD); \
	else echo "$(BUILD) is not ours to write: installing it as it was built"; fi
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(HELPERDIR)' '$(DESTDIR)$(MAN1DIR)' \
		'$(DESTDIR)$(DOCDIR)'
	install -m 0755 $(BUILD)/paddock '$(DESTDIR)$(BINDIR)/paddock'
	install -m 0755 $(BUILD)/paddock-full $(BUILD)/paddock-init $(BUILD)/paddock-otlp \
		'$(DESTDIR)$(HELPERDIR)/'
	python3 src/tools/man.py --docdir '$(DOCDIR)' --out '$(DESTDIR)$(MAN1DIR)' $(BUILD)/paddock
	install -m 0644 docs/*.md docs/api.yaml '$(DESTDIR)$(DOCDIR)/'

# Only what install put there: the directories PREFIX shares with others (bin, share/man)
# stay.
uninstall: check-prefix
	rm -f '$(DESTDIR)$(BINDIR)/paddock' '$(DESTDIR)$(HELPERDIR)/paddock-full' \
		'$(DESTDIR)$(HELPERDIR)/paddock-init' \
		'$(DESTDIR)$(HELPERDIR)/paddock-otlp' '$(DESTDIR)$(MAN1DIR)/paddock.1' \
		'$(DESTDIR)$(MAN1DIR)'/paddock-*.1
	rm -rf '$(DESTDIR)$(DOCDIR)'
	if [ -d '$(DESTDIR)$(HELPERDIR)' ]; then rmdir '$(DESTDIR)$(HELPERDIR)'; fi

test-fast: build
	meson test -C $(BUILD) --suite unit --suite fuzz

fuzz: setup
	bash tests/fuzz/run-fuzz.sh 60 $(ASAN_BUILD)

bench: build bench-setup test-setup
	python3 bench/startup ./$(BUILD)/paddock
	python3 bench/workspace ./$(BUILD)/paddock
	./$(BUILD)/bench-audit
	python3 bench/egress ./$(BUILD)/paddock
	python3 bench/egress-tls ./$(BUILD)/paddock
	python3 bench/daemon ./$(BUILD)/paddock --quick
	python3 bench/mcp ./$(BUILD)/paddock
	python3 bench/gateway ./$(BUILD)/paddock
	bash bench/e2b ./$(BUILD)/paddock
	python3 bench/images ./$(BUILD)/paddock

format:
	clang-format -i $$(git ls-files '*.[ch]')

format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.[ch]')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
