// Package e2e holds Berth's end-to-end tests over real processes and containers: the
// docker-compose stack (deploy/compose.yaml) driven with the AWS CLI. The `make bench`
// program lives in ./bench.
package e2e
