module github.com/berthhq/berth/gen

go 1.26.0

require (
	connectrpc.com/connect v1.20.0
	google.golang.org/protobuf v1.36.12
)
