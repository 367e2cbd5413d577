package control

import (
	"sort"
	"strings"
)

// OperationStatus says how Berth serves one ECS operation.
type OperationStatus string

// The statuses of docs/ecs-operations.md.
const (
	// Real: served with AWS's semantics (what it does is observable and as AWS documents).
	Real OperationStatus = "real"
	// Stub: answers with AWS's shapes but does not do what AWS does yet (for instance,
	// stores a setting nothing reads).
	Stub OperationStatus = "stub"
	// Unsupported: answers UnsupportedFeatureException naming the operation, why, and what
	// Berth supports instead.
	Unsupported OperationStatus = "unsupported"
)

// OperationRule is Berth's answer for one ECS operation.
type OperationRule struct {
	// Status is how the operation is served.
	Status OperationStatus
	// Why explains a stub or an unsupported operation (it is the UnsupportedFeatureException
	// message's reason), or notes a limit of a real one; may be empty for a real one.
	Why string
	// Instead says, for an unsupported operation, what Berth supports in its place; it ends
	// the error message.
	Instead string
}

// Shared reasons.
const (
	// The managed daemons' notes (ecs/daemon).
	noteDaemon   = "A daemon runs one task on every ACTIVE container instance of its capacity providers (Berth's capacity provider pools; each must be associated with the cluster, FARGATE is refused), reconciled by the service reconciler: new hosts get one, a stopped one is replaced, a draining host keeps it until its other tasks have stopped. deploymentConfiguration.alarms and enableExecuteCommand are refused (no CloudWatch alarms, no ECS Exec). "
	noteDeploy   = "Deployments replace drainPercent of the hosts at a time (at least one; 25% by default), are SUCCESSFUL bakeTimeInMinutes after every host runs the new revision, and roll back (circuit breaker on failed tasks) to the last successful revision."
	noteDaemonTD = "A family namespace of its own; held to RegisterTaskDefinition's rules and field table (a member Berth cannot honour is refused by name); daemon tasks use the host's network."
	whyExpress   = "Express gateway services need an HTTPS Application Load Balancer with a managed certificate and Application Auto Scaling; Berth's load balancers serve HTTP and TCP listeners without certificates, and Berth has no Application Auto Scaling"
	insExpress   = "run the image with CreateService behind a Berth Application Load Balancer (loadBalancers with an ELBv2 target group) or publish its port with a portMapping on the host."
)

