package control

import (
	"fmt"
	"strconv"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/ecs/task"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

// The FARGATE launch type on Berth (docs/capacity-providers.md): a FARGATE task runs on
// one of the cluster's container instances in the Fargate pool (every instance unless its
// attribute berth.fargate is "false"), as an awsvpc task; its answers show launchType
// FARGATE, capacityProviderName FARGATE (or FARGATE_SPOT), platformVersion and
// platformFamily, and no containerInstanceArn, as AWS shows a Fargate task. The task
// definition must be Fargate-compatible and its task-level cpu and memory one of
// Fargate's combinations.

// fargateSizes are Fargate's valid task sizes for Linux (AWS's table "Task CPU and
// memory" in the Amazon ECS developer guide, platform version 1.4.0): for each cpu (CPU
// units), memory from min to max MiB in steps of step, plus the extra values listed.
var fargateSizes = []struct {
	cpu, min, max, step int
}{
	{256, 512, 512, 512}, {256, 1024, 2048, 1024},
	{512, 1024, 4096, 1024},
	{1024, 2048, 8192, 1024},
	{2048, 4096, 16384, 1024},
	{4096, 8192, 30720, 1024},
	{8192, 16384, 61440, 4096},
	{16384, 32768, 122880, 8192},
}

// ValidFargateSize reports whether task-level cpu (CPU units) and memory (MiB) are one of
// Fargate's combinations.
func ValidFargateSize(cpu, memory int) bool {
	for _, s := range fargateSizes {
		if s.cpu == cpu && memory >= s.min && memory <= s.max && (memory-s.min)%s.step == 0 {
			return true
		}
	}
	return false
}

// fargateSizeError is AWS's ClientException for a task size Fargate has no configuration
// for.
func fargateSizeError(cpu, memory string) error {
	return awserr.Clientf("No Fargate configuration exists for given values: %s CPU, %s memory. See the Amazon ECS documentation for the valid CPU and memory combinations.", cpu, memory)
}

// fargateIncompatibility returns why a task definition (as registered, cpu and memory
// normalized) with these containers cannot run on Fargate, or "" when it can: networkMode awsvpc, task-level cpu
// and memory of a valid combination, and none of what Fargate does not offer (privileged
// containers, links, devices, host volumes with a source path, Docker volumes, task
// placement constraints, ipcMode, pidMode host).
func fargateIncompatibility(td *ecsv1.TaskDefinition, containers []*ecsv1.ContainerDefinition) (string, error) {
	if td.GetNetworkMode() != "awsvpc" {
		return "Fargate only supports network mode 'awsvpc'.", nil
	}
	if td.Cpu == nil {
		return "Fargate requires that 'cpu' be defined at the task level.", nil
	}
	if td.Memory == nil {
		return "Fargate requires that 'memory' be defined at the task level.", nil
	}
	cpu, _ := strconv.Atoi(td.GetCpu())
	mem, _ := strconv.Atoi(td.GetMemory())
	if !ValidFargateSize(cpu, mem) {
		return "", fargateSizeError(td.GetCpu(), td.GetMemory())
	}
	if len(td.GetPlacementConstraints()) > 0 {
		return "Task definition placement constraints are not supported for the Fargate launch type.", nil
	}
	// AWS's texts (RegisterTaskDefinition API reference: pidMode on Fargate is task
	// only; ipcMode is not supported on Fargate).
	if td.IpcMode != nil {
		return "Tasks using the Fargate launch type do not support ipcMode.", nil
	}
	if td.GetPidMode() == "host" {
		return "Tasks using the Fargate launch type do not support pidMode 'host'. The supported value for pidMode is 'task'.", nil
	}
	for _, v := range td.GetVolumes() {
		if v.GetHost().GetSourcePath() != "" {
			return fmt.Sprintf("Volume '%s': host volumes with a sourcePath are not supported for the Fargate launch type.", v.GetName()), nil
		}
		if v.GetDockerVolumeConfiguration() != nil {
			return fmt.Sprintf("Volume '%s': dockerVolumeConfiguration is not supported for the Fargate launch type.", v.GetName()), nil
		}
	}
	for _, c := range containers {
		if c.GetPrivileged() {
			return fmt.Sprintf("Container '%s': privileged mode is not supported for the Fargate launch type.", c.GetName()), nil
		}
		if len(c.GetLinks()) > 0 {
			return fmt.Sprintf("Container '%s': links are not supported for the Fargate launch type.", c.GetName()), nil
		}
		if len(c.GetLinuxParameters().GetDevices()) > 0 {
			return fmt.Sprintf("Container '%s': devices are not supported for the Fargate launch type.", c.GetName()), nil
		}
		for _, pm := range c.GetPortMappings() {
			if pm.HostPort != nil && pm.GetHostPort() != pm.GetContainerPort() {
				return fmt.Sprintf("Container '%s': in network mode awsvpc the hostPort must equal the containerPort or be left out.", c.GetName()), nil
			}
		}
	}
	return "", nil
}

// fargatePlatform resolves RunTask's or a service's platformVersion for a Fargate task:
// absent or LATEST is task.FargateLatest, which is also the one version accepted by name.
// Errors: PlatformUnknownException for another version.
func fargatePlatform(v *string) (string, error) {
	if v == nil || *v == "LATEST" || *v == task.FargateLatest {
		return task.FargateLatest, nil
	}
	return "", awserr.New("PlatformUnknownException", "The specified platform version %s does not exist or is not supported by Berth; use LATEST or %s.", *v, task.FargateLatest)
}

// checkFargateRun checks a FARGATE launch of td with these overrides: the definition is
// Fargate-compatible, the size after the task-level overrides is one of Fargate's.
// Errors: InvalidParameterException (definition not Fargate-compatible), ClientException
// (no Fargate configuration for the size).
func checkFargateRun(td *ecsv1.TaskDefinition, ov *ecsv1.TaskOverride) error {
	if !oneOf("FARGATE", td.GetCompatibilities()...) {
		return awserr.InvalidParameterf("Task definition does not support launch_type FARGATE.")
	}
	cpu, mem := td.GetCpu(), td.GetMemory()
	if ov.GetCpu() != "" {
		cpu, _ = normalizeCPU(ov.GetCpu())
	}
	if ov.GetMemory() != "" {
		mem, _ = normalizeMemory(ov.GetMemory())
	}
	c, _ := strconv.Atoi(cpu)
	m, _ := strconv.Atoi(mem)
	if !ValidFargateSize(c, m) {
		return fargateSizeError(cpu, mem)
	}
	return nil
}

// CheckServiceLaunch checks how a service launches td, as RunTask checks a task: for
// FARGATE a Fargate-compatible definition of a Fargate size and a known platformVersion
// (returned resolved), platformVersion refused for other launch types, and the
// networkConfiguration against the definition's networkMode (CheckNetworkConfiguration).
// Errors: InvalidParameterException, ClientException, PlatformUnknownException.
func CheckServiceLaunch(td *ecsv1.TaskDefinition, launchType string, platformVersion *string, nc *ecsv1.NetworkConfiguration) (string, error) {
	platform := ""
	if launchType == "FARGATE" {
		if err := checkFargateRun(td, nil); err != nil {
			return "", err
		}
		v, err := fargatePlatform(platformVersion)
		if err != nil {
			return "", err
		}
		platform = v
	} else if platformVersion != nil {
		return "", awserr.InvalidParameterf("The platformVersion parameter is only supported for services using the Fargate launch type.")
	}
	return platform, CheckNetworkConfiguration(td, nc)
}
