package control

// Code below is generated from ecsv1connect.EcsServiceHandler by a one-off script; when
// the interface grows, TestEveryActionAnswersECSError names what to add.

import (
	"context"

	"connectrpc.com/connect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// unsupported answers every ECS action with UnsupportedFeatureException naming it;
// Server's own methods shadow the ones Berth implements.
type unsupported struct {
	ecsv1connect.UnimplementedEcsServiceHandler
}

// notYet returns the error for an action Berth does not implement: the message names it,
// why, and what Berth supports instead (UnsupportedMessage).
func notYet(action string) error {
	return awserr.ToConnect(awserr.New("UnsupportedFeatureException", "%s", UnsupportedMessage(action)))
}

// ContinueServiceDeployment answers UnsupportedFeatureException.
func (unsupported) ContinueServiceDeployment(context.Context, *connect.Request[ecsv1.ContinueServiceDeploymentRequest]) (*connect.Response[ecsv1.ContinueServiceDeploymentResponse], error) {
	return nil, notYet("ContinueServiceDeployment")
}

// CreateCluster answers UnsupportedFeatureException.
func (unsupported) CreateCluster(context.Context, *connect.Request[ecsv1.CreateClusterRequest]) (*connect.Response[ecsv1.CreateClusterResponse], error) {
	return nil, notYet("CreateCluster")
}

// CreateDaemon answers UnsupportedFeatureException.
func (unsupported) CreateDaemon(context.Context, *connect.Request[ecsv1.CreateDaemonRequest]) (*connect.Response[ecsv1.CreateDaemonResponse], error) {
	return nil, notYet("CreateDaemon")
}

// CreateExpressGatewayService answers UnsupportedFeatureException.
func (unsupported) CreateExpressGatewayService(context.Context, *connect.Request[ecsv1.CreateExpressGatewayServiceRequest]) (*connect.Response[ecsv1.CreateExpressGatewayServiceResponse], error) {
	return nil, notYet("CreateExpressGatewayService")
}

// CreateService answers UnsupportedFeatureException.
func (unsupported) CreateService(context.Context, *connect.Request[ecsv1.CreateServiceRequest]) (*connect.Response[ecsv1.CreateServiceResponse], error) {
	return nil, notYet("CreateService")
}

// CreateTaskSet answers UnsupportedFeatureException.
func (unsupported) CreateTaskSet(context.Context, *connect.Request[ecsv1.CreateTaskSetRequest]) (*connect.Response[ecsv1.CreateTaskSetResponse], error) {
	return nil, notYet("CreateTaskSet")
}

// DeleteAccountSetting answers UnsupportedFeatureException.
func (unsupported) DeleteAccountSetting(context.Context, *connect.Request[ecsv1.DeleteAccountSettingRequest]) (*connect.Response[ecsv1.DeleteAccountSettingResponse], error) {
	return nil, notYet("DeleteAccountSetting")
}

// DeleteAttributes answers UnsupportedFeatureException.
func (unsupported) DeleteAttributes(context.Context, *connect.Request[ecsv1.DeleteAttributesRequest]) (*connect.Response[ecsv1.DeleteAttributesResponse], error) {
	return nil, notYet("DeleteAttributes")
}

// DeleteCluster answers UnsupportedFeatureException.
func (unsupported) DeleteCluster(context.Context, *connect.Request[ecsv1.DeleteClusterRequest]) (*connect.Response[ecsv1.DeleteClusterResponse], error) {
	return nil, notYet("DeleteCluster")
}

// DeleteDaemon answers UnsupportedFeatureException.
func (unsupported) DeleteDaemon(context.Context, *connect.Request[ecsv1.DeleteDaemonRequest]) (*connect.Response[ecsv1.DeleteDaemonResponse], error) {
	return nil, notYet("DeleteDaemon")
}

// DeleteDaemonTaskDefinition answers UnsupportedFeatureException.
func (unsupported) DeleteDaemonTaskDefinition(context.Context, *connect.Request[ecsv1.DeleteDaemonTaskDefinitionRequest]) (*connect.Response[ecsv1.DeleteDaemonTaskDefinitionResponse], error) {
	return nil, notYet("DeleteDaemonTaskDefinition")
}

// DeleteExpressGatewayService answers UnsupportedFeatureException.
func (unsupported) DeleteExpressGatewayService(context.Context, *connect.Request[ecsv1.DeleteExpressGatewayServiceRequest]) (*connect.Response[ecsv1.DeleteExpressGatewayServiceResponse], error) {
	return nil, notYet("DeleteExpressGatewayService")
}

// DeleteService answers UnsupportedFeatureException.
func (unsupported) DeleteService(context.Context, *connect.Request[ecsv1.DeleteServiceRequest]) (*connect.Response[ecsv1.DeleteServiceResponse], error) {
	return nil, notYet("DeleteService")
}

// DeleteTaskDefinitions answers UnsupportedFeatureException.
func (unsupported) DeleteTaskDefinitions(context.Context, *connect.Request[ecsv1.DeleteTaskDefinitionsRequest]) (*connect.Response[ecsv1.DeleteTaskDefinitionsResponse], error) {
	return nil, notYet("DeleteTaskDefinitions")
}

// DeleteTaskSet answers UnsupportedFeatureException.
func (unsupported) DeleteTaskSet(context.Context, *connect.Request[ecsv1.DeleteTaskSetRequest]) (*connect.Response[ecsv1.DeleteTaskSetResponse], error) {
	return nil, notYet("DeleteTaskSet")
}

// DeregisterContainerInstance answers UnsupportedFeatureException.
func (unsupported) DeregisterContainerInstance(context.Context, *connect.Request[ecsv1.DeregisterContainerInstanceRequest]) (*connect.Response[ecsv1.DeregisterContainerInstanceResponse], error) {
	return nil, notYet("DeregisterContainerInstance")
}

// DeregisterTaskDefinition answers UnsupportedFeatureException.
func (unsupported) DeregisterTaskDefinition(context.Context, *connect.Request[ecsv1.DeregisterTaskDefinitionRequest]) (*connect.Response[ecsv1.DeregisterTaskDefinitionResponse], error) {
	return nil, notYet("DeregisterTaskDefinition")
}

// DescribeClusters answers UnsupportedFeatureException.
func (unsupported) DescribeClusters(context.Context, *connect.Request[ecsv1.DescribeClustersRequest]) (*connect.Response[ecsv1.DescribeClustersResponse], error) {
	return nil, notYet("DescribeClusters")
}

// DescribeContainerInstances answers UnsupportedFeatureException.
func (unsupported) DescribeContainerInstances(context.Context, *connect.Request[ecsv1.DescribeContainerInstancesRequest]) (*connect.Response[ecsv1.DescribeContainerInstancesResponse], error) {
	return nil, notYet("DescribeContainerInstances")
}

// DescribeDaemon answers UnsupportedFeatureException.
func (unsupported) DescribeDaemon(context.Context, *connect.Request[ecsv1.DescribeDaemonRequest]) (*connect.Response[ecsv1.DescribeDaemonResponse], error) {
	return nil, notYet("DescribeDaemon")
}

// DescribeDaemonDeployments answers UnsupportedFeatureException.
func (unsupported) DescribeDaemonDeployments(context.Context, *connect.Request[ecsv1.DescribeDaemonDeploymentsRequest]) (*connect.Response[ecsv1.DescribeDaemonDeploymentsResponse], error) {
	return nil, notYet("DescribeDaemonDeployments")
}

// DescribeDaemonRevisions answers UnsupportedFeatureException.
func (unsupported) DescribeDaemonRevisions(context.Context, *connect.Request[ecsv1.DescribeDaemonRevisionsRequest]) (*connect.Response[ecsv1.DescribeDaemonRevisionsResponse], error) {
	return nil, notYet("DescribeDaemonRevisions")
}

// DescribeDaemonTaskDefinition answers UnsupportedFeatureException.
func (unsupported) DescribeDaemonTaskDefinition(context.Context, *connect.Request[ecsv1.DescribeDaemonTaskDefinitionRequest]) (*connect.Response[ecsv1.DescribeDaemonTaskDefinitionResponse], error) {
	return nil, notYet("DescribeDaemonTaskDefinition")
}

// DescribeExpressGatewayService answers UnsupportedFeatureException.
func (unsupported) DescribeExpressGatewayService(context.Context, *connect.Request[ecsv1.DescribeExpressGatewayServiceRequest]) (*connect.Response[ecsv1.DescribeExpressGatewayServiceResponse], error) {
	return nil, notYet("DescribeExpressGatewayService")
}

// DescribeServiceDeployments answers UnsupportedFeatureException.
func (unsupported) DescribeServiceDeployments(context.Context, *connect.Request[ecsv1.DescribeServiceDeploymentsRequest]) (*connect.Response[ecsv1.DescribeServiceDeploymentsResponse], error) {
	return nil, notYet("DescribeServiceDeployments")
}

// DescribeServiceRevisions answers UnsupportedFeatureException.
func (unsupported) DescribeServiceRevisions(context.Context, *connect.Request[ecsv1.DescribeServiceRevisionsRequest]) (*connect.Response[ecsv1.DescribeServiceRevisionsResponse], error) {
	return nil, notYet("DescribeServiceRevisions")
}

// DescribeServices answers UnsupportedFeatureException.
func (unsupported) DescribeServices(context.Context, *connect.Request[ecsv1.DescribeServicesRequest]) (*connect.Response[ecsv1.DescribeServicesResponse], error) {
	return nil, notYet("DescribeServices")
}

// DescribeTaskDefinition answers UnsupportedFeatureException.
func (unsupported) DescribeTaskDefinition(context.Context, *connect.Request[ecsv1.DescribeTaskDefinitionRequest]) (*connect.Response[ecsv1.DescribeTaskDefinitionResponse], error) {
	return nil, notYet("DescribeTaskDefinition")
}

// DescribeTaskSets answers UnsupportedFeatureException.
func (unsupported) DescribeTaskSets(context.Context, *connect.Request[ecsv1.DescribeTaskSetsRequest]) (*connect.Response[ecsv1.DescribeTaskSetsResponse], error) {
	return nil, notYet("DescribeTaskSets")
}

// DescribeTasks answers UnsupportedFeatureException.
func (unsupported) DescribeTasks(context.Context, *connect.Request[ecsv1.DescribeTasksRequest]) (*connect.Response[ecsv1.DescribeTasksResponse], error) {
	return nil, notYet("DescribeTasks")
}

// DiscoverPollEndpoint answers UnsupportedFeatureException.
func (unsupported) DiscoverPollEndpoint(context.Context, *connect.Request[ecsv1.DiscoverPollEndpointRequest]) (*connect.Response[ecsv1.DiscoverPollEndpointResponse], error) {
	return nil, notYet("DiscoverPollEndpoint")
}

// ExecuteCommand answers UnsupportedFeatureException.
func (unsupported) ExecuteCommand(context.Context, *connect.Request[ecsv1.ExecuteCommandRequest]) (*connect.Response[ecsv1.ExecuteCommandResponse], error) {
	return nil, notYet("ExecuteCommand")
}

// ListAccountSettings answers UnsupportedFeatureException.
func (unsupported) ListAccountSettings(context.Context, *connect.Request[ecsv1.ListAccountSettingsRequest]) (*connect.Response[ecsv1.ListAccountSettingsResponse], error) {
	return nil, notYet("ListAccountSettings")
}

// ListAttributes answers UnsupportedFeatureException.
func (unsupported) ListAttributes(context.Context, *connect.Request[ecsv1.ListAttributesRequest]) (*connect.Response[ecsv1.ListAttributesResponse], error) {
	return nil, notYet("ListAttributes")
}

// ListClusters answers UnsupportedFeatureException.
func (unsupported) ListClusters(context.Context, *connect.Request[ecsv1.ListClustersRequest]) (*connect.Response[ecsv1.ListClustersResponse], error) {
	return nil, notYet("ListClusters")
}

// ListContainerInstances answers UnsupportedFeatureException.
func (unsupported) ListContainerInstances(context.Context, *connect.Request[ecsv1.ListContainerInstancesRequest]) (*connect.Response[ecsv1.ListContainerInstancesResponse], error) {
	return nil, notYet("ListContainerInstances")
}

// ListDaemonDeployments answers UnsupportedFeatureException.
func (unsupported) ListDaemonDeployments(context.Context, *connect.Request[ecsv1.ListDaemonDeploymentsRequest]) (*connect.Response[ecsv1.ListDaemonDeploymentsResponse], error) {
	return nil, notYet("ListDaemonDeployments")
}

// ListDaemonTaskDefinitions answers UnsupportedFeatureException.
func (unsupported) ListDaemonTaskDefinitions(context.Context, *connect.Request[ecsv1.ListDaemonTaskDefinitionsRequest]) (*connect.Response[ecsv1.ListDaemonTaskDefinitionsResponse], error) {
	return nil, notYet("ListDaemonTaskDefinitions")
}

// ListDaemons answers UnsupportedFeatureException.
func (unsupported) ListDaemons(context.Context, *connect.Request[ecsv1.ListDaemonsRequest]) (*connect.Response[ecsv1.ListDaemonsResponse], error) {
	return nil, notYet("ListDaemons")
}

// ListServiceDeployments answers UnsupportedFeatureException.
func (unsupported) ListServiceDeployments(context.Context, *connect.Request[ecsv1.ListServiceDeploymentsRequest]) (*connect.Response[ecsv1.ListServiceDeploymentsResponse], error) {
	return nil, notYet("ListServiceDeployments")
}

// ListServices answers UnsupportedFeatureException.
func (unsupported) ListServices(context.Context, *connect.Request[ecsv1.ListServicesRequest]) (*connect.Response[ecsv1.ListServicesResponse], error) {
	return nil, notYet("ListServices")
}

// ListServicesByNamespace answers UnsupportedFeatureException.
func (unsupported) ListServicesByNamespace(context.Context, *connect.Request[ecsv1.ListServicesByNamespaceRequest]) (*connect.Response[ecsv1.ListServicesByNamespaceResponse], error) {
	return nil, notYet("ListServicesByNamespace")
}

// ListTagsForResource answers UnsupportedFeatureException.
func (unsupported) ListTagsForResource(context.Context, *connect.Request[ecsv1.ListTagsForResourceRequest]) (*connect.Response[ecsv1.ListTagsForResourceResponse], error) {
	return nil, notYet("ListTagsForResource")
}

// ListTaskDefinitionFamilies answers UnsupportedFeatureException.
func (unsupported) ListTaskDefinitionFamilies(context.Context, *connect.Request[ecsv1.ListTaskDefinitionFamiliesRequest]) (*connect.Response[ecsv1.ListTaskDefinitionFamiliesResponse], error) {
	return nil, notYet("ListTaskDefinitionFamilies")
}

// ListTaskDefinitions answers UnsupportedFeatureException.
func (unsupported) ListTaskDefinitions(context.Context, *connect.Request[ecsv1.ListTaskDefinitionsRequest]) (*connect.Response[ecsv1.ListTaskDefinitionsResponse], error) {
	return nil, notYet("ListTaskDefinitions")
}

// ListTasks answers UnsupportedFeatureException.
func (unsupported) ListTasks(context.Context, *connect.Request[ecsv1.ListTasksRequest]) (*connect.Response[ecsv1.ListTasksResponse], error) {
	return nil, notYet("ListTasks")
}

// PutAccountSetting answers UnsupportedFeatureException.
func (unsupported) PutAccountSetting(context.Context, *connect.Request[ecsv1.PutAccountSettingRequest]) (*connect.Response[ecsv1.PutAccountSettingResponse], error) {
	return nil, notYet("PutAccountSetting")
}

// PutAccountSettingDefault answers UnsupportedFeatureException.
func (unsupported) PutAccountSettingDefault(context.Context, *connect.Request[ecsv1.PutAccountSettingDefaultRequest]) (*connect.Response[ecsv1.PutAccountSettingDefaultResponse], error) {
	return nil, notYet("PutAccountSettingDefault")
}

// PutAttributes answers UnsupportedFeatureException.
func (unsupported) PutAttributes(context.Context, *connect.Request[ecsv1.PutAttributesRequest]) (*connect.Response[ecsv1.PutAttributesResponse], error) {
	return nil, notYet("PutAttributes")
}

// RegisterContainerInstance answers UnsupportedFeatureException.
func (unsupported) RegisterContainerInstance(context.Context, *connect.Request[ecsv1.RegisterContainerInstanceRequest]) (*connect.Response[ecsv1.RegisterContainerInstanceResponse], error) {
	return nil, notYet("RegisterContainerInstance")
}

// RegisterDaemonTaskDefinition answers UnsupportedFeatureException.
func (unsupported) RegisterDaemonTaskDefinition(context.Context, *connect.Request[ecsv1.RegisterDaemonTaskDefinitionRequest]) (*connect.Response[ecsv1.RegisterDaemonTaskDefinitionResponse], error) {
	return nil, notYet("RegisterDaemonTaskDefinition")
}

// RegisterTaskDefinition answers UnsupportedFeatureException.
func (unsupported) RegisterTaskDefinition(context.Context, *connect.Request[ecsv1.RegisterTaskDefinitionRequest]) (*connect.Response[ecsv1.RegisterTaskDefinitionResponse], error) {
	return nil, notYet("RegisterTaskDefinition")
}

// RunTask answers UnsupportedFeatureException.
func (unsupported) RunTask(context.Context, *connect.Request[ecsv1.RunTaskRequest]) (*connect.Response[ecsv1.RunTaskResponse], error) {
	return nil, notYet("RunTask")
}

// StartTask answers UnsupportedFeatureException.
func (unsupported) StartTask(context.Context, *connect.Request[ecsv1.StartTaskRequest]) (*connect.Response[ecsv1.StartTaskResponse], error) {
	return nil, notYet("StartTask")
}

// StopServiceDeployment answers UnsupportedFeatureException.
func (unsupported) StopServiceDeployment(context.Context, *connect.Request[ecsv1.StopServiceDeploymentRequest]) (*connect.Response[ecsv1.StopServiceDeploymentResponse], error) {
	return nil, notYet("StopServiceDeployment")
}

// StopTask answers UnsupportedFeatureException.
func (unsupported) StopTask(context.Context, *connect.Request[ecsv1.StopTaskRequest]) (*connect.Response[ecsv1.StopTaskResponse], error) {
	return nil, notYet("StopTask")
}

// SubmitAttachmentStateChanges answers UnsupportedFeatureException.
func (unsupported) SubmitAttachmentStateChanges(context.Context, *connect.Request[ecsv1.SubmitAttachmentStateChangesRequest]) (*connect.Response[ecsv1.SubmitAttachmentStateChangesResponse], error) {
	return nil, notYet("SubmitAttachmentStateChanges")
}

// SubmitContainerStateChange answers UnsupportedFeatureException.
func (unsupported) SubmitContainerStateChange(context.Context, *connect.Request[ecsv1.SubmitContainerStateChangeRequest]) (*connect.Response[ecsv1.SubmitContainerStateChangeResponse], error) {
	return nil, notYet("SubmitContainerStateChange")
}

// SubmitTaskStateChange answers UnsupportedFeatureException.
func (unsupported) SubmitTaskStateChange(context.Context, *connect.Request[ecsv1.SubmitTaskStateChangeRequest]) (*connect.Response[ecsv1.SubmitTaskStateChangeResponse], error) {
	return nil, notYet("SubmitTaskStateChange")
}

// TagResource answers UnsupportedFeatureException.
func (unsupported) TagResource(context.Context, *connect.Request[ecsv1.TagResourceRequest]) (*connect.Response[ecsv1.TagResourceResponse], error) {
	return nil, notYet("TagResource")
}

// UntagResource answers UnsupportedFeatureException.
func (unsupported) UntagResource(context.Context, *connect.Request[ecsv1.UntagResourceRequest]) (*connect.Response[ecsv1.UntagResourceResponse], error) {
	return nil, notYet("UntagResource")
}

// UpdateCluster answers UnsupportedFeatureException.
func (unsupported) UpdateCluster(context.Context, *connect.Request[ecsv1.UpdateClusterRequest]) (*connect.Response[ecsv1.UpdateClusterResponse], error) {
	return nil, notYet("UpdateCluster")
}

// UpdateClusterSettings answers UnsupportedFeatureException.
func (unsupported) UpdateClusterSettings(context.Context, *connect.Request[ecsv1.UpdateClusterSettingsRequest]) (*connect.Response[ecsv1.UpdateClusterSettingsResponse], error) {
	return nil, notYet("UpdateClusterSettings")
}

// UpdateContainerAgent answers UnsupportedFeatureException.
func (unsupported) UpdateContainerAgent(context.Context, *connect.Request[ecsv1.UpdateContainerAgentRequest]) (*connect.Response[ecsv1.UpdateContainerAgentResponse], error) {
	return nil, notYet("UpdateContainerAgent")
}

// UpdateContainerInstancesState answers UnsupportedFeatureException.
func (unsupported) UpdateContainerInstancesState(context.Context, *connect.Request[ecsv1.UpdateContainerInstancesStateRequest]) (*connect.Response[ecsv1.UpdateContainerInstancesStateResponse], error) {
	return nil, notYet("UpdateContainerInstancesState")
}

// UpdateDaemon answers UnsupportedFeatureException.
func (unsupported) UpdateDaemon(context.Context, *connect.Request[ecsv1.UpdateDaemonRequest]) (*connect.Response[ecsv1.UpdateDaemonResponse], error) {
	return nil, notYet("UpdateDaemon")
}

// UpdateExpressGatewayService answers UnsupportedFeatureException.
func (unsupported) UpdateExpressGatewayService(context.Context, *connect.Request[ecsv1.UpdateExpressGatewayServiceRequest]) (*connect.Response[ecsv1.UpdateExpressGatewayServiceResponse], error) {
	return nil, notYet("UpdateExpressGatewayService")
}

// UpdateService answers UnsupportedFeatureException.
func (unsupported) UpdateService(context.Context, *connect.Request[ecsv1.UpdateServiceRequest]) (*connect.Response[ecsv1.UpdateServiceResponse], error) {
	return nil, notYet("UpdateService")
}

// UpdateServicePrimaryTaskSet answers UnsupportedFeatureException.
func (unsupported) UpdateServicePrimaryTaskSet(context.Context, *connect.Request[ecsv1.UpdateServicePrimaryTaskSetRequest]) (*connect.Response[ecsv1.UpdateServicePrimaryTaskSetResponse], error) {
	return nil, notYet("UpdateServicePrimaryTaskSet")
}

// UpdateTaskSet answers UnsupportedFeatureException.
func (unsupported) UpdateTaskSet(context.Context, *connect.Request[ecsv1.UpdateTaskSetRequest]) (*connect.Response[ecsv1.UpdateTaskSetResponse], error) {
	return nil, notYet("UpdateTaskSet")
}
