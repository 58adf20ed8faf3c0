# ctxgraphd build, test and benchmark entry points.
#
# `make test` installs everything the tests need (Go modules, the pinned
# Claude Code CLI from the npm registry, and, as root with apt, the Debian
# packages of the sandbox and the viewers) and runs every package's tests
# and the core end-to-end nights with -race; `make test-all`, which CI runs,
# runs `make test` and then every other night. Nothing here downloads
# anything else.

GO            ?= go
CLAUDE_VERSION := 2.1.330
TOOLS         := $(CURDIR)/.tools
CLAUDE_PKG    := $(TOOLS)/node_modules/@anthropic-ai/claude-code
CLAUDE        := $(TOOLS)/node_modules/.bin/claude
# Anthropic's sandbox runtime (srt): Claude Code's sandbox as a program of
# its own, which confines the setup step of a project (sandbox/setup.go).
SRT_VERSION   := 0.0.83
SRT_PKG       := $(TOOLS)/node_modules/@anthropic-ai/sandbox-runtime
SRT           := $(TOOLS)/node_modules/.bin/srt
GREMLINS_VERSION := v0.6.0
GREMLINS      := $(TOOLS)/bin/gremlins
# gotestsum runs `go test -json`, prints go test's usual lines and keeps the
# events, from which `make test` ends with the ten slowest tests. The
# version is in the file's name, so that changing the pin installs it.
GOTESTSUM_VERSION := v1.13.0
GOTESTSUM     := $(TOOLS)/bin/gotestsum-$(GOTESTSUM_VERSION)
# Where `make test` keeps the test events of its last run (tests.json, and
# extended.json for the nights `make test-all` adds),
# for `$(GOTESTSUM) tool slowest` and for a person.
TESTRUN       := $(CURDIR)/.testrun
# How many end-to-end tests run at once (go test -parallel). One test alone
# keeps about one of the 2 cores busy (its CLI, race-enabled daemon and
# hooks take turns), and most of a night is waits (the CLI's turns, the
# daemon's test runs): with the other packages in slots of their own
# (TEST_PACKAGES), 4 at once took make test's go test from 1081 s to 849
# (docs/DEVELOPING.md has the measures).
E2E_PARALLEL  ?= 4
# Packages whose tests run at once (go test -p): the end-to-end package holds
# one slot for the whole run, and the other packages' tests, most of them
# waiting on processes, share the rest (docs/DEVELOPING.md).
TEST_PACKAGES ?= 3
# What `make test` and the extended nights of `make test-all` say they
# take, measured on a fresh clone on a quiet 2-core machine
# (docs/DEVELOPING.md).
TEST_MINUTES  := 14
EXTENDED_MINUTES := 8
# go test's usual lines (ok, FAIL, ? for packages without tests), each
# failed test's output, and a closing DONE line; gotestsum runs $(GO) as
# given.
GOTESTSUM_FLAGS := --format standard-quiet --hide-summary=skipped --raw-command
# go test's own "--- FAIL: TestX (1.2s)" lines, from a step's events: the
# failures are shown by gotestsum as "=== FAIL" blocks with their output,
# and these name them as go test does.
FAIL_LINES    = echo "== failed:"; sed -n 's/.*"Output":"\( *--- FAIL: .*\)\\n"}$$/\1/p'
# What `ctxgraphd version` says: the nearest tag, the commit, and whether
# the tree had changes.
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS       := -s -w -X main.version=$(VERSION)
BIN           := $(CURDIR)/bin/ctxgraphd
HOOK_BIN      := $(CURDIR)/bin/ctxgraphd-hook

# The end-to-end tests find the real CLI through this variable; in CI
# (CI=true) they fail, rather than skip, when it is missing.
export CTXGRAPHD_TEST_CLAUDE := $(CLAUDE)
# srt sits beside claude, on the nights' PATH; the sandbox package's tests
# of the setup step find it through this variable.
export CTXGRAPHD_TEST_SRT := $(SRT)

.PHONY: all build test test-all test-short bench demo claude deps fuzz vet clean sandbox viewers mutate audit

all: build

deps:
	$(GO) mod download

# Static and stripped: the binary is also the hook, started on every tool
# call of every agent, and this build starts about a quarter faster than a
# default one (make bench, BenchmarkHook). e2e/harness_test.go builds the
# same way for the benchmarks.
build: deps
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags='$(LDFLAGS)' -o $(BIN) ./cmd/ctxgraphd
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(HOOK_BIN) ./cmd/ctxgraphd-hook

