module github.com/berthhq/berth/tools

go 1.26.0
