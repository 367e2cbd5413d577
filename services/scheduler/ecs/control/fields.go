package control

import (
	"errors"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// FieldStatus says what Berth does with one member of a request shape.
type FieldStatus string

// The statuses of docs/task-definition-fields.md. A member is honoured (it changes what
// runs, observably), refused (the call fails naming it) or stored-only (recorded and
// described back, as AWS itself only records it).
const (
	Honoured   FieldStatus = "honoured"
	Refused    FieldStatus = "refused"
	StoredOnly FieldStatus = "stored-only"
)

// FieldRule is Berth's answer for one member ("Shape.member") of a request shape.
type FieldRule struct {
	// Status is what Berth does with the member when it is set.
	Status FieldStatus
	// Supports says, for a refused member, what Berth supports instead; it ends the
	// error message. For an honoured or stored-only member it is a note for the table.
	Supports string
	// Issue is the Berth issue that will flip a refused member to honoured (0: none).
	Issue int
	// Allow, when set on a refused member, admits the values Berth does honour (the member
	// is then refused only for the others); Supports says which.
	Allow func(protoreflect.Value) bool
}

// fieldShapes are the request shapes whose every member is in FieldRules, with the
// nested shapes judged part of them. CheckFields descends into these only; a nested shape
// not listed is honoured or refused as a whole by its parent member.
var fieldShapes = []string{
	"RegisterTaskDefinitionRequest", "ContainerDefinition", "Volume", "HostVolumeProperties",
	"DockerVolumeConfiguration", "EFSVolumeConfiguration", "EFSAuthorizationConfig", "MountPoint", "VolumeFrom", "PortMapping", "LogConfiguration",
	"LinuxParameters", "KernelCapabilities", "Device", "Tmpfs", "SystemControl",
	"RunTaskRequest", "StartTaskRequest", "TaskOverride", "ContainerOverride",
	"CreateServiceRequest", "UpdateServiceRequest",
	"DeploymentConfiguration", "DeploymentCircuitBreaker", "DeploymentAlarms",
}

// FieldShapes returns the shapes FieldRules covers member by member.
func FieldShapes() []string { return append([]string(nil), fieldShapes...) }

// Issue numbers that own refused members.
const (
	issueFields     = 15 // this table: volumes, linuxParameters, restartPolicy, GPUs, …
	issueNetworking = 14 // awsvpc, bridge with dynamic ports, networkConfiguration
	issueAWSDeps    = 16 // CloudWatch Logs, Secrets Manager, SSM, S3, task credentials
	issueTraffic    = 17 // load balancers, service discovery, Service Connect
	issueRestOfAPI  = 18 // capacity providers, task sets, deployment extras
)

func honoured(note string) FieldRule { return FieldRule{Status: Honoured, Supports: note} }
func stored(note string) FieldRule   { return FieldRule{Status: StoredOnly, Supports: note} }
func refused(issue int, supports string) FieldRule {
	return FieldRule{Status: Refused, Supports: supports, Issue: issue}
}
func refusedBut(issue int, supports string, allow func(protoreflect.Value) bool) FieldRule {
	return FieldRule{Status: Refused, Supports: supports, Issue: issue, Allow: allow}
}

// isFalse admits a boolean member set to false (asking for nothing).
func isFalse(v protoreflect.Value) bool { return !v.Bool() }

// stringIn admits the given string values.
func stringIn(allowed ...string) func(protoreflect.Value) bool {
	return func(v protoreflect.Value) bool { return oneOf(v.String(), allowed...) }
}

// Messages shared by several members.
const (
	supNetConf       = "awsvpcConfiguration is required for networkMode awsvpc and refused for the other modes, as AWS does: subnets (1-16, required) name the task's subnet and are recorded on its ENI attachment, the address comes from the container instance's own task subnet; securityGroups may be left out or name only sg-berthallowall, Berth's one security group, which allows all traffic (Berth enforces no security group rules); any other group is refused as not existing; assignPublicIp ENABLED is refused, for FARGATE tasks too (Berth has no public addresses). See docs/networking.md."
	supNoEphem       = "Berth does not size task storage; ephemeralStorage (a Fargate setting) is not supported."
	supNoInfer       = "Berth has no Elastic Inference accelerators."
	supTaskRole      = "Each container gets the agent's credentials endpoint: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI on 169.254.170.2 in bridge and awsvpc tasks (the host redirects it to the agent, as on ECS), AWS_CONTAINER_CREDENTIALS_FULL_URI on the agent's loopback address in host tasks; session credentials of the task's account as arn:aws:sts::{account}:assumed-role/{role name}/{task id}, which the gateway accepts until the task stops; refreshed before they expire; AWS_ENDPOINT_URL (unless the container sets it) points at the same listener, which relays API calls to Berth, so bridge and awsvpc tasks reach Berth too. Berth has no IAM policies: the credentials act with the account's permissions."
	supNoEnvFiles    = "Berth has no object store to read environment files from; put the variables in environment."
	supCapProv       = "Base and weight over the pools of the cluster's capacity providers (docs/capacity-providers.md); the cluster's default strategy applies when neither launchType nor a strategy is given."
	supPlatform      = "FARGATE tasks only: LATEST (resolves to 1.4.0) or 1.4.0, shown on the task with platformFamily Linux."
	supNoVolConf     = "Berth has no EBS volumes; use task definition volumes with host paths."
	supNoSC          = "Berth has no Service Connect yet; leave serviceConnectConfiguration out."
	supNoLattice     = "Berth has no VPC Lattice."
	supNoAZ          = "Berth has no Availability Zones to rebalance across; only DISABLED is supported."
	supRefID         = "Berth does not record referenceId; leave it out."
	supNoAlarms      = "Berth's daemon deployments do not watch CloudWatch alarms yet (service deployments do); leave alarms disabled."
	supECSController = "Berth's deployments are rolling updates; only deploymentController type ECS is supported."
	supControllers   = "Berth runs deploymentController types ECS (rolling updates) and EXTERNAL (task sets: CreateTaskSet, UpdateTaskSet, UpdateServicePrimaryTaskSet, DeleteTaskSet); CODE_DEPLOY is not supported."
)

// supGPU is how resourceRequirements are honoured (container definitions and overrides).
var supExec = honoured("The task's containers show the ExecuteCommandAgent managed agent, and ExecuteCommand opens interactive sessions into them (docs/exec.md).")

var supGPU = honoured("Type GPU: the agent registers the host's NVIDIA GPUs (ids from nvidia-smi; none on a host without them); the task is placed only on an instance with that many unassigned GPUs, else it fails with RESOURCE:GPU; its containers are given their GPUs exclusively (gpuIds; the /dev/nvidiaN and driver nodes and NVIDIA_VISIBLE_DEVICES in the container) until the task stops. Type InferenceAccelerator is refused (no Elastic Inference).")

// FieldRules is the one table of what Berth does with every member of the request shapes
// a task definition, a task or a service is made from, keyed "Shape.member" with the AWS
// model's names. docs/task-definition-fields.md shows it and TestFieldTableCoversModel
// keeps the two and the model in step; CheckFields enforces it at the call.
var FieldRules = map[string]FieldRule{
	// RegisterTaskDefinition (AWS reference: RegisterTaskDefinition).
	"RegisterTaskDefinitionRequest.containerDefinitions":    honoured(""),
	"RegisterTaskDefinitionRequest.cpu":                     honoured("Reserved at placement; the task's cgroup, which holds all its containers, gets it as cpu shares and, as the ECS agent on Linux sets, a CFS quota of cpu/1024 CPUs (cpu.cfs_quota_us 25000 of a 100000 µs period for 256 units; cgroup v2 cpu.max), so the task uses at most that much CPU time; a container's own cpu stays shares only."),
	"RegisterTaskDefinitionRequest.enableFaultInjection":    refusedBut(0, "Berth has no fault injection endpoints; only false is supported.", isFalse),
	"RegisterTaskDefinitionRequest.ephemeralStorage":        refused(0, supNoEphem),
	"RegisterTaskDefinitionRequest.executionRoleArn":        stored("AWS uses it to pull from ECR and fetch secrets or logs; Berth reads a task's secrets with the task's own account, whatever the role."),
	"RegisterTaskDefinitionRequest.family":                  honoured(""),
	"RegisterTaskDefinitionRequest.inferenceAccelerators":   refused(0, supNoInfer),
	"RegisterTaskDefinitionRequest.ipcMode":                 honoured("host joins the host's IPC namespace; none keeps a private one without /dev/shm; task: the containers join the IPC namespace of the first container without dependsOn (started first) and share one /dev/shm tmpfs, removed with the task."),
	"RegisterTaskDefinitionRequest.memory":                  honoured("Hard limit of the task's cgroup, which holds all its containers."),
	"RegisterTaskDefinitionRequest.networkMode":             honoured("bridge: a network namespace per container on the Berth bridge (CNI), outbound NAT, port mappings published on the host, hostPort 0 a dynamic port; awsvpc: one namespace per task with an address of the instance's task subnet; host: the host's namespace; none: loopback only. Placed only on instances that can set the mode up: bridge and none need ecs.capability.cni-plugin-version, awsvpc ecs.capability.task-eni (the CNI plugins, and a task subnet); else RunTask answers failures[] ATTRIBUTE naming the attribute and what the host lacks. See docs/networking.md."),
	"RegisterTaskDefinitionRequest.pidMode":                 honoured("host joins the host's PID namespace; task: the containers join the PID namespace of the first container without dependsOn (started first; Berth has no pause container, so when that container exits the kernel ends the others in its namespace)."),
	"RegisterTaskDefinitionRequest.placementConstraints":    honoured("memberOf expressions at placement."),
	"RegisterTaskDefinitionRequest.proxyConfiguration":      refused(issueTraffic, "Berth has no App Mesh proxy; leave proxyConfiguration out."),
	"RegisterTaskDefinitionRequest.requiresCompatibilities": honoured("Checked as AWS checks it (FARGATE: awsvpc, a Fargate cpu/memory combination, Fargate's limits); compatibilities lists FARGATE when the definition meets them."),
	"RegisterTaskDefinitionRequest.runtimePlatform":         honoured("Stored and described back; at placement cpuArchitecture X86_64 or ARM64 needs an instance whose ecs.cpu-architecture is x86_64 or arm64, operatingSystemFamily LINUX one whose ecs.os-type is linux; WINDOWS_* families are registered, as AWS registers them, but no Berth agent registers ecs.os-type windows, so their tasks fail placement with ATTRIBUTE naming ecs.os-type (docs/capacity-providers.md)."),
	"RegisterTaskDefinitionRequest.tags":                    honoured(""),
	"RegisterTaskDefinitionRequest.taskRoleArn":             honoured(supTaskRole),
	"RegisterTaskDefinitionRequest.volumes":                 honoured(""),

	// ContainerDefinition.
	"ContainerDefinition.command":                honoured(""),
	"ContainerDefinition.cpu":                    honoured("cgroup cpu shares."),
	"ContainerDefinition.credentialSpecs":        refused(0, "Berth runs Linux containers only; credentialSpecs (gMSA) are for Windows."),
	"ContainerDefinition.dependsOn":              honoured(""),
	"ContainerDefinition.disableNetworking":      honoured("networkMode bridge: the container gets a namespace with loopback only (no port mappings); refused with host and awsvpc, whose namespace is shared."),
	"ContainerDefinition.dnsSearchDomains":       honoured("The search line of the container's resolv.conf."),
	"ContainerDefinition.dnsServers":             honoured("The nameserver lines of the container's resolv.conf."),
	"ContainerDefinition.dockerLabels":           honoured("Labels on the containerd container."),
	"ContainerDefinition.dockerSecurityOptions":  refused(issueFields, "Berth does not apply SELinux, AppArmor or seccomp options yet; leave dockerSecurityOptions out."),
	"ContainerDefinition.entryPoint":             honoured(""),
	"ContainerDefinition.environment":            honoured(""),
	"ContainerDefinition.environmentFiles":       refused(issueAWSDeps, supNoEnvFiles),
	"ContainerDefinition.essential":              honoured(""),
	"ContainerDefinition.extraHosts":             honoured("Lines of the container's /etc/hosts (refused with awsvpc, as AWS does)."),
	"ContainerDefinition.firelensConfiguration":  refused(issueAWSDeps, "Berth has no FireLens log router; leave firelensConfiguration out."),
	"ContainerDefinition.healthCheck":            honoured(""),
	"ContainerDefinition.hostname":               honoured("The container's host name (refused with awsvpc, as AWS does: the task's name is its private DNS name)."),
	"ContainerDefinition.image":                  honoured(""),
	"ContainerDefinition.interactive":            honoured("stdin kept open while the process runs (nothing writes to it: ECS has no attach); after an agent restart the re-attached process reads end-of-file."),
	"ContainerDefinition.links":                  honoured("networkMode bridge only (as AWS): the linked container's address and alias in /etc/hosts."),
	"ContainerDefinition.linuxParameters":        honoured("See LinuxParameters."),
	"ContainerDefinition.logConfiguration":       honoured("logDriver json-file (kept by the agent, read with berth logs) or awslogs (shipped to Berth's CloudWatch Logs; see LogConfiguration)."),
	"ContainerDefinition.memory":                 honoured("Hard limit; OOM-killed past it."),
	"ContainerDefinition.memoryReservation":      honoured("Soft limit."),
	"ContainerDefinition.mountPoints":            honoured(""),
	"ContainerDefinition.name":                   honoured(""),
	"ContainerDefinition.portMappings":           honoured("bridge: published on the host by CNI portmap (hostPort 0 or absent: a dynamic port, reported in networkBindings); host: bound on the host; awsvpc: on the task's address."),
	"ContainerDefinition.privileged":             honoured("Every capability and the host's devices, no seccomp or AppArmor, as Docker's --privileged."),
	"ContainerDefinition.pseudoTerminal":         honoured("A pseudo-terminal; its output (stdout and stderr merged) is logged as stdout."),
	"ContainerDefinition.readonlyRootFilesystem": honoured(""),
	"ContainerDefinition.repositoryCredentials":  honoured("credentialsParameter names a Secrets Manager secret (ARN or name) holding {\"username\", \"password\"}: resolved at task start and used for the image pull from its registry (docs/secrets.md)."),
	"ContainerDefinition.resourceRequirements":   supGPU,
	"ContainerDefinition.restartPolicy":          honoured("The agent restarts an exited container in place (same task; an essential one does not stop the task), except for ignoredExitCodes or when it ran less than restartAttemptPeriod (default 300 s); the agent reports restartCount."),
	"ContainerDefinition.secrets":                honoured("Each valueFrom (a Secrets Manager secret ARN, optionally :json-key:version-stage:version-id; an SSM parameter name or ARN) is resolved at task start into the container's environment; a missing one stops the task with ResourceInitializationError (docs/secrets.md)."),
	"ContainerDefinition.startTimeout":           honoured("Seconds to wait for the dependsOn conditions; the container is then not started."),
	"ContainerDefinition.stopTimeout":            honoured("Seconds between SIGTERM and SIGKILL."),
	"ContainerDefinition.systemControls":         honoured("IPC-namespaced kernel parameters (kernel.msg*, kernel.sem, kernel.shm*, fs.mqueue.*) and net.* ones in the container's (awsvpc: the task's) network namespace; net.* is refused with networkMode host."),
	"ContainerDefinition.ulimits":                honoured(""),
	"ContainerDefinition.user":                   honoured(""),
	"ContainerDefinition.versionConsistency":     refusedBut(issueFields, "Berth pulls the image by tag when the task starts; only versionConsistency disabled is supported.", stringIn("disabled")),
	"ContainerDefinition.volumesFrom":            honoured(""),
	"ContainerDefinition.workingDirectory":       honoured(""),

	// Volume and the nested shapes of volumes and mounts.
	"Volume.configuredAtLaunch":                      refusedBut(0, supNoVolConf, isFalse),
	"Volume.dockerVolumeConfiguration":               honoured("A directory on the instance: scope task is removed with the task, scope shared outlives tasks and is reused by name."),
	"Volume.efsVolumeConfiguration":                  honoured("The agent mounts the file system the operator maps its fileSystemId to (berth agent --efs fs-ID=host:/export, an NFSv4.1 export; or fs-ID=/path, a directory of a single host, bind-mounted); a file system the instance has no mapping for, or that does not mount, stops the task with ResourceInitializationError (docs/efs.md)."),
	"EFSVolumeConfiguration.fileSystemId":            honoured("Names the operator's --efs mapping on the container instance."),
	"EFSVolumeConfiguration.rootDirectory":           honoured("A directory within the file system (default /); it must exist, else the task fails to start, as on AWS."),
	"EFSVolumeConfiguration.transitEncryption":       refusedBut(0, "Berth mounts EFS volumes over plain NFS (no TLS stunnel as efs-utils runs); only DISABLED is supported.", stringIn("DISABLED")),
	"EFSVolumeConfiguration.transitEncryptionPort":   refused(0, "It applies only with transit encryption, which Berth does not support."),
	"EFSVolumeConfiguration.authorizationConfig":     honoured("See EFSAuthorizationConfig."),
	"EFSAuthorizationConfig.accessPointId":           refused(0, "Berth has no EFS access points; name the directory with rootDirectory."),
	"EFSAuthorizationConfig.iam":                     refusedBut(0, "Berth has no IAM authorization of NFS mounts; only DISABLED is supported.", stringIn("DISABLED")),
	"Volume.fsxWindowsFileServerVolumeConfiguration": refused(0, "Berth runs Linux containers only; use host volumes."),
	"Volume.host":                                      honoured("sourcePath is bind-mounted; an empty host is a scratch directory of the task, removed with it."),
	"Volume.name":                                      honoured(""),
	"Volume.s3filesVolumeConfiguration":                refused(0, "Berth has no S3 file systems; use host volumes."),
	"HostVolumeProperties.sourcePath":                  honoured("An absolute path on the container instance."),
	"MountPoint.containerPath":                         honoured(""),
	"MountPoint.readOnly":                              honoured(""),
	"MountPoint.sourceVolume":                          honoured(""),
	"VolumeFrom.readOnly":                              honoured(""),
	"VolumeFrom.sourceContainer":                       honoured(""),
	"LinuxParameters.capabilities":                     honoured("Added to or dropped from containerd's default set, as Docker's --cap-add and --cap-drop (ALL included)."),
	"LinuxParameters.devices":                          honoured("Host devices with cgroup permissions; see Device."),
	"LinuxParameters.initProcessEnabled":               honoured("docker-init (tini) runs as PID 1, as Docker's --init; the instance needs docker-init or tini-static: its agent then registers com.amazonaws.ecs.capability.docker-remote-api.1.25 (AWS's requirement for initProcessEnabled), and the task is placed only on such an instance, else RunTask answers failures[] ATTRIBUTE naming it."),
	"LinuxParameters.maxSwap":                          honoured("Swap besides the container's memory (which it needs), as Docker's --memory-swap."),
	"LinuxParameters.sharedMemorySize":                 honoured("Size of /dev/shm in MiB."),
	"LinuxParameters.swappiness":                       honoured("0–100, with maxSwap (AWS ignores it without; Berth refuses that)."),
	"LinuxParameters.tmpfs":                            honoured(""),
	"KernelCapabilities.add":                           honoured("ECS capability names, checked at registration."),
	"KernelCapabilities.drop":                          honoured("ECS capability names, checked at registration."),
	"Device.containerPath":                             honoured("Defaults to hostPath."),
	"Device.hostPath":                                  honoured("Must exist on the instance when the container starts."),
	"Device.permissions":                               honoured("read, write, mknod; all three when empty, as Docker."),
	"DockerVolumeConfiguration.autoprovision":          honoured("With scope shared: create the volume when missing; without, a missing one fails the container."),
	"DockerVolumeConfiguration.driver":                 refusedBut(issueFields, "Berth's volumes are directories on the instance; only driver local is supported.", stringIn("local")),
	"DockerVolumeConfiguration.driverOpts":             honoured("As Docker's local driver: type, device and o mount the volume (mount -t type -o o device), e.g. a tmpfs; a task-scoped one is unmounted with the task, a shared one stays mounted."),
	"DockerVolumeConfiguration.labels":                 stored("Docker only records volume labels; Berth keeps them in the task definition."),
	"DockerVolumeConfiguration.scope":                  honoured("task (default) or shared."),
	"DeploymentConfiguration.alarms":                   honoured("CloudWatch alarms that fail (and roll back) a deployment; see DeploymentAlarms."),
	"DeploymentConfiguration.bakeTimeInMinutes":        honoured("BLUE_GREEN, LINEAR and CANARY: 0-1440 minutes in BAKE_TIME, after all production traffic moved and before the old revision's tasks stop (docs/deployments.md)."),
	"DeploymentConfiguration.canaryConfiguration":      honoured("CANARY only: canaryPercent (0.1-100, default 5) of production traffic, canaryBakeTimeInMinutes (0-1440; unboxed in the model, so absent reads as 0), then the rest (docs/deployments.md)."),
	"DeploymentConfiguration.deploymentCircuitBreaker": honoured(""),
	"DeploymentConfiguration.lifecycleHooks":           honoured("BLUE_GREEN, LINEAR and CANARY: targetType PAUSE hooks wait at their lifecycleStages until ContinueServiceDeployment (CONTINUE or ROLLBACK) or their timeoutConfiguration (default 1440 minutes, ROLLBACK); AWS_LAMBDA hooks (hookTargetArn) are refused, Berth has no Lambda; roleArn is recorded, hookDetails (a Lambda hook's payload) refused (docs/deployments.md)."),
	"DeploymentConfiguration.linearConfiguration":      honoured("LINEAR only: stepPercent (3-100, default 10) of production traffic per step, stepBakeTimeInMinutes (0-1440; unboxed in the model, so absent reads as 0) between steps (docs/deployments.md)."),
	"DeploymentConfiguration.maximumPercent":           honoured(""),
	"DeploymentConfiguration.minimumHealthyPercent":    honoured(""),
	"DeploymentConfiguration.strategy":                 honoured("ROLLING (default); BLUE_GREEN, LINEAR and CANARY shift traffic between the target groups of loadBalancers[].advancedConfiguration on Berth's load balancers (REPLICA services; docs/deployments.md)."),
	"DeploymentCircuitBreaker.enable":                  honoured(""),
	"DeploymentCircuitBreaker.rollback":                honoured(""),
	"DeploymentAlarms.alarmNames":                      honoured("CloudWatch metric alarms of the service's account and region (docs/cloudwatch.md); one that does not exist never triggers."),
	"DeploymentAlarms.enable":                          honoured("an alarm in ALARM while a deployment is in progress fails it."),
	"DeploymentAlarms.rollback":                        honoured("a deployment failed by an alarm rolls back to the last COMPLETED one."),
	"PortMapping.appProtocol":                          stored("AWS uses it only for Service Connect, which Berth refuses."),
	"PortMapping.containerPort":                        honoured(""),
	"PortMapping.containerPortRange":                   honoured("bridge and awsvpc only, without containerPort and hostPort, up to 100 per container, no overlaps (AWS's rules). bridge: the agent publishes a contiguous free range of the instance's ephemeral ports (32768-60999 by default), never one another task holds; awsvpc: the same range on the task's address. networkBindings report containerPortRange and hostPortRange."),
	"PortMapping.hostPort":                             honoured("bridge: any host port (reserved at placement, RESOURCE:PORTS), or 0/absent for a dynamic one from the instance's ip_local_port_range (32768-60999 by default) that the agent allocates; host and awsvpc: equal to containerPort."),
	"PortMapping.name":                                 stored("AWS uses it only for Service Connect, which Berth refuses."),
	"PortMapping.protocol":                             honoured("tcp or udp."),
	"SystemControl.namespace":                          honoured(""),
	"SystemControl.value":                              honoured(""),
	"Tmpfs.containerPath":                              honoured(""),
	"Tmpfs.mountOptions":                               honoured("Passed to the mount after nosuid and nodev."),
	"Tmpfs.size":                                       honoured("Maximum size in MiB."),
	"LogConfiguration.logDriver":                       refusedBut(issueAWSDeps, "Berth supports logDriver json-file (kept by the agent) and awslogs (Berth's CloudWatch Logs).", stringIn("json-file", "awslogs")),
	"LogConfiguration.options":                         honoured("awslogs: awslogs-group (required), awslogs-region (default: the agent's region), awslogs-stream-prefix (stream prefix/container-name/task-id; without it the container id), awslogs-create-group (without it a missing group fails the task with ResourceInitializationError), mode (non-blocking by default: unshipped output beyond max-buffer-size, default 10m, is dropped oldest first; blocking never drops), awslogs-multiline-pattern or awslogs-datetime-format (strftime). Any other option, and any option for json-file, is refused at registration."),
	"LogConfiguration.secretOptions":                   honoured("awslogs: each name must be one of the driver's options (above) and not also in options; its valueFrom (a Secrets Manager secret ARN, optionally :json-key:version-stage:version-id; an SSM parameter name or ARN) is resolved at task start like secrets and given to the driver as that option; a missing one stops the task with ResourceInitializationError. The values are never shown (DescribeTasks, task metadata, events, errors)."),

	// RunTask and StartTask (AWS reference: RunTask, StartTask).
	"RunTaskRequest.capacityProviderStrategy": honoured(supCapProv),
	"RunTaskRequest.clientToken":              honoured("Idempotency of the call."),
	"RunTaskRequest.cluster":                  honoured(""),
	"RunTaskRequest.count":                    honoured(""),
	"RunTaskRequest.enableECSManagedTags":     honoured(""),
	"RunTaskRequest.enableExecuteCommand":     supExec,
	"RunTaskRequest.group":                    honoured(""),
	"RunTaskRequest.launchType":               honoured("EC2, EXTERNAL, and FARGATE on the Fargate pool (docs/capacity-providers.md)."),
	"RunTaskRequest.networkConfiguration":     honoured(supNetConf),
	"RunTaskRequest.overrides":                honoured(""),
	"RunTaskRequest.placementConstraints":     honoured(""),
	"RunTaskRequest.placementStrategy":        honoured(""),
	"RunTaskRequest.platformVersion":          honoured(supPlatform),
	"RunTaskRequest.propagateTags":            honoured(""),
	"RunTaskRequest.referenceId":              refused(0, supRefID),
	"RunTaskRequest.startedBy":                honoured(""),
	"RunTaskRequest.tags":                     honoured(""),
	"RunTaskRequest.taskDefinition":           honoured(""),
	"RunTaskRequest.volumeConfigurations":     refused(0, supNoVolConf),
	"StartTaskRequest.cluster":                honoured(""),
	"StartTaskRequest.containerInstances":     honoured(""),
	"StartTaskRequest.enableECSManagedTags":   honoured(""),
	"StartTaskRequest.enableExecuteCommand":   supExec,
	"StartTaskRequest.group":                  honoured(""),
	"StartTaskRequest.networkConfiguration":   honoured(supNetConf),
	"StartTaskRequest.overrides":              honoured(""),
	"StartTaskRequest.propagateTags":          honoured(""),
	"StartTaskRequest.referenceId":            refused(0, supRefID),
	"StartTaskRequest.startedBy":              honoured(""),
	"StartTaskRequest.tags":                   honoured(""),
	"StartTaskRequest.taskDefinition":         honoured(""),
	"StartTaskRequest.volumeConfigurations":   refused(0, supNoVolConf),

	// Overrides.
	"TaskOverride.containerOverrides":            honoured("The overrides together are at most 8,192 characters as JSON, as on AWS."),
	"TaskOverride.cpu":                           honoured("Replaces the task-level cpu."),
	"TaskOverride.ephemeralStorage":              refused(0, supNoEphem),
	"TaskOverride.executionRoleArn":              stored("As the task definition's executionRoleArn."),
	"TaskOverride.inferenceAcceleratorOverrides": refused(0, supNoInfer),
	"TaskOverride.memory":                        honoured("Replaces the task-level memory; the containers' memory must fit in it, as at registration."),
	"TaskOverride.taskRoleArn":                   honoured("Replaces the task definition's taskRoleArn for this task's credentials."),
	"ContainerOverride.command":                  honoured(""),
	"ContainerOverride.cpu":                      honoured(""),
	"ContainerOverride.environment":              honoured(""),
	"ContainerOverride.environmentFiles":         refused(issueAWSDeps, supNoEnvFiles),
	"ContainerOverride.memory":                   honoured("Held to RegisterTaskDefinition's rules against the task's memory (the override's when given) and memoryReservation."),
	"ContainerOverride.memoryReservation":        honoured(""),
	"ContainerOverride.name":                     honoured(""),
	"ContainerOverride.resourceRequirements":     supGPU,

	// CreateService and UpdateService (AWS reference: CreateService, UpdateService).
	"CreateServiceRequest.availabilityZoneRebalancing":   refusedBut(0, supNoAZ, stringIn("DISABLED")),
	"CreateServiceRequest.capacityProviderStrategy":      honoured(supCapProv + " Each launch follows base and weight over the service's live tasks; changing it starts a deployment."),
	"CreateServiceRequest.clientToken":                   refused(issueRestOfAPI, "Berth's CreateService is idempotent by serviceName; clientToken is not supported yet."),
	"CreateServiceRequest.cluster":                       honoured(""),
	"CreateServiceRequest.deploymentConfiguration":       honoured("Rolling deployments: maximumPercent, minimumHealthyPercent."),
	"CreateServiceRequest.deploymentController":          refusedBut(issueRestOfAPI, supControllers, controllerECSOrExternal),
	"CreateServiceRequest.desiredCount":                  honoured(""),
	"CreateServiceRequest.enableECSManagedTags":          honoured(""),
	"CreateServiceRequest.enableExecuteCommand":          supExec,
	"CreateServiceRequest.healthCheckGracePeriodSeconds": honoured(""),
	"CreateServiceRequest.launchType":                    honoured("EC2, EXTERNAL, and FARGATE on the Fargate pool (docs/capacity-providers.md)."),
	"CreateServiceRequest.loadBalancers":                 honoured("ELBv2 target groups (instance and ip): tasks are registered when RUNNING and drained before they stop."),
	"CreateServiceRequest.networkConfiguration":          honoured(supNetConf),
	"CreateServiceRequest.placementConstraints":          honoured(""),
	"CreateServiceRequest.placementStrategy":             honoured(""),
	"CreateServiceRequest.platformVersion":               honoured(supPlatform),
	"CreateServiceRequest.propagateTags":                 honoured(""),
	"CreateServiceRequest.role":                          stored("Berth needs no IAM role to register targets."),
	"CreateServiceRequest.schedulingStrategy":            honoured("REPLICA and DAEMON."),
	"CreateServiceRequest.serviceConnectConfiguration":   refused(issueTraffic, supNoSC),
	"CreateServiceRequest.serviceName":                   honoured(""),
	"CreateServiceRequest.serviceRegistries":             honoured("One Cloud Map service (A and/or SRV): each RUNNING task is registered (awsvpc: its IP; bridge/host: host address and port) and deregistered before it stops; the DNS role answers the names."),
	"CreateServiceRequest.tags":                          honoured(""),
	"CreateServiceRequest.taskDefinition":                honoured(""),
	"CreateServiceRequest.volumeConfigurations":          refused(0, supNoVolConf),
	"CreateServiceRequest.vpcLatticeConfigurations":      refused(0, supNoLattice),
	"UpdateServiceRequest.availabilityZoneRebalancing":   refusedBut(0, supNoAZ, stringIn("DISABLED")),
	"UpdateServiceRequest.capacityProviderStrategy":      honoured(supCapProv + " Each launch follows base and weight over the service's live tasks; changing it starts a deployment."),
	"UpdateServiceRequest.cluster":                       honoured(""),
	"UpdateServiceRequest.deploymentConfiguration":       honoured(""),
	"UpdateServiceRequest.deploymentController":          refusedBut(issueRestOfAPI, supECSController, controllerECS),
	"UpdateServiceRequest.desiredCount":                  honoured(""),
	"UpdateServiceRequest.enableECSManagedTags":          honoured(""),
	"UpdateServiceRequest.enableExecuteCommand":          honoured("Applies to the tasks the service starts from then on, as on AWS (docs/exec.md)."),
	"UpdateServiceRequest.forceNewDeployment":            honoured(""),
	"UpdateServiceRequest.healthCheckGracePeriodSeconds": honoured(""),
	"UpdateServiceRequest.loadBalancers":                 honoured("Replaces the service's target groups and starts a new deployment."),
	"UpdateServiceRequest.networkConfiguration":          honoured(supNetConf),
	"UpdateServiceRequest.placementConstraints":          honoured(""),
	"UpdateServiceRequest.placementStrategy":             honoured(""),
	"UpdateServiceRequest.platformVersion":               honoured(supPlatform),
	"UpdateServiceRequest.propagateTags":                 honoured(""),
	"UpdateServiceRequest.service":                       honoured(""),
	"UpdateServiceRequest.serviceConnectConfiguration":   refused(issueTraffic, supNoSC),
	"UpdateServiceRequest.serviceRegistries":             honoured("Replaces the service's Cloud Map registry and starts a new deployment."),
	"UpdateServiceRequest.taskDefinition":                honoured(""),
	"UpdateServiceRequest.volumeConfigurations":          refused(0, supNoVolConf),
	"UpdateServiceRequest.vpcLatticeConfigurations":      refused(0, supNoLattice),
}

// controllerECSOrExternal admits a deploymentController of type ECS (rolling updates) or
// EXTERNAL (task sets managed through CreateTaskSet and the like).
func controllerECSOrExternal(v protoreflect.Value) bool {
	m := v.Message()
	f := m.Descriptor().Fields().ByJSONName("type")
	return f != nil && m.Has(f) && oneOf(m.Get(f).String(), "ECS", "EXTERNAL")
}

// controllerECS admits a deploymentController of type ECS (the rolling update Berth runs).
func controllerECS(v protoreflect.Value) bool {
	m := v.Message()
	f := m.Descriptor().Fields().ByJSONName("type")
	return f != nil && m.Has(f) && m.Get(f).String() == "ECS"
}

// Errors CheckFields answers with: RegisterTaskDefinition answers ClientException, as
// AWS does for a bad task definition; RunTask, StartTask and the service actions answer
// InvalidParameterException.
const (
	ClientErr       = "ClientException"
	InvalidParamErr = "InvalidParameterException"
)

// CheckFields walks every member set in m (a request message of the ECS model) and the
// shapes of FieldShapes nested in it, and refuses the first member FieldRules marks
// refused (or that is missing from FieldRules: a member a newer model adds is refused
// until it is classified): an awserr of type errType whose message names the member by
// its path ("containerDefinitions[1].secrets") and says what Berth supports. Members of
// shapes not in FieldShapes are not looked at. It returns nil when nothing is refused.
func CheckFields(errType string, m proto.Message) error {
	if m == nil {
		return nil
	}
	return checkMessage(errType, "", m.ProtoReflect())
}

var coveredShape = func() map[string]bool {
	out := map[string]bool{}
	for _, s := range fieldShapes {
		out[s] = true
	}
	return out
}()

func checkMessage(errType, path string, m protoreflect.Message) error {
	shape := string(m.Descriptor().Name())
	if !coveredShape[shape] {
		return nil
	}
	// Fields in declaration order (the model's member order), so the error is stable.
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		p := fd.JSONName()
		if path != "" {
			p = path + "." + p
		}
		rule, ok := FieldRules[shape+"."+fd.JSONName()]
		if !ok {
			return awserr.New(errType, "%s is not supported by Berth.", p)
		}
		if rule.Status == Refused {
			if err := refuse(errType, p, fd, v, rule); err != nil {
				return err
			}
			continue
		}
		if err := descend(errType, p, fd, v); err != nil {
			return err
		}
	}
	return nil
}

