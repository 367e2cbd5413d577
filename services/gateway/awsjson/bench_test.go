package awsjson_test

import (
	"os"
	"testing"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
)

func BenchmarkUnmarshalRegisterTaskDefinition(b *testing.B) {
	data, err := os.ReadFile("testdata/register_task_definition.request.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var req ecsv1.RegisterTaskDefinitionRequest
		if err := awsjson.Unmarshal(data, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalDescribeContainerInstances(b *testing.B) {
	data, err := os.ReadFile("testdata/describe_container_instances.response.json")
	if err != nil {
		b.Fatal(err)
	}
	var res ecsv1.DescribeContainerInstancesResponse
	if err := awsjson.Unmarshal(data, &res); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := awsjson.Marshal(&res); err != nil {
			b.Fatal(err)
		}
	}
}