# Agents run confined by Claude Code's sandbox: on Linux it needs bubblewrap
# and socat; the sandbox runtime that confines the setup step needs ripgrep
# too. Installed here where they are missing and we are root with apt;
# otherwise this says what to install and stops.
sandbox:
	@if [ "$$(uname -s)" != Linux ]; then exit 0; fi; \
	missing=""; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	command -v socat >/dev/null 2>&1 || missing="$$missing socat"; \
	command -v rg >/dev/null 2>&1 || missing="$$missing ripgrep"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing the sandbox's packages:$$missing"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || \
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }; \
	else \
		echo "ctxgraphd confines agents with Claude Code's sandbox, which needs:$$missing"; \
		echo "install them (Debian/Ubuntu: sudo apt install$$missing; Fedora: sudo dnf install$$missing) and run make again"; \
		exit 1; \
	fi

# What a person sees is tested as a person sees it: the report's page in
# headless Chromium, the live view in tmux; and the honest night runs pytest
# (Debian's, which any python3 on PATH may lack); the recording of a test
# run's inputs (internal/inputs) mounts FUSE, with fuse3's fusermount3 as a
# user other than root. Installed here where they
# are missing and we are root with apt; otherwise this says what to install
# (the tests that need them then skip, and fail in CI).
viewers:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	command -v pytest >/dev/null 2>&1 || missing="$$missing python3-pytest"; \
	command -v fusermount3 >/dev/null 2>&1 || missing="$$missing fuse3"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing what the tests of the report, the live view and the honest night need:$$missing (a few minutes the first time)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || \
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }; \
	else \
		echo "the tests of the report, the live view and the honest night need:$$missing; install them (sudo apt install$$missing) or those tests skip"; \
	fi

# The npm package ships a stub launcher; its postinstall (which npm does not run
# here by itself) puts the native binary in place. The version check proves it.
claude: $(CLAUDE_PKG)/.installed-$(CLAUDE_VERSION) $(SRT_PKG)/.installed-$(SRT_VERSION)

$(SRT_PKG)/.installed-$(SRT_VERSION): $(CLAUDE_PKG)/.installed-$(CLAUDE_VERSION)
	npm install --no-audit --no-fund --save-exact --prefix $(TOOLS) @anthropic-ai/sandbox-runtime@$(SRT_VERSION)
	$(SRT) --version | grep -qx '$(SRT_VERSION)'
	touch $@

$(CLAUDE_PKG)/.installed-$(CLAUDE_VERSION):
	mkdir -p $(TOOLS)
	npm install --no-audit --no-fund --prefix $(TOOLS) @anthropic-ai/claude-code@$(CLAUDE_VERSION)
	cd $(CLAUDE_PKG) && node install.cjs
	$(CLAUDE) --version | grep -q '^$(CLAUDE_VERSION) '
	touch $@

vet: deps
	$(GO) vet ./...

# go test under gotestsum, for `make test` and `make test-all`: $(1) the
# tier of the end-to-end nights (e2e/tier_test.go), $(2) the file the test
# events are kept in, $(3) the packages. It prints go test's usual lines
# (ok, FAIL, the failures with their output, a closing DONE line) and ends
# with the ten slowest tests, so that a suite growing slower is seen; its
# exit status is the tests'.
define run_tests
	@status=0; \
	CTXGRAPHD_TEST_TIER=$(1) $(GOTESTSUM) $(GOTESTSUM_FLAGS) --jsonfile $(2) -- \
		$(GO) test -json -race -count=1 -timeout 60m -p $(TEST_PACKAGES) -parallel $(E2E_PARALLEL) $(3) || \
	{ status=$$?; $(FAIL_LINES) $(2); }; \
	echo "== the ten slowest tests (all of them: $(2))"; \
	$(GOTESTSUM) tool slowest --num 10 --jsonfile $(2); \
	exit $$status
endef

