# Berth's build. Tools are pinned in tools/go.mod and built through the Go module proxy
# into .cache/tools; nothing is fetched from anywhere else.

SHELL := /bin/bash
TOOLS := $(CURDIR)/.cache/tools
BUF := $(TOOLS)/buf
# Every package of every module in go.work (tools/ is outside the workspace).
PACKAGES := github.com/berthhq/berth/...
# Every module: go.work's, and tools/ outside it.
MODULES := $(shell sed -n 's/^[[:space:]]*\.\/\(.*\)$$/\1/p' go.work) tools
GO_TEST_FLAGS ?= -count=1 -timeout 40m -parallel 4
export CGO_ENABLED ?= 0

.PHONY: all deps tools generate checkgenerate tidy lint breaking test unit build run bench release clean

all: build

## deps: install what this machine lacks for `make test` (`make run` asks only for its own
## part: containerd, runc, the CNI plugins, iptables, tini) with apt-get when run as root;
## otherwise, or with BERTH_NO_INSTALL=1, print one line per missing piece naming the
## command that installs it, and fail. Nothing missing: nothing done (tools/deps.sh).
DEPS ?= test
deps:
	@bash tools/deps.sh $(DEPS)

tools: $(BUF)

$(BUF): tools/go.mod tools/go.sum
	cd tools && GOWORK=off go build -o $(TOOLS)/ tool
	@touch $(BUF)

## generate: regenerate proto/berth/<svc>/v1 from each AWS model in api/ (one awsgen line
## per service the gateway serves), then gen/ from proto/.
generate: tools
	cd tools && GOWORK=off go run ./awsgen -model ../api/ecs/ecs-2014-11-13.json -out ../proto/berth/ecs/v1
	cd tools && GOWORK=off go run ./awsgen -model ../api/secretsmanager/secretsmanager-2017-10-17.json -out ../proto/berth/secretsmanager/v1 -package berth.secretsmanager.v1 -service SecretsManagerService -title "Secrets Manager"
	cd tools && GOWORK=off go run ./awsgen -model ../api/ssm/ssm-2014-11-06.json -out ../proto/berth/ssm/v1 -package berth.ssm.v1 -service SsmService -title SSM
	cd tools && GOWORK=off go run ./awsgen -model ../api/sts/sts-2011-06-15.json -out ../proto/berth/sts/v1 -package berth.sts.v1 -service StsService -title STS
	cd tools && GOWORK=off go run ./awsgen -model ../api/logs/logs-2014-03-28.json -out ../proto/berth/logs/v1 -package berth.logs.v1 -service LogsService -title "CloudWatch Logs"
	cd tools && GOWORK=off go run ./awsgen -model ../api/elbv2/elbv2-2015-12-01.json -out ../proto/berth/elbv2/v1 -package berth.elbv2.v1 -service Elbv2Service -title "Elastic Load Balancing v2"
	cd tools && GOWORK=off go run ./awsgen -model ../api/servicediscovery/servicediscovery-2017-03-14.json -out ../proto/berth/servicediscovery/v1 -package berth.servicediscovery.v1 -service ServicediscoveryService -title "Cloud Map"
	cd tools && GOWORK=off go run ./awsgen -model ../api/ecr/ecr-2015-09-21.json -out ../proto/berth/ecr/v1 -package berth.ecr.v1 -service EcrService -title ECR
	cd tools && GOWORK=off go run ./awsgen -model ../api/application-autoscaling/application-autoscaling-2016-02-06.json -out ../proto/berth/applicationautoscaling/v1 -package berth.applicationautoscaling.v1 -service ApplicationAutoScalingService -title "Application Auto Scaling"
	cd tools && GOWORK=off go run ./awsgen -model ../api/events/events-2015-10-07.json -out ../proto/berth/events/v1 -package berth.events.v1 -service EventsService -title EventBridge
	cd tools && GOWORK=off go run ./awsgen -model ../api/cloudwatch/cloudwatch-2010-08-01.json -out ../proto/berth/cloudwatch/v1 -package berth.cloudwatch.v1 -service CloudwatchService -title CloudWatch -box-scalars
	$(BUF) format -w
	rm -rf gen/berth
	PATH="$(TOOLS):$$PATH" $(BUF) generate

## checkgenerate: fail when `make generate` changes anything under proto/ or gen/.
checkgenerate: generate
	@if [ -n "$$(git status --porcelain -- proto gen)" ]; then \
		echo "make generate changed proto/ or gen/; commit the result:"; \
		git status --porcelain -- proto gen; git diff --stat -- proto gen; exit 1; fi

