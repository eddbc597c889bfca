# zkrecipes build entry points.
#
#   make demo   install ZooKeeper if needed, then run the leader-election demo on an embedded server
#   make test   install ZooKeeper and Curator if needed, then go vet and go test -race over the
#               whole module and over the modules of its own (the OpenTelemetry adapter
#               session/zkotel and its Prometheus example, the gRPC resolver
#               recipes/discovery/zkgrpc), then the short chaos run without -race (see
#               internal/testkit/chaos/chaos_test.go)
#   make chaos  install ZooKeeper if needed, then run the chaos run (ROUNDS=200 by default,
#               SEED=<n> to replay a run's fault schedule) and print its report
#
# ZooKeeper comes from Debian: libzookeeper-java (about 40 MB) on a headless JRE. The
# `zookeeper` package is avoided on purpose: it pulls in a desktop JRE of about 600 MB.
# The Curator interoperability tests also need Curator 5.4 (libcurator-recipes-java,
# libcurator-discovery-java) and javac.

SHELL       := /bin/bash
GO          ?= go
GOTESTFLAGS ?= -race -count=1 -timeout 20m
DEMO        ?= ./examples/leader
ROUNDS      ?= 200
SEED        ?= 0
ZK_PKGS     := libzookeeper-java libslf4j-java default-jre-headless
TEST_PKGS   := $(ZK_PKGS) libcurator-recipes-java libcurator-discovery-java default-jdk-headless

.PHONY: all test demo chaos vet fmt ensure-zookeeper ensure-test-deps

all: test

test: ensure-test-deps
	$(GO) vet ./...
	$(GO) test $(GOTESTFLAGS) ./...
	cd session/zkotel && $(GO) vet ./... && $(GO) test $(GOTESTFLAGS) ./...
	cd session/zkotel/examples/prometheus && $(GO) vet ./... && $(GO) test $(GOTESTFLAGS) ./...
	cd recipes/discovery/zkgrpc && $(GO) vet ./... && $(GO) test $(GOTESTFLAGS) ./...
	$(GO) test -count=1 -timeout 10m ./internal/testkit/chaos/

demo: ensure-zookeeper
	$(GO) run $(DEMO)

chaos: ensure-zookeeper
	$(GO) run ./internal/testkit/chaos/cmd/chaos -rounds $(ROUNDS) -seed $(SEED)

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w .

# ensure-zookeeper (for the demo): java, ZooKeeper and an slf4j backend (so the server's own
# errors reach its log). ensure-test-deps (for the tests): also javac and Curator 5.4, which the
# Go-against-Curator interoperability tests compile and run. Each either finds everything,
# installs what is missing (as root on Debian or Ubuntu), or prints the one command to run.
ensure-zookeeper:
	@$(call ensure,$(ZK_PKGS),)

ensure-test-deps:
	@$(call ensure,$(TEST_PKGS),interop)

define ensure
	missing=""; \
	bin="$${JAVA_HOME:+$$JAVA_HOME/bin/}"; \
	command -v "$${bin}java" >/dev/null 2>&1 || missing="$$missing java"; \
	if [ -z "$${ZKTEST_CLASSPATH:-}" ] && [ -z "$${ZOOKEEPER_HOME:-}" ] && [ ! -f /usr/share/java/zookeeper.jar ]; then missing="$$missing zookeeper"; fi; \
	[ -f /usr/share/java/slf4j-simple.jar ] || missing="$$missing slf4j-simple"; \
	if [ -n "$(2)" ]; then \
		command -v "$${bin}javac" >/dev/null 2>&1 || missing="$$missing javac"; \
		[ -f /usr/share/java/curator-recipes.jar ] || missing="$$missing curator"; \
		[ -f /usr/share/java/curator-x-discovery.jar ] || missing="$$missing curator-discovery"; \
	fi; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "zkrecipes: missing:$$missing"; \
	if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then \
		echo "zkrecipes: installing $(1)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q && apt-get install -y -q --no-install-recommends $(1); \
	else \
		echo "zkrecipes: run this once, then try again:"; \
		echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends $(1)"; \
		exit 1; \
	fi
endef