// Operations is the one table of how Berth serves each of the ECS model's operations,
// keyed by operation name. docs/ecs-operations.md is rendered from it (and from what the
// served API answers; TestOperationTable in services/scheduler/app keeps the three in
// step), the e2e probe counts it, and an unsupported operation's error message is built
// from it (UnsupportedMessage).
var Operations = map[string]OperationRule{
	"ContinueServiceDeployment":     {Real, "Acts on a PAUSE lifecycle hook of a BLUE_GREEN, LINEAR or CANARY deployment (hookId from DescribeServiceDeployments' lifecycleHookDetails): CONTINUE goes on to the next stage or traffic step, ROLLBACK moves all traffic back to the source revision and stops the new one's tasks (docs/deployments.md).", ""},
	"CreateCapacityProvider":        {Real, "A capacity provider is a named pool of container instances (attribute berth.capacity-provider); Berth launches no instances, so managedScaling and managedTerminationProtection ENABLED are refused (docs/capacity-providers.md).", ""},
	"CreateCluster":                 {Real, "settings containerInsights disabled only (no Container Insights metrics yet); configuration.executeCommandConfiguration logging DEFAULT or NONE only (no session logging to CloudWatch Logs or S3 yet); a managedStorageConfiguration KMS key (no KMS) and a serviceConnectDefaults namespace (no Service Connect) are refused, naming the member.", ""},
	"CreateDaemon":                  {Real, noteDaemon + noteDeploy, ""},
	"CreateExpressGatewayService":   {Unsupported, whyExpress, insExpress},
	"CreateService":                 {Real, "REPLICA and DAEMON; deploymentController ECS (deploymentConfiguration.strategy ROLLING, or BLUE_GREEN, LINEAR and CANARY with traffic shifting on Berth's load balancers, docs/deployments.md) or EXTERNAL (task sets).", ""},
	"CreateTaskSet":                 {Real, "Task sets of services under the EXTERNAL deployment controller, placed and reconciled like deployments; each takes its own networkConfiguration (awsvpc), loadBalancers (its tasks register with the target groups) and serviceRegistries (Cloud Map). capacityProviderStrategy, platformVersion and clientToken are refused.", ""},
	"DeleteAccountSetting":          {Real, "", ""},
	"DeleteAttributes":              {Real, "", ""},
	"DeleteCapacityProvider":        {Real, "", ""},
	"DeleteCluster":                 {Real, "", ""},
	"DeleteDaemon":                  {Real, "DELETE_IN_PROGRESS while the daemon's tasks stop; its records go once none is left.", ""},
	"DeleteDaemonTaskDefinition":    {Real, "DELETE_IN_PROGRESS while a daemon still deploys the revision, else DELETED.", ""},
	"DeleteExpressGatewayService":   {Unsupported, whyExpress, insExpress},
	"DeleteService":                 {Real, "", ""},
	"DeleteTaskDefinitions":         {Real, "", ""},
	"DeleteTaskSet":                 {Real, "", ""},
	"DeregisterContainerInstance":   {Real, "", ""},
	"DeregisterTaskDefinition":      {Real, "", ""},
	"DescribeCapacityProviders":     {Real, "FARGATE and FARGATE_SPOT are built in and map onto the Fargate pool (every host without berth.fargate=false).", ""},
	"DescribeClusters":              {Real, "", ""},
	"DescribeContainerInstances":    {Real, "", ""},
	"DescribeDaemon":                {Real, "currentRevisions counts RUNNING tasks per revision and capacity provider.", ""},
	"DescribeDaemonDeployments":     {Real, noteDeploy, ""},
	"DescribeDaemonRevisions":       {Real, "containerImages carry no imageDigest (Berth does not resolve digests at deployment).", ""},
	"DescribeDaemonTaskDefinition":  {Real, noteDaemonTD, ""},
	"DescribeExpressGatewayService": {Unsupported, whyExpress, insExpress},
	"DescribeServiceDeployments":    {Real, "", ""},
	"DescribeServiceRevisions":      {Real, "", ""},
	"DescribeServices":              {Real, "", ""},
	"DescribeTaskDefinition":        {Real, "", ""},
	"DescribeTaskSets":              {Real, "", ""},
	"DescribeTasks":                 {Real, "", ""},
	"DiscoverPollEndpoint":          {Real, "Answers the gateway the caller came through, which relays agent sessions.", ""},
	"ExecuteCommand":                {Real, "Interactive sessions (AWS's only mode) through AWS's session-manager-plugin: the streamUrl is the gateway's /v1/data-channel, the agent runs the command in the container with a terminal (docs/exec.md); no session logging to CloudWatch Logs or S3 yet.", ""},
	"GetTaskProtection":             {Real, "", ""},
	"ListAccountSettings":           {Real, "", ""},
	"ListAttributes":                {Real, "", ""},
	"ListClusters":                  {Real, "", ""},
	"ListContainerInstances":        {Real, "", ""},
	"ListDaemonDeployments":         {Real, "", ""},
	"ListDaemonTaskDefinitions":     {Real, "", ""},
	"ListDaemons":                   {Real, "", ""},
	"ListServiceDeployments":        {Real, "", ""},
	"ListServices":                  {Real, "", ""},
	"ListServicesByNamespace":       {Real, "", ""},
	"ListTagsForResource":           {Real, "", ""},
	"ListTaskDefinitionFamilies":    {Real, "", ""},
	"ListTaskDefinitions":           {Real, "", ""},
	"ListTasks":                     {Real, "", ""},
	"PutAccountSetting":             {Real, "The long-ARN formats change the ARNs Berth issues; the other settings take only the value that describes Berth (containerInsights disabled, awsvpcTrunking enabled, fargateFIPSMode disabled, defaultLogDriverMode non-blocking; tagResourceAuthorization and fargateTaskRetirementWaitPeriod any), other values are refused saying why.", ""},
	"PutAccountSettingDefault":      {Real, "As PutAccountSetting.", ""},
	"PutAttributes":                 {Real, "", ""},
	"PutClusterCapacityProviders":   {Real, "The default strategy is used by RunTask, CreateService and UpdateService when neither launchType nor capacityProviderStrategy is given.", ""},
	"RegisterContainerInstance":     {Real, "", ""},
	"RegisterDaemonTaskDefinition":  {Real, noteDaemonTD, ""},
	"RegisterTaskDefinition":        {Real, "", ""},
	"RunTask":                       {Real, "", ""},
	"StartTask":                     {Real, "", ""},
	"StopServiceDeployment":         {Real, "ROLLBACK (to the last completed deployment; a BLUE_GREEN, LINEAR or CANARY deployment rolls back in place: traffic returns to its source revision, whose tasks still run) and ABORT.", ""},
	"StopTask":                      {Real, "", ""},
	"SubmitAttachmentStateChanges":  {Real, "Through the agent state path; an instance credential reports only its own tasks.", ""},
	"SubmitContainerStateChange":    {Real, "Through the agent state path; an instance credential reports only its own tasks.", ""},
	"SubmitTaskStateChange":         {Real, "Through the agent state path; an instance credential reports only its own tasks.", ""},
	"TagResource":                   {Real, "", ""},
	"UntagResource":                 {Real, "", ""},
	"UpdateCapacityProvider":        {Real, "As CreateCapacityProvider: managedScaling and managedTerminationProtection ENABLED are refused.", ""},
	"UpdateCluster":                 {Real, "As CreateCluster.", ""},
	"UpdateClusterSettings":         {Real, "containerInsights disabled only.", ""},
	"UpdateContainerAgent":          {Real, "Answers MissingVersionException, as AWS does for an agent it cannot update: Berth's agent is updated by replacing the berth binary.", ""},
	"UpdateContainerInstancesState": {Real, "", ""},
	"UpdateDaemon":                  {Real, "As CreateDaemon; every call starts a deployment, and a deployment still in progress is STOPPED.", ""},
	"UpdateExpressGatewayService":   {Unsupported, whyExpress, insExpress},
	"UpdateService":                 {Real, "", ""},
	"UpdateServicePrimaryTaskSet":   {Real, "", ""},
	"UpdateTaskProtection":          {Real, "Scale-in and deployments skip a protected task until its protection expires.", ""},
	"UpdateTaskSet":                 {Real, "", ""},
}

// UnsupportedMessage is the UnsupportedFeatureException message for an operation Berth
// does not serve: it names the operation, says why and what Berth supports instead
// (Operations); an operation missing from the table gets a generic message naming it.
func UnsupportedMessage(action string) string {
	r, ok := Operations[action]
	if !ok || r.Status != Unsupported {
		return "Berth does not support " + action + " yet."
	}
	msg := "Berth does not support " + action + ": " + strings.TrimSuffix(r.Why, ".") + "."
	if r.Instead != "" {
		msg += " Instead, " + r.Instead
	}
	return msg
}

// OperationNames returns the names in Operations, sorted.
func OperationNames() []string {
	out := make([]string, 0, len(Operations))
	for k := range Operations {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
