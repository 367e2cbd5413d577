module github.com/berthhq/berth/cmd/berth

go 1.26.0
