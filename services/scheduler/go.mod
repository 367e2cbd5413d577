module github.com/berthhq/berth/services/scheduler

go 1.26.0