// refuse returns the refusal of member p unless rule.Allow admits its value(s).
func refuse(errType, p string, fd protoreflect.FieldDescriptor, v protoreflect.Value, rule FieldRule) error {
	allowed := rule.Allow != nil
	if allowed {
		if fd.IsList() {
			for i := range v.List().Len() {
				allowed = allowed && rule.Allow(v.List().Get(i))
			}
		} else {
			allowed = rule.Allow(v)
		}
	}
	if allowed {
		return descend(errType, p, fd, v)
	}
	msg := fmt.Sprintf("%s is not supported by Berth.", p)
	if fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap() {
		msg = fmt.Sprintf("%s %q is not supported by Berth.", p, v.String())
	}
	if rule.Supports != "" {
		msg += " " + rule.Supports
	}
	return awserr.New(errType, "%s", msg)
}

// descend checks the covered shapes nested in member p.
func descend(errType, p string, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	if fd.Kind() != protoreflect.MessageKind || fd.IsMap() {
		return nil
	}
	if fd.IsList() {
		for i := range v.List().Len() {
			if err := checkMessage(errType, fmt.Sprintf("%s[%d]", p, i), v.List().Get(i).Message()); err != nil {
				return err
			}
		}
		return nil
	}
	return checkMessage(errType, p, v.Message())
}

