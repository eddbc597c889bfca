# zkrecipes build entry points.
#
#   make demo   install ZooKeeper if needed, then run the leader-election demo on an embedded server
#   make test   install ZooKeeper if needed, then go vet and go test -race over the whole module
#
# ZooKeeper comes from Debian: libzookeeper-java (about 40 MB) on a headless JRE. The
# `zookeeper` package is avoided on purpose: it pulls in a desktop JRE of about 600 MB.
# The Curator interoperability tests also need Curator 5.4 (libcurator-recipes-java) and javac.

SHELL       := /bin/bash
GO          ?= go
GOTESTFLAGS ?= -race -timeout 20m
DEMO        ?= ./examples/leader
APT_PKGS    := libzookeeper-java libslf4j-java default-jre-headless libcurator-recipes-java default-jdk-headless

.PHONY: all test demo vet ensure-zookeeper fmt

all: test

test: ensure-zookeeper
	$(GO) vet ./...
	$(GO) test $(GOTESTFLAGS) ./...

demo: ensure-zookeeper
	$(GO) run $(DEMO)

vet:
	$(GO) vet ./...

fmt:
	gofmt -l -w .

# ensure-zookeeper: succeed when java, javac, ZooKeeper and Curator are present; otherwise
# install them (root on Debian/Ubuntu) or print the one command a person must run.
ensure-zookeeper:
	@missing=""; \
	java="$${JAVA_HOME:+$$JAVA_HOME/bin/}java"; \
	command -v "$$java" >/dev/null 2>&1 || missing="$$missing java"; \
	command -v javac >/dev/null 2>&1 || missing="$$missing javac"; \
	if [ -z "$${ZKTEST_CLASSPATH:-}" ] && [ -z "$${ZOOKEEPER_HOME:-}" ] && [ ! -f /usr/share/java/zookeeper.jar ]; then missing="$$missing zookeeper"; fi; \
	[ -f /usr/share/java/curator-recipes.jar ] || missing="$$missing curator"; \
	[ -f /usr/share/java/slf4j-simple.jar ] || missing="$$missing slf4j-simple"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "zkrecipes: missing:$$missing"; \
	if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then \
		echo "zkrecipes: installing $(APT_PKGS)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -q && apt-get install -y -q --no-install-recommends $(APT_PKGS); \
	else \
		echo "zkrecipes: run this once, then try again:"; \
		echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends $(APT_PKGS)"; \
		exit 1; \
	fi