## lint: buf lint, buf format check, go vet, gofmt, the generate drift check,
## `go mod tidy -diff` for every module (each builds on its own with GOWORK=off), and
## buf breaking against the commit before HEAD.
lint: checkgenerate tidy breaking
	$(BUF) lint
	$(BUF) format --diff --exit-code
	go vet $(PACKAGES)
	cd tools && GOWORK=off go vet ./awsgen
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

## tidy: fail when `go mod tidy` would change a module's go.mod or go.sum.
tidy:
	@for m in $(MODULES); do \
		(cd $$m && GOWORK=off go mod tidy -diff) || { echo "go mod tidy changes $$m: run it there and commit"; exit 1; }; \
	done

## breaking: buf breaking (WIRE_JSON, buf.yaml) of proto/ against BREAKING_AGAINST: by
## default the commit before HEAD, so lint checks each landing's last step; before you
## commit, `make breaking BREAKING_AGAINST='.git#branch=main'` checks all of your change.
## A checkout without that commit (a shallow clone) says so and checks nothing.
BREAKING_AGAINST ?= .git\#ref=HEAD~1
breaking: tools
	@if [ "$(BREAKING_AGAINST)" = '.git#ref=HEAD~1' ] && ! git rev-parse -q --verify HEAD~1 >/dev/null; then \
		echo "breaking: no commit before HEAD in this checkout (shallow?); wire compatibility not checked"; \
	else $(BUF) breaking --against '$(BREAKING_AGAINST)'; fi

## test: install what the machine lacks (deps), then every check and every test, as CI
## runs it.
test: deps lint unit

unit: deps build
	go test $(GO_TEST_FLAGS) $(PACKAGES)

## build: static binaries into bin/: the all-in-one berth, and berth-agent and
## berth-gateway, which link only their role (cmd/berth's deps test checks it).
build:
	go build -trimpath -o bin/berth ./cmd/berth
	go build -trimpath -o bin/berth-agent ./cmd/berth/berth-agent
	go build -trimpath -o bin/berth-gateway ./cmd/berth/berth-gateway
	go build -trimpath -o bin/berth-testimage ./testkit/testimage/cmd/berth-testimage

## release: static binaries (CGO off, no PT_INTERP) of each RELEASE_BINARIES for linux on
## each RELEASE_ARCHES into DIST as <name>-linux-<arch>, and DIST/SHA256SUMS. VERSION (default
## `git describe`) and COMMIT are stamped into pkg/buildinfo (`berth version`, the console,
## berth_build_info in /metrics). Reproducible: -trimpath, -buildvcs=false, an empty build
## id, and no network (GOPROXY=off; the modules come from the module cache, which
## `go mod download` fills). The same commit, VERSION and Go give the same bytes.
DIST ?= dist
RELEASE_ARCHES ?= amd64 arm64
RELEASE_BINARIES ?= berth berth-agent berth-gateway
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
RELEASE_GOPROXY ?= off
BUILDINFO := github.com/berthhq/berth/pkg/buildinfo
release:
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; for arch in $(RELEASE_ARCHES); do for b in $(RELEASE_BINARIES); do \
		case $$b in berth) pkg=./cmd/berth;; *) pkg=./cmd/berth/$$b;; esac; \
		echo "release: $(DIST)/$$b-linux-$$arch ($(VERSION))"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch GOPROXY=$(RELEASE_GOPROXY) GOFLAGS=-mod=readonly \
			go build -trimpath -buildvcs=false \
			-ldflags "-s -w -buildid= -X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Commit=$(COMMIT)" \
			-o $(DIST)/$$b-linux-$$arch $$pkg; \
	done; done
	cd $(DIST) && sha256sum $(foreach a,$(RELEASE_ARCHES),$(foreach b,$(RELEASE_BINARIES),$(b)-linux-$(a))) > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

## run: install what the machine lacks to run tasks (deps), build and run `berth dev` in
## the foreground.
run: DEPS = run
run: deps build
	./bin/berth dev

## bench: one run of the figures users compare, printed as a table and written to
## bench/results.json (tests/e2e/bench; needs root, containerd and runc; under 10 minutes).
bench:
	go run ./tests/e2e/bench -out bench/results.json

clean:
	rm -rf bin .cache $(DIST)
