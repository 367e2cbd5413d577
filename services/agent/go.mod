module github.com/berthhq/berth/services/agent

go 1.26.0
