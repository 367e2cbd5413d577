module github.com/berthhq/berth/gen

go 1.26.0
