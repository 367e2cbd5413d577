package awsjson_test

import (
	"fmt"
	"os"
	"testing"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"google.golang.org/protobuf/proto"
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

// describeTasks100 is a DescribeTasks answer for 100 running two-container tasks, as the
// scheduler returns them (empty lists left empty, for the encoder to fill in).
func describeTasks100() *ecsv1.DescribeTasksResponse {
	res := &ecsv1.DescribeTasksResponse{}
	for i := 0; i < 100; i++ {
		arn := fmt.Sprintf("arn:aws:ecs:us-east-1:000000000000:task/default/%032x", i)
		task := &ecsv1.Task{
			TaskArn:              proto.String(arn),
			ClusterArn:           proto.String("arn:aws:ecs:us-east-1:000000000000:cluster/default"),
			TaskDefinitionArn:    proto.String("arn:aws:ecs:us-east-1:000000000000:task-definition/web:3"),
			ContainerInstanceArn: proto.String("arn:aws:ecs:us-east-1:000000000000:container-instance/default/0123456789abcdef0123456789abcdef"),
			LastStatus:           proto.String("RUNNING"),
			DesiredStatus:        proto.String("RUNNING"),
			LaunchType:           proto.String("EC2"),
			Cpu:                  proto.String("256"),
			Memory:               proto.String("512"),
			Group:                proto.String("service:web"),
			StartedBy:            proto.String("ecs-svc/1234567890123456789"),
			CreatedAt:            proto.Float64(1700000000.5),
			StartedAt:            proto.Float64(1700000003.25),
			Version:              3,
		}
		for _, name := range []string{"app", "sidecar"} {
			task.Containers = append(task.Containers, &ecsv1.Container{
				ContainerArn: proto.String(arn + "/" + name),
				TaskArn:      proto.String(arn),
				Name:         proto.String(name),
				Image:        proto.String("127.0.0.1:5000/web:latest"),
				LastStatus:   proto.String("RUNNING"),
				Cpu:          proto.String("128"),
				RuntimeId:    proto.String(fmt.Sprintf("%032x-%s", i, name)),
			})
		}
		res.Tasks = append(res.Tasks, task)
	}
	return res
}

func describeTaskDefinition() *ecsv1.DescribeTaskDefinitionResponse {
	td := &ecsv1.TaskDefinition{
		TaskDefinitionArn: proto.String("arn:aws:ecs:us-east-1:000000000000:task-definition/web:3"),
		Family:            proto.String("web"),
		Revision:          3,
		Status:            proto.String("ACTIVE"),
		NetworkMode:       proto.String("bridge"),
		RegisteredAt:      proto.Float64(1700000000.5),
		RegisteredBy:      proto.String("arn:aws:iam::000000000000:root"),
		Compatibilities:   []string{"EC2", "EXTERNAL"},
	}
	for _, name := range []string{"app", "sidecar"} {
		td.ContainerDefinitions = append(td.ContainerDefinitions, &ecsv1.ContainerDefinition{
			Name:    proto.String(name),
			Image:   proto.String("127.0.0.1:5000/web:latest"),
			Cpu:     128,
			Memory:  proto.Int32(256),
			Command: []string{"serve", "--port", "8080"},
		})
	}
	return &ecsv1.DescribeTaskDefinitionResponse{TaskDefinition: td}
}

// BenchmarkMarshalShapes encodes DescribeTasks(100) and DescribeTaskDefinition answers
// with the Defaults table off (the encoder as it was before the table) and on, in one run.
func BenchmarkMarshalShapes(b *testing.B) {
	for _, bc := range []struct {
		name string
		msg  proto.Message
	}{
		{"DescribeTasks100", describeTasks100()},
		{"DescribeTaskDefinition", describeTaskDefinition()},
	} {
		for _, mode := range []struct {
			name string
			off  bool
		}{{"before", true}, {"after", false}} {
			b.Run(bc.name+"/"+mode.name, func(b *testing.B) {
				awsjson.SetDefaultsOff(mode.off)
				defer awsjson.SetDefaultsOff(false)
				body, _ := awsjson.Marshal(bc.msg)
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := awsjson.Marshal(bc.msg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkUnmarshalDescribeTasks100 decodes a DescribeTasks request naming 100 task ARNs,
// the request of the gateway's 200 requests/s bench row.
func BenchmarkUnmarshalDescribeTasks100(b *testing.B) {
	data := []byte(`{"cluster":"default","tasks":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			data = append(data, ',')
		}
		data = fmt.Appendf(data, `"arn:aws:ecs:us-east-1:000000000000:task/default/%032x"`, i)
	}
	data = append(data, "]}"...)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var req ecsv1.DescribeTasksRequest
		if err := awsjson.Unmarshal(data, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalPooled encodes a DescribeTasks(100) answer with Marshal (a new
// exact-size slice per call) and with MarshalPooled (the pooled buffer, released after
// use, as the gateway writes it), in one run.
func BenchmarkMarshalPooled(b *testing.B) {
	res := describeTasks100()
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := awsjson.Marshal(res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("MarshalPooled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, release := awsjson.MarshalPooled(res)
			release()
		}
	})
}

// BenchmarkMarshalWire encodes a DescribeTasks(100) answer as the gateway receives it from
// the scheduler (protobuf bytes): decoded with proto.Unmarshal and then MarshalPooled (the
// gateway before MarshalWirePooled), and with MarshalWirePooled, in one run.
func BenchmarkMarshalWire(b *testing.B) {
	wire, err := proto.Marshal(describeTasks100())
	if err != nil {
		b.Fatal(err)
	}
	mt := (&ecsv1.DescribeTasksResponse{}).ProtoReflect().Type()
	b.Run("Unmarshal+MarshalPooled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := mt.New().Interface()
			if err := proto.Unmarshal(wire, m); err != nil {
				b.Fatal(err)
			}
			_, release := awsjson.MarshalPooled(m)
			release()
		}
	})
	b.Run("MarshalWirePooled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, release, err := awsjson.MarshalWirePooled(mt, wire)
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
	})
}
