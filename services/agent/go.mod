module github.com/berthhq/berth/services/agent

go 1.26.0

require github.com/berthhq/berth/gen v0.0.0

replace github.com/berthhq/berth/gen => ../../gen
