# meshgen's build. `make demo` runs the main job, `make test` the tests.
GO        ?= go
BIN       := bin
CACHE     ?= $(HOME)/.cache/meshgen
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(CACHE)/staticcheck-$(STATICCHECK_VERSION)
FUZZTIME  ?= 20s
# The real cosign CLI, to check `cosign verify-blob` accepts our signatures.
# Built once (about 2 minutes) and cached.
COSIGN_VERSION := v2.6.5
COSIGN    := $(CACHE)/cosign-$(COSIGN_VERSION)

.PHONY: all build deps test fuzz bench lint demo clean cosign

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# deps installs podman, runc, busybox-static, git and the Go modules when any
# is missing (needs root; does nothing when all is there).
deps:
	@bash .ci/install-deps

# test runs every test, then each fuzz target for a short time.
test: deps $(COSIGN)
	MESHGEN_COSIGN=$(COSIGN) $(GO) test -count=1 -timeout 20m ./...
	$(MAKE) fuzz

fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./...

cosign: $(COSIGN)

# Installed from outside this module, so its dependencies stay out of go.mod.
$(COSIGN):
	mkdir -p $(CACHE)/bin
	cd / && GOBIN=$(CACHE)/bin $(GO) install github.com/sigstore/cosign/v2/cmd/cosign@$(COSIGN_VERSION)
	cp $(CACHE)/bin/cosign $@

$(STATICCHECK):
	mkdir -p $(CACHE)/bin
	cd / && GOBIN=$(CACHE)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	cp $(CACHE)/bin/staticcheck $@

lint: $(STATICCHECK)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: run gofmt -w on the files above"; exit 1; }
	$(GO) vet ./...
	$(STATICCHECK) ./...

demo: deps build
	bash examples/demo.sh

clean:
	rm -rf $(BIN)
