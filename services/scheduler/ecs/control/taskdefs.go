package control

import (
	"context"
	"net"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/ecsrules"
	"github.com/berthhq/berth/services/scheduler/platform/arn"
	"github.com/berthhq/berth/services/scheduler/platform/awsapi"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// maxContainers is ECS's limit of container definitions per task definition.
const maxContainers = 10

// buildTaskDefinition validates a RegisterTaskDefinition request as ECS does and returns
// the task definition with AWS's defaults filled in (revision, ARN, status and times are
// set by the caller). Errors are ClientException naming the field, as AWS answers.
//
// The phases run in the order AWS reports problems in: the request's shape, the
// task-level settings, the volumes, each container in turn, then what the containers
// say about each other. Each returns the first problem it finds.
func buildTaskDefinition(m *ecsv1.RegisterTaskDefinitionRequest) (*ecsv1.TaskDefinition, error) {
	if err := checkRegisterRequest(m); err != nil {
		return nil, err
	}
	td := newTaskDefinition(m)
	mode, err := resolveTaskModes(td, m)
	if err != nil {
		return nil, err
	}
	taskMem, err := resolveTaskSize(td, m)
	if err != nil {
		return nil, err
	}
	if err := resolveCompatibilities(td, m, mode); err != nil {
		return nil, err
	}
	volumes, err := checkVolumes(td.Volumes)
	if err != nil {
		return nil, err
	}
	cs := &containerSet{
		mode: mode, ipcMode: m.GetIpcMode(), volumes: volumes,
		taskMem: taskMem, taskMemSet: td.Memory != nil,
		names: map[string]bool{}, hostPorts: map[string]bool{},
	}
	for i, in := range m.GetContainerDefinitions() {
		c, err := cs.add(i, in)
		if err != nil {
			return nil, err
		}
		td.ContainerDefinitions = append(td.ContainerDefinitions, c)
	}
	if err := checkContainerReferences(mode, td.ContainerDefinitions, cs.names); err != nil {
		return nil, err
	}
	if !cs.essential {
		return nil, awserr.Clientf("Task definition does not have any essential container.")
	}
	if err := checkTaskMemorySum(ClientErr, cs.memSum, taskMem); err != nil {
		return nil, err
	}
	return td, nil
}

// checkRegisterRequest checks what a RegisterTaskDefinition request must have before
// anything in it is read: a valid family, 1 to maxContainers containers, valid tags and
// a size AWS accepts.
func checkRegisterRequest(m *ecsv1.RegisterTaskDefinitionRequest) error {
	family := m.GetFamily()
	if family == "" {
		return awserr.Clientf("Family should not be null or empty.")
	}
	if !ecsrules.ValidName(family) {
		return awserr.Clientf("Family can have up to 255 characters. Valid characters are letters (uppercase and lowercase), numbers, underscores, and hyphens.")
	}
	if len(m.GetContainerDefinitions()) == 0 {
		return awserr.Clientf("Container list cannot be empty.")
	}
	if len(m.GetContainerDefinitions()) > maxContainers {
		return awserr.Clientf("Too many containers: a task definition can have at most %d container definitions.", maxContainers)
	}
	if err := ecsrules.ValidateTags(m.GetTags()); err != nil {
		return err
	}
	return checkTaskDefinitionSize(m)
}

// newTaskDefinition copies the request's task-level settings into a task definition,
// with the empty lists AWS always shows (volumes, placementConstraints,
// requiresAttributes). Its containers, cpu, memory and compatibilities are set by the
// phases after it.
func newTaskDefinition(m *ecsv1.RegisterTaskDefinitionRequest) *ecsv1.TaskDefinition {
	td := &ecsv1.TaskDefinition{
		Family:                  proto.String(m.GetFamily()),
		TaskRoleArn:             optionalString(m.TaskRoleArn),
		ExecutionRoleArn:        optionalString(m.ExecutionRoleArn),
		NetworkMode:             m.NetworkMode,
		Volumes:                 m.GetVolumes(),
		PlacementConstraints:    m.GetPlacementConstraints(),
		RequiresCompatibilities: m.GetRequiresCompatibilities(),
		PidMode:                 m.PidMode,
		IpcMode:                 m.IpcMode,
		ProxyConfiguration:      m.GetProxyConfiguration(),
		InferenceAccelerators:   m.GetInferenceAccelerators(),
		EphemeralStorage:        m.GetEphemeralStorage(),
		RuntimePlatform:         m.GetRuntimePlatform(),
		EnableFaultInjection:    m.EnableFaultInjection,
		RequiresAttributes:      []*ecsv1.Attribute{},
	}
	if td.Volumes == nil {
		td.Volumes = []*ecsv1.Volume{}
	}
	if td.PlacementConstraints == nil {
		td.PlacementConstraints = []*ecsv1.TaskDefinitionPlacementConstraint{}
	}
	return td
}

// resolveTaskModes checks the task's networkMode (defaulting it to bridge, the EC2
// default, on td), pidMode, ipcMode and requiresCompatibilities, and returns the network
// mode.
func resolveTaskModes(td *ecsv1.TaskDefinition, m *ecsv1.RegisterTaskDefinitionRequest) (string, error) {
	mode := m.GetNetworkMode()
	if m.NetworkMode == nil {
		mode = "bridge"
		td.NetworkMode = proto.String(mode)
	}
	if !oneOf(mode, "bridge", "host", "awsvpc", "none") {
		return "", awserr.Clientf("Invalid networkMode %q: valid values are bridge, host, awsvpc and none.", mode)
	}
	if m.PidMode != nil && !oneOf(m.GetPidMode(), "host", "task") {
		return "", awserr.Clientf("Invalid pidMode %q: valid values are host and task.", m.GetPidMode())
	}
	if m.IpcMode != nil && !oneOf(m.GetIpcMode(), "host", "task", "none") {
		return "", awserr.Clientf("Invalid ipcMode %q: valid values are host, task and none.", m.GetIpcMode())
	}
	for _, c := range m.GetRequiresCompatibilities() {
		if !oneOf(c, "EC2", "FARGATE", "EXTERNAL", "MANAGED_INSTANCES") {
			return "", awserr.Clientf("Invalid requiresCompatibilities value %q.", c)
		}
	}
	return mode, nil
}

// resolveTaskSize checks the task-level cpu and memory and sets them on td in AWS's
// normal form (units and MiB); it returns the task's memory in MiB, 0 when unset.
func resolveTaskSize(td *ecsv1.TaskDefinition, m *ecsv1.RegisterTaskDefinitionRequest) (int, error) {
	if m.Cpu != nil {
		v, ok := normalizeCPU(m.GetCpu())
		if !ok {
			return 0, taskCPUError()
		}
		td.Cpu = proto.String(v)
	}
	taskMem := 0
	if m.Memory != nil {
		v, ok := normalizeMemory(m.GetMemory())
		if !ok {
			return 0, taskMemoryError(m.GetMemory())
		}
		td.Memory = proto.String(v)
		taskMem, _ = strconv.Atoi(v)
	}
	return taskMem, nil
}

// resolveCompatibilities sets td's compatibilities. They list FARGATE when the definition
// meets Fargate's rules, whether or not it requires them (as AWS computes it); requiring
// FARGATE of one that does not is refused with the rule it breaks.
func resolveCompatibilities(td *ecsv1.TaskDefinition, m *ecsv1.RegisterTaskDefinitionRequest, mode string) error {
	fargate := oneOf("FARGATE", m.GetRequiresCompatibilities()...)
	if fargate {
		if mode != "awsvpc" {
			return awserr.Clientf("Fargate only supports network mode 'awsvpc'.")
		}
		if td.Cpu == nil {
			return awserr.Clientf("Fargate requires that 'cpu' be defined at the task level.")
		}
		if td.Memory == nil {
			return awserr.Clientf("Fargate requires that 'memory' be defined at the task level.")
		}
	}
	td.Compatibilities = []string{"EC2", "EXTERNAL"}
	why, err := fargateIncompatibility(td, m.GetContainerDefinitions())
	switch {
	case err != nil && fargate:
		return err
	case why != "" && fargate:
		return awserr.Clientf("%s", why)
	case err == nil && why == "":
		td.Compatibilities = []string{"EC2", "EXTERNAL", "FARGATE"}
	}
	return nil
}

// checkEFSVolume checks an efsVolumeConfiguration as RegisterTaskDefinition does (API
// reference, EFSVolumeConfiguration and EFSAuthorizationConfig): a fileSystemId; with an
// access point, rootDirectory omitted or "/" and transit encryption ENABLED; with IAM
// authorization, transit encryption ENABLED; enum values; transitEncryptionPort a port.
// Berth also refuses a rootDirectory with a ".." element, which would leave the export.
// What Berth cannot honour (transit encryption, access points, IAM) is CheckFields'
// (FieldRules), after these.
func checkEFSVolume(name string, ev *ecsv1.EFSVolumeConfiguration) error {
	if ev.GetFileSystemId() == "" {
		return awserr.Clientf("Invalid 'efsVolumeConfiguration' setting for volume '%s'. fileSystemId should not be null or empty.", name)
	}
	if ev.TransitEncryption != nil && !oneOf(ev.GetTransitEncryption(), "ENABLED", "DISABLED") {
		return awserr.Clientf("Invalid 'efsVolumeConfiguration.transitEncryption' setting for volume '%s': valid values are ENABLED and DISABLED.", name)
	}
	auth := ev.GetAuthorizationConfig()
	if auth.GetIam() != "" && !oneOf(auth.GetIam(), "ENABLED", "DISABLED") {
		return awserr.Clientf("Invalid 'efsVolumeConfiguration.authorizationConfig.iam' setting for volume '%s': valid values are ENABLED and DISABLED.", name)
	}
	encrypted := ev.GetTransitEncryption() == "ENABLED"
	if auth.GetAccessPointId() != "" {
		if ev.GetRootDirectory() != "" && ev.GetRootDirectory() != "/" {
			return awserr.Clientf("Invalid request provided: Create TaskDefinition: When using an EFS access point, the root directory must either be set to \"/\" or be omitted (volume '%s').", name)
		}
		if !encrypted {
			return awserr.Clientf("Invalid request provided: Create TaskDefinition: Transit encryption must be enabled when using an EFS access point (volume '%s').", name)
		}
	}
	if auth.GetIam() == "ENABLED" && !encrypted {
		return awserr.Clientf("Invalid request provided: Create TaskDefinition: Transit encryption must be enabled when using EFS IAM authorization (volume '%s').", name)
	}
	if ev.TransitEncryptionPort != nil && (ev.GetTransitEncryptionPort() < 1 || ev.GetTransitEncryptionPort() > 65535) {
		return awserr.Clientf("Invalid 'efsVolumeConfiguration.transitEncryptionPort' setting for volume '%s': %d is not a port (1-65535).", name, ev.GetTransitEncryptionPort())
	}
	for _, elem := range strings.Split(ev.GetRootDirectory(), "/") {
		if elem == ".." {
			return awserr.Clientf("Invalid 'efsVolumeConfiguration.rootDirectory' setting for volume '%s'. The root directory must not contain \"..\": it names a directory within the file system.", name)
		}
	}
	return nil
}

// checkVolumes checks the task's volumes (unique names; one of host,
// dockerVolumeConfiguration and efsVolumeConfiguration, each valid) and returns their names, which the
// containers' mountPoints must name.
func checkVolumes(vols []*ecsv1.Volume) (map[string]bool, error) {
	volumes := map[string]bool{}
	for _, v := range vols {
		if v == nil || v.GetName() == "" {
			return nil, awserr.Clientf("Volume name should not be null or empty.")
		}
		if volumes[v.GetName()] {
			return nil, awserr.Clientf("Volume names must be unique: %q is used twice.", v.GetName())
		}
		volumes[v.GetName()] = true
		if dv := v.GetDockerVolumeConfiguration(); dv != nil {
			if v.GetHost() != nil {
				return nil, awserr.Clientf("Invalid setting for volume '%s'. Specify either host or dockerVolumeConfiguration, not both.", v.GetName())
			}
			if dv.Scope != nil && !oneOf(dv.GetScope(), "task", "shared") {
				return nil, awserr.Clientf("Invalid 'dockerVolumeConfiguration.scope' setting for volume '%s': valid values are task and shared.", v.GetName())
			}
			if dv.GetAutoprovision() && dv.GetScope() != "shared" {
				return nil, awserr.Clientf("Invalid 'dockerVolumeConfiguration' setting for volume '%s'. Autoprovision can only be true when scope is shared.", v.GetName())
			}
			if err := validateDriverOpts(v.GetName(), dv.GetDriverOpts()); err != nil {
				return nil, err
			}
		}
		if ev := v.GetEfsVolumeConfiguration(); ev != nil {
			if v.GetHost() != nil || v.GetDockerVolumeConfiguration() != nil {
				return nil, awserr.Clientf("Invalid setting for volume '%s'. Specify only one of host, dockerVolumeConfiguration and efsVolumeConfiguration.", v.GetName())
			}
			if err := checkEFSVolume(v.GetName(), ev); err != nil {
				return nil, err
			}
		}
		if v.GetHost() != nil && v.GetHost().SourcePath != nil && !strings.HasPrefix(v.GetHost().GetSourcePath(), "/") {
			return nil, awserr.Clientf("Invalid 'host.sourcePath' setting for volume '%s'. The source path must be an absolute path on the container instance.", v.GetName())
		}
	}
	return volumes, nil
}

// containerSet checks a task definition's containers one at a time, in the request's
// order, keeping what a container's checks need from the task and from the containers
// before it: names and host ports must be unique across the task, and the task needs an
// essential container and room for the containers' memory.
type containerSet struct {
	mode, ipcMode string          // the task's networkMode (resolved) and ipcMode
	volumes       map[string]bool // the task's volume names
	taskMem       int             // the task's memory in MiB (0 when unset)
	taskMemSet    bool            // the task sets memory
	names         map[string]bool // the containers' names so far
	hostPorts     map[string]bool // "protocol/port" of the host ports so far
	essential     bool            // some container so far is essential
	memSum        int             // the containers' memory so far, MiB
}

// add checks the i-th container definition of the request and returns a copy with AWS's
// defaults filled in (essential true; the empty lists AWS always shows; port mappings'
// protocol, and their host port where the network mode fixes it).
func (cs *containerSet) add(i int, in *ecsv1.ContainerDefinition) (*ecsv1.ContainerDefinition, error) {
	if in == nil {
		return nil, awserr.Clientf("Container definition %d is empty.", i)
	}
	c := proto.Clone(in).(*ecsv1.ContainerDefinition)
	name := c.GetName()
	if err := cs.checkName(name); err != nil {
		return nil, err
	}
	if strings.TrimSpace(c.GetImage()) == "" {
		return nil, awserr.Clientf("Container.image should not be null or empty.")
	}
	if c.Essential == nil {
		c.Essential = proto.Bool(true)
	}
	cs.essential = cs.essential || c.GetEssential()
	if err := cs.checkResources(c); err != nil {
		return nil, err
	}
	if err := checkPortRanges(name, cs.mode, c.GetPortMappings()); err != nil {
		return nil, err
	}
	for _, pm := range c.GetPortMappings() {
		if err := cs.checkPortMapping(name, pm); err != nil {
			return nil, err
		}
	}
	if err := cs.checkMountPoints(name, c.GetMountPoints()); err != nil {
		return nil, err
	}
	if c.StartTimeout != nil && c.GetStartTimeout() < 0 {
		return nil, awserr.Clientf("Invalid 'startTimeout' setting for container '%s'. The value must be 0 or more seconds.", name)
	}
	if err := validateLinuxParameters(name, c.Memory != nil, c.GetLinuxParameters()); err != nil {
		return nil, err
	}
	if err := validateSystemControls(name, cs.ipcMode, cs.mode, c.GetSystemControls()); err != nil {
		return nil, err
	}
	if err := checkRestartPolicy(name, c.GetRestartPolicy()); err != nil {
		return nil, err
	}
	if err := validateResourceRequirements(ClientErr, "container '"+name+"'", c.GetResourceRequirements()); err != nil {
		return nil, err
	}
	fillContainerLists(c)
	return c, nil
}

// checkName checks a container's name: set, valid and not used by a container before it.
func (cs *containerSet) checkName(name string) error {
	if name == "" {
		return awserr.Clientf("Container.name should not be null or empty.")
	}
	if !ecsrules.ValidName(name) {
		return awserr.Clientf("Container name can have up to 255 characters. Valid characters are letters (uppercase and lowercase), numbers, underscores, and hyphens: %q.", name)
	}
	if cs.names[name] {
		return awserr.Clientf("Container names must be unique within a task definition: %q is used twice.", name)
	}
	cs.names[name] = true
	return nil
}

// checkResources checks a container's cpu and memory settings, on their own and against
// the task's memory, and counts its memory towards the task's.
func (cs *containerSet) checkResources(c *ecsv1.ContainerDefinition) error {
	name := c.GetName()
	if c.GetCpu() < 0 {
		return awserr.Clientf("Invalid 'cpu' setting for container '%s'.", name)
	}
	if c.Memory == nil && c.MemoryReservation == nil && !cs.taskMemSet {
		return awserr.Clientf("Invalid setting for container '%s'. At least one of 'memory' or 'memoryReservation' must be specified.", name)
	}
	if c.Memory != nil && c.GetMemory() < 6 {
		return awserr.Clientf("Invalid 'memory' setting for container '%s'. The minimum is 6 MiB.", name)
	}
	if c.MemoryReservation != nil && c.GetMemoryReservation() < 6 {
		return awserr.Clientf("Invalid 'memoryReservation' setting for container '%s'. The minimum is 6 MiB.", name)
	}
	if err := checkContainerMemory(ClientErr, name, c.Memory, c.MemoryReservation, cs.taskMem); err != nil {
		return err
	}
	cs.memSum += containerMemoryMiB(c.Memory, c.MemoryReservation)
	return nil
}

// checkPortMapping checks one port mapping of container name and fills its defaults in
// place: protocol tcp, and (awsvpc and host, where the container's port is the host's)
// the host port. A host port may be mapped once per protocol in the whole task.
func (cs *containerSet) checkPortMapping(name string, pm *ecsv1.PortMapping) error {
	mode := cs.mode
	if pm == nil {
		return awserr.Clientf("Invalid port mapping for container '%s'.", name)
	}
	if pm.Protocol == nil {
		pm.Protocol = proto.String("tcp")
	}
	if !oneOf(pm.GetProtocol(), "tcp", "udp") {
		return awserr.Clientf("Invalid protocol %q for container '%s': valid values are tcp and udp.", pm.GetProtocol(), name)
	}
	if pm.ContainerPort == nil && pm.ContainerPortRange == nil {
		return awserr.Clientf("Invalid port mapping for container '%s': containerPort or containerPortRange is required.", name)
	}
	if pm.ContainerPort != nil && (pm.GetContainerPort() < 1 || pm.GetContainerPort() > 65535) {
		return awserr.Clientf("Invalid containerPort %d for container '%s': ports are 1-65535.", pm.GetContainerPort(), name)
	}
	if pm.GetHostPort() < 0 || pm.GetHostPort() > 65535 {
		return awserr.Clientf("Invalid hostPort %d for container '%s': ports are 0-65535.", pm.GetHostPort(), name)
	}
	if (mode == "awsvpc" || mode == "host") && pm.ContainerPort != nil {
		if pm.HostPort != nil && pm.GetHostPort() != pm.GetContainerPort() {
			return awserr.Clientf("When networkMode=%s, the host ports and container ports in port mappings must match.", mode)
		}
		pm.HostPort = proto.Int32(pm.GetContainerPort())
	}
	if mode == "none" {
		return awserr.Clientf("Port mappings are not allowed when networkMode=none.")
	}
	if hp := pm.GetHostPort(); hp > 0 {
		k := pm.GetProtocol() + "/" + strconv.Itoa(int(hp))
		if cs.hostPorts[k] {
			return awserr.Clientf("Invalid port mappings: host port %d/%s is used twice in the task definition.", hp, pm.GetProtocol())
		}
		cs.hostPorts[k] = true
	}
	return nil
}

// checkMountPoints checks that container name's mount points name volumes of the task
// and mount them at absolute paths.
func (cs *containerSet) checkMountPoints(name string, mps []*ecsv1.MountPoint) error {
	for _, mp := range mps {
		if mp.GetSourceVolume() == "" {
			return awserr.Clientf("Invalid 'mountPoints' setting for container '%s'. sourceVolume should not be null or empty.", name)
		}
		if !cs.volumes[mp.GetSourceVolume()] {
			return awserr.Clientf("Invalid 'mountPoints' setting for container '%s'. Unknown volume '%s'.", name, mp.GetSourceVolume())
		}
		if !strings.HasPrefix(mp.GetContainerPath(), "/") {
			return awserr.Clientf("Invalid 'mountPoints' setting for container '%s'. containerPath must be an absolute path: %q.", name, mp.GetContainerPath())
		}
	}
	return nil
}

// checkRestartPolicy checks container name's restartPolicy (nil for none) against ECS's
// bounds.
func checkRestartPolicy(name string, rp *ecsv1.ContainerRestartPolicy) error {
	if rp == nil {
		return nil
	}
	if rp.Enabled == nil {
		return awserr.Clientf("Invalid 'restartPolicy' setting for container '%s'. enabled is required.", name)
	}
	if rp.RestartAttemptPeriod != nil && (rp.GetRestartAttemptPeriod() < 60 || rp.GetRestartAttemptPeriod() > 1800) {
		return awserr.Clientf("Invalid 'restartPolicy' setting for container '%s'. restartAttemptPeriod must be between 60 and 1800 seconds.", name)
	}
	if len(rp.GetIgnoredExitCodes()) > 50 {
		return awserr.Clientf("Invalid 'restartPolicy' setting for container '%s'. ignoredExitCodes can hold at most 50 exit codes.", name)
	}
	return nil
}

// fillContainerLists sets the lists a registered container definition holds even when
// empty, as AWS shows them: portMappings, environment, mountPoints, volumesFrom and
// systemControls.
func fillContainerLists(c *ecsv1.ContainerDefinition) {
	if c.PortMappings == nil {
		c.PortMappings = []*ecsv1.PortMapping{}
	}
	if c.Environment == nil {
		c.Environment = []*ecsv1.KeyValuePair{}
	}
	if c.MountPoints == nil {
		c.MountPoints = []*ecsv1.MountPoint{}
	}
	if c.VolumesFrom == nil {
		c.VolumesFrom = []*ecsv1.VolumeFrom{}
	}
	if c.SystemControls == nil {
		c.SystemControls = []*ecsv1.SystemControl{}
	}
}

// checkContainerReferences checks what containers say about each other, once all are
// known: links and the other network fields (checkNetworkFields), volumesFrom and
// dependsOn name other containers of the task.
func checkContainerReferences(mode string, ctrs []*ecsv1.ContainerDefinition, names map[string]bool) error {
	for _, c := range ctrs {
		if err := checkNetworkFields(mode, c, names); err != nil {
			return err
		}
		for _, vf := range c.GetVolumesFrom() {
			if src := vf.GetSourceContainer(); !names[src] || src == c.GetName() {
				return awserr.Clientf("Invalid 'volumesFrom' setting for container '%s'. Unknown source container '%s'.", c.GetName(), src)
			}
		}
		for _, d := range c.GetDependsOn() {
			if !names[d.GetContainerName()] {
				return awserr.Clientf("Invalid 'dependsOn' setting for container '%s'. Unknown container '%s'.", c.GetName(), d.GetContainerName())
			}
			if !oneOf(d.GetCondition(), "START", "COMPLETE", "SUCCESS", "HEALTHY") {
				return awserr.Clientf("Invalid 'dependsOn' condition %q for container '%s'.", d.GetCondition(), c.GetName())
			}
		}
	}
	return nil
}

// RegisterTaskDefinition validates a task definition, fills AWS's defaults and registers
// it as the next revision of its family: revisions start at 1 and never repeat, even
// after deregistration and under concurrent registration (the family's counter is
// written in the same transaction as the revision). Errors: ClientException for an
// invalid definition, InvalidParameterException for bad tags.
// AWS reference: RegisterTaskDefinition.
func (s *Server) RegisterTaskDefinition(ctx context.Context, req *connect.Request[ecsv1.RegisterTaskDefinitionRequest]) (*connect.Response[ecsv1.RegisterTaskDefinitionResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.RegisterTaskDefinitionRequest) (*ecsv1.RegisterTaskDefinitionResponse, error) {
		td, err := buildTaskDefinition(m)
		if err != nil {
			return nil, err
		}
		if err := CheckFields(ClientErr, m); err != nil {
			return nil, err
		}
		for i, cd := range m.GetContainerDefinitions() {
			if err := checkLogConfiguration(i, cd.GetLogConfiguration()); err != nil {
				return nil, err
			}
		}
		td.Status = proto.String(statusActive)
		td.RegisteredBy = proto.String(rootARN(account))
		tags := mergeTags(nil, m.GetTags())
		family := td.GetFamily()
		fkey := keys.Family(account, family)
		err = awsapi.Retry(ctx, func() error {
			fam, frev, err := get[*storev1.FamilyRecord](ctx, s.kv, fkey)
			if err != nil {
				return err
			}
			if fam == nil {
				fam = &storev1.FamilyRecord{Family: family}
			}
			rev := int(fam.GetLastRevision()) + 1
			wasActive := fam.GetActiveRevisions() > 0
			fam.LastRevision = int32(rev)
			fam.ActiveRevisions++
			td.Revision = int32(rev)
			td.TaskDefinitionArn = proto.String(arn.TaskDefinitionARN(account.Region, account.Account, family, rev))
			td.RegisteredAt = s.nowEpoch()
			txn := store.NewTxn(s.kv)
			if frev == 0 {
				txn.Create(fkey, fam)
			} else {
				txn.Update(fkey, frev, fam)
			}
			txn.Create(keys.TaskDefinition(account, family, rev), &storev1.TaskDefinitionRecord{TaskDefinition: td, Tags: tags})
			txn.PutIndex(keys.TaskDefinitionByStatus(account, statusActive, family, rev))
			if !wasActive {
				txn.PutIndex(keys.FamilyByStatus(account, statusActive, family))
				txn.Delete(keys.FamilyByStatus(account, statusInactive, family))
			}
			_, err = txn.Commit(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.RegisterTaskDefinitionResponse{TaskDefinition: td, Tags: tags}, nil
	})
}

// parseTaskDefRef splits a task definition reference (family, family:revision or ARN)
// into family and revision (0 when only the family is given). ok is false when it cannot
// name a task definition of account.
func parseTaskDefRef(account keys.Scope, ref string) (family string, revision int, ok bool) {
	if arn.IsARN(ref) {
		a, err := arn.Parse(ref)
		if err != nil || a.Type != arn.TaskDefinition || !account.Owns(a.Partition, a.Account, a.Region) {
			return "", 0, false
		}
		return a.Name, a.Revision, ecsrules.ValidName(a.Name)
	}
	family, rev, hasRev := strings.Cut(ref, ":")
	if !ecsrules.ValidName(family) {
		return "", 0, false
	}
	if !hasRev {
		return family, 0, true
	}
	n, err := strconv.Atoi(rev)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return family, n, true
}

// taskDefinition resolves a reference to a stored revision: family alone means its
// latest ACTIVE revision. It returns a nil record when there is none.
func (s *Server) taskDefinition(ctx context.Context, account keys.Scope, ref string) (*storev1.TaskDefinitionRecord, int64, error) {
	return LookupTaskDefinition(ctx, s.kv, account, ref)
}

// LookupTaskDefinition resolves a task definition reference of account (family — its
// latest ACTIVE revision —, family:revision or ARN) to the stored revision, whatever its
// status: nil when there is none or the reference cannot name one.
func LookupTaskDefinition(ctx context.Context, kv clientv3.KV, account keys.Scope, ref string) (*storev1.TaskDefinitionRecord, int64, error) {
	family, rev, ok := parseTaskDefRef(account, ref)
	if !ok {
		return nil, 0, nil
	}
	if rev == 0 {
		resp, err := kv.Do(ctx, latestActiveOp(account, family))
		if err != nil {
			return nil, 0, err
		}
		if rev = latestActiveRevision(resp.Get().Kvs); rev == 0 {
			return nil, 0, nil
		}
	}
	return get[*storev1.TaskDefinitionRecord](ctx, kv, keys.TaskDefinition(account, family, rev))
}

// latestActiveOp reads the key of family's highest ACTIVE revision (keys only), for
// latestActiveRevision.
func latestActiveOp(account keys.Scope, family string) clientv3.Op {
	prefix := keys.TaskDefinitionByStatus(account, statusActive, family, 0)
	return clientv3.OpGet(prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(1),
		clientv3.WithKeysOnly(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
}

// latestActiveRevision returns the revision latestActiveOp's answer kvs names; 0 when
// the family has no ACTIVE revision.
func latestActiveRevision(kvs []*mvccpb.KeyValue) int {
	if len(kvs) == 0 {
		return 0
	}
	rev, _ := strconv.Atoi(lastPart(string(kvs[0].Key)))
	return rev
}

// RunnableTaskDefinition resolves a task definition reference (family — its latest
// ACTIVE revision —, family:revision or ARN) of account to a revision that can start
// tasks, as RunTask, StartTask and CreateService do. Errors: ClientException
// "TaskDefinition not found." for an unknown one, InvalidParameterException
// "TaskDefinition is inactive" for one deregistered or being deleted (AWS's answers).
func RunnableTaskDefinition(ctx context.Context, kv clientv3.KV, account keys.Scope, ref string) (*storev1.TaskDefinitionRecord, error) {
	if ref == "" {
		return nil, awserr.InvalidParameterf("taskDefinition is required.")
	}
	rec, _, err := LookupTaskDefinition(ctx, kv, account, ref)
	if err != nil {
		return nil, err
	}
	if err := checkRunnable(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// checkRunnable returns RunTask's error for a task definition record that cannot run:
// ClientException "TaskDefinition not found." for nil (absent), InvalidParameterException
// "TaskDefinition is inactive" unless ACTIVE.
func checkRunnable(rec *storev1.TaskDefinitionRecord) error {
	if rec == nil {
		return awserr.Clientf("TaskDefinition not found.")
	}
	if rec.GetTaskDefinition().GetStatus() != statusActive {
		return awserr.InvalidParameterf("TaskDefinition is inactive")
	}
	return nil
}

// DescribeTaskDefinition describes a task definition by family (its latest ACTIVE
// revision), family:revision or ARN; INACTIVE and DELETE_IN_PROGRESS revisions are
// described too. include TAGS adds its tags. Errors: ClientException "Unable to describe
// task definition." for an unknown one. AWS reference: DescribeTaskDefinition.
func (s *Server) DescribeTaskDefinition(ctx context.Context, req *connect.Request[ecsv1.DescribeTaskDefinitionRequest]) (*connect.Response[ecsv1.DescribeTaskDefinitionResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DescribeTaskDefinitionRequest) (*ecsv1.DescribeTaskDefinitionResponse, error) {
		if m.GetTaskDefinition() == "" {
			return nil, awserr.Clientf("taskDefinition is required.")
		}
		rec, _, err := s.taskDefinition(ctx, account, m.GetTaskDefinition())
		if err != nil {
			return nil, err
		}
		if rec == nil {
			return nil, awserr.Clientf("Unable to describe task definition.")
		}
		resp := &ecsv1.DescribeTaskDefinitionResponse{TaskDefinition: rec.GetTaskDefinition()}
		if oneOf("TAGS", m.GetInclude()...) {
			resp.Tags = rec.GetTags()
			if resp.Tags == nil {
				resp.Tags = []*ecsv1.Tag{}
			}
		}
		return resp, nil
	})
}

// DeregisterTaskDefinition marks a revision (family:revision or ARN) INACTIVE; it stays
// describable and its revision number is never reused. Deregistering an INACTIVE revision
// returns it unchanged. Errors: ClientException for a missing revision number or an
// unknown revision. AWS reference: DeregisterTaskDefinition.
func (s *Server) DeregisterTaskDefinition(ctx context.Context, req *connect.Request[ecsv1.DeregisterTaskDefinitionRequest]) (*connect.Response[ecsv1.DeregisterTaskDefinitionResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeregisterTaskDefinitionRequest) (*ecsv1.DeregisterTaskDefinitionResponse, error) {
		family, rev, ok := parseTaskDefRef(account, m.GetTaskDefinition())
		if !ok {
			return nil, awserr.Clientf("The specified task definition does not exist.")
		}
		if rev == 0 {
			return nil, awserr.Clientf("Revision must be specified as family:revision or as a full task definition ARN.")
		}
		var out *ecsv1.TaskDefinition
		err := awsapi.Retry(ctx, func() error {
			tkey, fkey := keys.TaskDefinition(account, family, rev), keys.Family(account, family)
			rec, trev, err := get[*storev1.TaskDefinitionRecord](ctx, s.kv, tkey)
			if err != nil {
				return err
			}
			if rec == nil {
				return awserr.Clientf("The specified task definition does not exist.")
			}
			out = rec.GetTaskDefinition()
			if out.GetStatus() != statusActive {
				return nil
			}
			fam, frev, err := get[*storev1.FamilyRecord](ctx, s.kv, fkey)
			if err != nil {
				return err
			}
			if fam == nil {
				return awsapi.ErrRetry
			}
			out.Status = proto.String(statusInactive)
			out.DeregisteredAt = s.nowEpoch()
			fam.ActiveRevisions = max(fam.GetActiveRevisions()-1, 0)
			txn := store.NewTxn(s.kv).
				Update(tkey, trev, rec).
				Update(fkey, frev, fam).
				Delete(keys.TaskDefinitionByStatus(account, statusActive, family, rev)).
				PutIndex(keys.TaskDefinitionByStatus(account, statusInactive, family, rev))
			if fam.ActiveRevisions == 0 {
				txn.Delete(keys.FamilyByStatus(account, statusActive, family)).
					PutIndex(keys.FamilyByStatus(account, statusInactive, family))
			}
			_, err = txn.Commit(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		return &ecsv1.DeregisterTaskDefinitionResponse{TaskDefinition: out}, nil
	})
}

// DeleteTaskDefinitions moves up to 10 INACTIVE revisions to DELETE_IN_PROGRESS and
// returns them; ACTIVE or unknown ones come back in failures. A revision in
// DELETE_IN_PROGRESS is returned again. AWS reference: DeleteTaskDefinitions.
func (s *Server) DeleteTaskDefinitions(ctx context.Context, req *connect.Request[ecsv1.DeleteTaskDefinitionsRequest]) (*connect.Response[ecsv1.DeleteTaskDefinitionsResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.DeleteTaskDefinitionsRequest) (*ecsv1.DeleteTaskDefinitionsResponse, error) {
		if len(m.GetTaskDefinitions()) == 0 || len(m.GetTaskDefinitions()) > 10 {
			return nil, awserr.InvalidParameterf("taskDefinitions must list between 1 and 10 task definitions.")
		}
		resp := &ecsv1.DeleteTaskDefinitionsResponse{TaskDefinitions: []*ecsv1.TaskDefinition{}, Failures: []*ecsv1.Failure{}}
		for _, ref := range m.GetTaskDefinitions() {
			fail := func(reason string) {
				resp.Failures = append(resp.Failures, &ecsv1.Failure{Arn: proto.String(ref), Reason: proto.String(reason)})
			}
			family, rev, ok := parseTaskDefRef(account, ref)
			if !ok || rev == 0 {
				fail("The specified task definition identifier is invalid. Specify a valid name or ARN and try again.")
				continue
			}
			var out *ecsv1.TaskDefinition
			reason := ""
			err := awsapi.Retry(ctx, func() error {
				out, reason = nil, ""
				tkey := keys.TaskDefinition(account, family, rev)
				rec, trev, err := get[*storev1.TaskDefinitionRecord](ctx, s.kv, tkey)
				if err != nil {
					return err
				}
				if rec == nil {
					reason = "The specified task definition does not exist."
					return nil
				}
				td := rec.GetTaskDefinition()
				switch td.GetStatus() {
				case statusActive:
					reason = "The specified task definition is still in ACTIVE status. Please deregister the target and try again."
					return nil
				case statusDeleteInProg:
					out = td
					return nil
				}
				td.Status = proto.String(statusDeleteInProg)
				td.DeleteRequestedAt = s.nowEpoch()
				_, err = store.NewTxn(s.kv).
					Update(tkey, trev, rec).
					Delete(keys.TaskDefinitionByStatus(account, statusInactive, family, rev)).
					PutIndex(keys.TaskDefinitionByStatus(account, statusDeleteInProg, family, rev)).
					Commit(ctx)
				out = td
				return err
			})
			if err != nil {
				return nil, err
			}
			if reason != "" {
				fail(reason)
				continue
			}
			resp.TaskDefinitions = append(resp.TaskDefinitions, out)
		}
		return resp, nil
	})
}

// ListTaskDefinitions lists task definition ARNs of a status (ACTIVE by default;
// INACTIVE, DELETE_IN_PROGRESS), optionally of one family (familyPrefix is the full
// family name, as AWS documents), by family then revision, ASC (default) or DESC;
// maxResults 1–100 and nextToken page in O(maxResults). Families sort by their index
// keys ("family/revision"), so a family that extends another with '-' (web-api) lists
// before it (web), where AWS sorts web first. AWS reference: ListTaskDefinitions.
func (s *Server) ListTaskDefinitions(ctx context.Context, req *connect.Request[ecsv1.ListTaskDefinitionsRequest]) (*connect.Response[ecsv1.ListTaskDefinitionsResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListTaskDefinitionsRequest) (*ecsv1.ListTaskDefinitionsResponse, error) {
		limit, err := maxResults(m.MaxResults)
		if err != nil {
			return nil, err
		}
		status := statusActive
		if m.Status != nil {
			status = m.GetStatus()
			if !oneOf(status, statusActive, statusInactive, statusDeleteInProg) {
				return nil, awserr.InvalidParameterf("Invalid status %q: valid values are ACTIVE, INACTIVE and DELETE_IN_PROGRESS.", status)
			}
		}
		if m.Sort != nil && !oneOf(m.GetSort(), "ASC", "DESC") {
			return nil, awserr.InvalidParameterf("Invalid sort %q: valid values are ASC and DESC.", m.GetSort())
		}
		resp := &ecsv1.ListTaskDefinitionsResponse{TaskDefinitionArns: []string{}}
		prefix := keys.TaskDefinitionByStatus(account, status, "", 0)
		if fam := m.GetFamilyPrefix(); fam != "" {
			if !ecsrules.ValidName(fam) {
				return resp, nil
			}
			prefix = keys.TaskDefinitionByStatus(account, status, fam, 0)
		}
		ks, next, err := pageKeys(ctx, s.kv, prefix, limit, m.GetNextToken(), m.GetSort() == "DESC")
		if err != nil {
			return nil, err
		}
		for _, k := range ks {
			parts := strings.Split(k, "/")
			rev, _ := strconv.Atoi(parts[len(parts)-1])
			resp.TaskDefinitionArns = append(resp.TaskDefinitionArns, arn.TaskDefinitionARN(account.Region, account.Account, parts[len(parts)-2], rev))
		}
		if next != "" {
			resp.NextToken = proto.String(next)
		}
		return resp, nil
	})
}

// ListTaskDefinitionFamilies lists family names starting with familyPrefix (a true
// prefix), of status ACTIVE (has an ACTIVE revision), INACTIVE (has none) or ALL (the
// default), in name order; maxResults 1–100 and nextToken page in O(maxResults).
// AWS reference: ListTaskDefinitionFamilies.
func (s *Server) ListTaskDefinitionFamilies(ctx context.Context, req *connect.Request[ecsv1.ListTaskDefinitionFamiliesRequest]) (*connect.Response[ecsv1.ListTaskDefinitionFamiliesResponse], error) {
	return awsapi.Handle(ctx, s.log, req, func(ctx context.Context, account keys.Scope, m *ecsv1.ListTaskDefinitionFamiliesRequest) (*ecsv1.ListTaskDefinitionFamiliesResponse, error) {
		limit, err := maxResults(m.MaxResults)
		if err != nil {
			return nil, err
		}
		status := "ALL"
		if m.Status != nil {
			status = m.GetStatus()
		}
		var within string
		switch status {
		case "ALL":
			within = keys.Families(account)
		case statusActive, statusInactive:
			within = keys.FamilyByStatus(account, status, "")
		default:
			return nil, awserr.InvalidParameterf("Invalid status %q: valid values are ACTIVE, INACTIVE and ALL.", status)
		}
		resp := &ecsv1.ListTaskDefinitionFamiliesResponse{Families: []string{}}
		if p := m.GetFamilyPrefix(); p != "" {
			if strings.ContainsAny(p, "/\x00") {
				return resp, nil
			}
			within += p
		}
		ks, next, err := pageKeys(ctx, s.kv, within, limit, m.GetNextToken(), false)
		if err != nil {
			return nil, err
		}
		for _, k := range ks {
			resp.Families = append(resp.Families, lastPart(k))
		}
		if next != "" {
			resp.NextToken = proto.String(next)
		}
		return resp, nil
	})
}

// validateDriverOpts checks a local Docker volume's driverOpts as Docker's local driver
// takes them: only type, device and o, with type and device together (the volume is then
// that mount: "mount -t type -o o device"). No options at all is a plain directory.
func validateDriverOpts(volume string, opts map[string]string) error {
	if len(opts) == 0 {
		return nil
	}
	for k := range opts {
		if !oneOf(k, "type", "device", "o") {
			return awserr.Clientf("Invalid 'dockerVolumeConfiguration.driverOpts' setting for volume '%s'. Unknown option %q: the local driver takes type, device and o.", volume, k)
		}
	}
	if opts["type"] == "" || opts["device"] == "" {
		return awserr.Clientf("Invalid 'dockerVolumeConfiguration.driverOpts' setting for volume '%s'. The local driver needs both type and device (and optionally o), as mount -t type -o o device.", volume)
	}
	return nil
}

// checkNetworkFields refuses the container settings AWS refuses for the task's
// networkMode: links outside bridge mode or naming no container of the task, hostname
// and extraHosts with awsvpc, disableNetworking with a shared namespace (host, awsvpc) or
// with port mappings.
func checkNetworkFields(mode string, c *ecsv1.ContainerDefinition, names map[string]bool) error {
	if len(c.GetLinks()) > 0 && mode != "bridge" {
		return awserr.Clientf("Links are not supported when networkMode=%s.", mode)
	}
	for _, l := range c.GetLinks() {
		name, alias, _ := strings.Cut(l, ":")
		if !names[name] || name == c.GetName() {
			return awserr.Clientf("Invalid 'links' setting for container '%s'. Unknown container '%s'.", c.GetName(), name)
		}
		if strings.Contains(alias, ":") {
			return awserr.Clientf("Invalid 'links' setting for container '%s': %q is not name or name:alias.", c.GetName(), l)
		}
	}
	if c.GetDisableNetworking() {
		if mode == "host" || mode == "awsvpc" {
			return awserr.Clientf("Invalid 'disableNetworking' setting for container '%s': a container cannot be taken off a network namespace it shares (networkMode %s); use bridge or none.", c.GetName(), mode)
		}
		if len(c.GetPortMappings()) > 0 {
			return awserr.Clientf("Invalid 'disableNetworking' setting for container '%s': a container without networking cannot have port mappings.", c.GetName())
		}
	}
	if mode == "awsvpc" && c.Hostname != nil {
		return awserr.Clientf("hostname is not supported when networkMode=awsvpc.")
	}
	if mode == "awsvpc" && len(c.GetExtraHosts()) > 0 {
		return awserr.Clientf("Extra hosts are not supported when networkMode=awsvpc.")
	}
	for _, h := range c.GetExtraHosts() {
		if h.GetHostname() == "" || net.ParseIP(h.GetIpAddress()) == nil {
			return awserr.Clientf("Invalid 'extraHosts' setting for container '%s': hostname and a valid ipAddress are required.", c.GetName())
		}
	}
	for _, d := range c.GetDnsServers() {
		if net.ParseIP(d) == nil {
			return awserr.Clientf("Invalid 'dnsServers' setting for container '%s': %q is not an IP address.", c.GetName(), d)
		}
	}
	return nil
}