# Every package's tests and the core end-to-end nights, which drive the
# real CLI and are most of the time, in one `go test`: it runs
# TEST_PACKAGES packages' tests at a time, so the nights start as soon as
# they are built and the other packages' tests use the cores their waits
# leave (docs/DEVELOPING.md has the measures).
test: deps claude sandbox viewers vet $(GOTESTSUM)
	@rm -rf $(TESTRUN) && mkdir -p $(TESTRUN)
	@echo "== every package's tests and the core end-to-end nights (the real Claude Code CLI $(CLAUDE_VERSION), its sandbox and the scripted model, $(E2E_PARALLEL) at a time), with -race: about $(TEST_MINUTES) minutes on a quiet 2-core machine; each package's line comes when it ends, the end-to-end tests' last"
	$(call run_tests,core,$(TESTRUN)/tests.json,./...)

# `make test`, then the extended nights: further routes of the guarantees
# the core nights hold, and the nights too costly for `make test`. This is
# what CI runs on every landing.
test-all: test
	@echo "== the extended end-to-end nights, with -race: about $(EXTENDED_MINUTES) minutes more on a quiet 2-core machine"
	$(call run_tests,extended,$(TESTRUN)/extended.json,./e2e)

$(GOTESTSUM):
	GOBIN=$(TOOLS)/bin $(GO) install gotest.tools/gotestsum@$(GOTESTSUM_VERSION)
	mv $(TOOLS)/bin/gotestsum $@

# Unit tests only: no real CLI needed.
test-short: deps
	$(GO) test -race -short -count=1 ./...

bench: deps claude sandbox
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 180m ./...

# Every parser of outside input, 30 s each (FUZZTIME=5m make fuzz for longer).
FUZZTIME ?= 30s
fuzz: deps
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./progress
	$(GO) test -run '^$$' -fuzz '^FuzzStreamDecoder$$' -fuzztime $(FUZZTIME) ./agents
	$(GO) test -run '^$$' -fuzz '^FuzzParsePayload$$' -fuzztime $(FUZZTIME) ./gates
	$(GO) test -run '^$$' -fuzz '^FuzzFetchHost$$' -fuzztime $(FUZZTIME) ./gates
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./guards/rulefile
	$(GO) test -run '^$$' -fuzz '^FuzzParseFile$$' -fuzztime $(FUZZTIME) ./config
	$(GO) test -run '^$$' -fuzz '^FuzzMessages$$' -fuzztime $(FUZZTIME) ./scriptedmodel
	$(GO) test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME) ./internal/diagnose
	$(GO) test -run '^$$' -fuzz '^FuzzReadEnvironment$$' -fuzztime $(FUZZTIME) ./internal/diagnose
	$(GO) test -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME) ./internal/testreport
	$(GO) test -run '^$$' -fuzz '^FuzzAdd$$' -fuzztime $(FUZZTIME) ./internal/claudemd
	$(GO) test -run '^$$' -fuzz '^FuzzCuts$$' -fuzztime $(FUZZTIME) ./internal/textcut
	$(GO) test -run '^$$' -fuzz '^FuzzScopesOverlap$$' -fuzztime $(FUZZTIME) ./statemachine
	$(GO) test -run '^$$' -fuzz '^FuzzParseRaw$$' -fuzztime $(FUZZTIME) ./internal/gitrepo
	$(GO) test -run '^$$' -fuzz '^FuzzSplitPairs$$' -fuzztime $(FUZZTIME) ./internal/gitrepo

# Mutation testing of the packages whose tests are unit tests: gremlins,
# pinned, from the Go module proxy. Per package, about 5 to 10 minutes on two
# cores; `make mutate MUTATE_PKGS=guard` for one. It prints the efficacy of
# each and fails below its target (internal/dev/mutate says which and why).
MUTATE_PKGS ?=
MUTATE_WORKERS ?= 2
$(GREMLINS):
	GOBIN=$(TOOLS)/bin $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)

mutate: deps $(GREMLINS)
	$(GO) run ./internal/dev/mutate -gremlins $(GREMLINS) -workers $(MUTATE_WORKERS) -out $(CURDIR)/.mutate $(MUTATE_PKGS)

# The hand mutation audit: each guarantee of the loop, the gates and the
# verdicts removed once (internal/dev/mutate/hand.go), and the test named for it
# must fail. Part of finishing any change to them; `make audit ONLY=graph`
# runs the guarantees whose words match.
ONLY ?=
audit: deps
	$(GO) run ./internal/dev/mutate -audit -only '$(ONLY)'

demo: build claude sandbox
	PATH="$(dir $(CLAUDE)):$$PATH" $(BIN) demo

clean:
	rm -rf bin $(TESTRUN)
