module github.com/berthhq/berth/testkit

go 1.26.0
