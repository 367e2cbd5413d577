package awsjson_test

import (
	"fmt"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/gateway/awsjson"
	"google.golang.org/protobuf/proto"
)

func ExampleUnmarshal() {
	var req ecsv1.ListTasksRequest
	err := awsjson.Unmarshal([]byte(`{"cluster":"default","maxResults":"10"}`), &req)
	fmt.Println(err)
	err = awsjson.Unmarshal([]byte(`{"cluster":"default","desiredStatus":"SLEEPING"}`), &req)
	fmt.Println(err)
	// Output:
	// SerializationException: STRING_VALUE can not be converted to an Integer (at 'maxResults').
	// InvalidParameterException: 1 validation error detected: Value 'SLEEPING' at 'desiredStatus' failed to satisfy constraint: Member must satisfy enum value set: [RUNNING, PENDING, STOPPED]
}

func ExampleMarshal() {
	body, _ := awsjson.Marshal(&ecsv1.DescribeClustersResponse{
		Clusters: []*ecsv1.Cluster{{ClusterName: proto.String("default"), Status: proto.String("ACTIVE")}},
	})
	fmt.Println(string(body))
	// Output:
	// {"clusters":[{"activeServicesCount":0,"capacityProviders":[],"clusterName":"default","defaultCapacityProviderStrategy":[],"pendingTasksCount":0,"registeredContainerInstancesCount":0,"runningTasksCount":0,"statistics":[],"status":"ACTIVE"}],"failures":[]}
}
