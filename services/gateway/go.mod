module github.com/berthhq/berth/services/gateway

go 1.26.0
