module github.com/berthhq/berth/tests/e2e

go 1.26.0