// FieldCounts returns how many members FieldRules marks with each status.
func FieldCounts() map[FieldStatus]int {
	out := map[FieldStatus]int{}
	for _, r := range FieldRules {
		out[r.Status]++
	}
	return out
}

// FieldKeys returns FieldRules' keys, sorted.
func FieldKeys() []string {
	out := make([]string, 0, len(FieldRules))
	for k := range FieldRules {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CheckTaskDefinitionFields refuses a stored task definition that holds a member Berth
// refuses (one registered before the member was refused, or restored from elsewhere), so
// RunTask, StartTask and CreateService never run one with a field silently ignored. It
// checks td's members as the RegisterTaskDefinitionRequest that would register it, and
// answers InvalidParameterException naming the task definition and the member.
func CheckTaskDefinitionFields(td *ecsv1.TaskDefinition) error {
	if td == nil {
		return nil
	}
	req := &ecsv1.RegisterTaskDefinitionRequest{}
	dst, src := req.ProtoReflect(), td.ProtoReflect()
	fields := dst.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		sfd := src.Descriptor().Fields().ByJSONName(fd.JSONName())
		if sfd == nil || !src.Has(sfd) || sfd.Kind() != fd.Kind() || sfd.Cardinality() != fd.Cardinality() {
			continue
		}
		dst.Set(fd, src.Get(sfd))
	}
	if err := CheckFields(InvalidParamErr, req); err != nil {
		var e *awserr.Error
		if errors.As(err, &e) {
			return awserr.InvalidParameterf("Task definition %s:%d: %s", td.GetFamily(), td.GetRevision(), e.Message)
		}
		return err
	}
	return nil
}
