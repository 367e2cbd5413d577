module github.com/berthhq/berth/services/gateway

go 1.26.0

require (
	connectrpc.com/connect v1.20.0
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/berthhq/berth/gen v0.0.0
	golang.org/x/time v0.15.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/ecs v1.105.1 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
)

replace github.com/berthhq/berth/gen => ../../gen
