package control

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
)

func container(name string, mods ...func(*ecsv1.ContainerDefinition)) *ecsv1.ContainerDefinition {
	c := &ecsv1.ContainerDefinition{Name: proto.String(name), Image: proto.String("busybox"), Memory: proto.Int32(64)}
	for _, m := range mods {
		m(c)
	}
	return c
}

func TestRegisterTaskDefinitionValidation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		req     *ecsv1.RegisterTaskDefinitionRequest
		wantErr string
		msg     string
	}{
		{"no family", &ecsv1.RegisterTaskDefinitionRequest{ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", "Family"},
		{"bad family", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("a:b"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", "Family"},
		{"no containers", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f")}, "ClientException", "Container list"},
		{"nil container", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{nil}}, "ClientException", ""},
		{"no name", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("")}}, "ClientException", "Container.name"},
		{"no image", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) { c.Image = nil })}}, "ClientException", "Container.image should not be null or empty."},
		{"duplicate names", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a"), container("a")}}, "ClientException", "unique"},
		{"no essential", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) { c.Essential = proto.Bool(false) })}}, "ClientException", "essential"},
		{"no memory", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) { c.Memory = nil })}}, "ClientException", "At least one of 'memory' or 'memoryReservation' must be specified."},
		{"memory < reservation", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) { c.MemoryReservation = proto.Int32(128) })}}, "ClientException", "memoryReservation"},
		{"bad network mode", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), NetworkMode: proto.String("overlay"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", "networkMode"},
		{"bad cpu", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), Cpu: proto.String("lots"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", "cpu"},
		{"bad port", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(70000)}}
		})}}, "ClientException", "containerPort"},
		{"awsvpc port mismatch", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), NetworkMode: proto.String("awsvpc"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80), HostPort: proto.Int32(8080)}}
		})}}, "ClientException", "When networkMode=awsvpc, the host ports and container ports in port mappings must match."},
		{"duplicate host port", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80), HostPort: proto.Int32(8080)}, {ContainerPort: proto.Int32(81), HostPort: proto.Int32(8080)}}
		})}}, "ClientException", "host port"},
		{"unknown volume", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.MountPoints = []*ecsv1.MountPoint{{SourceVolume: proto.String("v"), ContainerPath: proto.String("/v")}}
		})}}, "ClientException", "volume"},
		{"relative sourcePath", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), Volumes: []*ecsv1.Volume{{Name: proto.String("v"), Host: &ecsv1.HostVolumeProperties{SourcePath: proto.String("data")}}}, ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", "Invalid 'host.sourcePath' setting for volume 'v'. The source path must be an absolute path"},
		{"relative containerPath", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), Volumes: []*ecsv1.Volume{{Name: proto.String("v")}}, ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.MountPoints = []*ecsv1.MountPoint{{SourceVolume: proto.String("v"), ContainerPath: proto.String("v")}}
		})}}, "ClientException", "containerPath must be an absolute path"},
		{"mount without volume", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.MountPoints = []*ecsv1.MountPoint{{ContainerPath: proto.String("/v")}}
		})}}, "ClientException", "sourceVolume should not be null or empty."},
		{"volumesFrom unknown", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.VolumesFrom = []*ecsv1.VolumeFrom{{SourceContainer: proto.String("b")}}
		})}}, "ClientException", "Invalid 'volumesFrom' setting for container 'a'. Unknown source container 'b'."},
		{"volumesFrom itself", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.VolumesFrom = []*ecsv1.VolumeFrom{{SourceContainer: proto.String("a")}}
		})}}, "ClientException", "Unknown source container 'a'"},
		{"unknown capability", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.LinuxParameters = &ecsv1.LinuxParameters{Capabilities: &ecsv1.KernelCapabilities{Add: []string{"NET_ADMIN", "FLY"}}}
		})}}, "ClientException", "Invalid 'linuxParameters.capabilities.add' setting for container 'a'. Unknown capability 'FLY'."},
		{"tmpfs without size", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.LinuxParameters = &ecsv1.LinuxParameters{Tmpfs: []*ecsv1.Tmpfs{{ContainerPath: proto.String("/t"), Size: -1}}}
		})}}, "ClientException", "size must be a positive number of MiB"},
		{"negative shm", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.LinuxParameters = &ecsv1.LinuxParameters{SharedMemorySize: proto.Int32(-5)}
		})}}, "ClientException", "Invalid 'linuxParameters.sharedMemorySize' setting for container 'a'."},
		{"device relative path", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.LinuxParameters = &ecsv1.LinuxParameters{Devices: []*ecsv1.Device{{HostPath: proto.String("dev/null")}}}
		})}}, "ClientException", "hostPath and containerPath must be absolute paths."},
		{"device bad permission", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.LinuxParameters = &ecsv1.LinuxParameters{Devices: []*ecsv1.Device{{HostPath: proto.String("/dev/null"), Permissions: []string{"execute"}}}}
		})}}, "ClientException", "Unknown permission 'execute'"},
		{"maxSwap without memory", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.Memory, c.MemoryReservation = nil, proto.Int32(32)
			c.LinuxParameters = &ecsv1.LinuxParameters{MaxSwap: proto.Int32(10)}
		})}}, "ClientException", "Invalid 'linuxParameters.maxSwap' setting for container 'a'."},
		{"swappiness without maxSwap", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.LinuxParameters = &ecsv1.LinuxParameters{Swappiness: proto.Int32(10)}
		})}}, "ClientException", "needs maxSwap"},
		{"net sysctl in host mode", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), NetworkMode: proto.String("host"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.SystemControls = []*ecsv1.SystemControl{{Namespace: proto.String("net.ipv4.ip_forward"), Value: proto.String("1")}}
		})}}, "ClientException", "net.ipv4.ip_forward cannot be set when networkMode is host"},
		{"non-namespaced sysctl", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.SystemControls = []*ecsv1.SystemControl{{Namespace: proto.String("vm.swappiness"), Value: proto.String("1")}}
		})}}, "ClientException", "vm.swappiness is not a namespaced kernel parameter"},
		{"sysctl with ipcMode host", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), IpcMode: proto.String("host"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.SystemControls = []*ecsv1.SystemControl{{Namespace: proto.String("kernel.shmmax"), Value: proto.String("1")}}
		})}}, "ClientException", "cannot be set when ipcMode is host"},
		{"pidMode unknown", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), PidMode: proto.String("container"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", `Invalid pidMode "container": valid values are host and task.`},
		{"ipcMode unknown", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), IpcMode: proto.String("shareable"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", `Invalid ipcMode "shareable": valid values are host, task and none.`},
		{"autoprovision task scope", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), Volumes: []*ecsv1.Volume{{Name: proto.String("v"), DockerVolumeConfiguration: &ecsv1.DockerVolumeConfiguration{Scope: proto.String("task"), Autoprovision: proto.Bool(true)}}}, ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", "Autoprovision can only be true when scope is shared."},
		{"bad scope", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), Volumes: []*ecsv1.Volume{{Name: proto.String("v"), DockerVolumeConfiguration: &ecsv1.DockerVolumeConfiguration{Scope: proto.String("global")}}}, ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", "valid values are task and shared"},
		{"docker volume driver", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), Volumes: []*ecsv1.Volume{{Name: proto.String("v"), DockerVolumeConfiguration: &ecsv1.DockerVolumeConfiguration{Driver: proto.String("rexray/ebs")}}}, ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", `volumes[0].dockerVolumeConfiguration.driver "rexray/ebs" is not supported by Berth.`},
		{"efs access point with rootDirectory", efsReq(func(e *ecsv1.EFSVolumeConfiguration) {
			e.RootDirectory, e.TransitEncryption = proto.String("/data"), proto.String("ENABLED")
			e.AuthorizationConfig = &ecsv1.EFSAuthorizationConfig{AccessPointId: proto.String("fsap-1234")}
		}), "ClientException", `When using an EFS access point, the root directory must either be set to "/" or be omitted`},
		{"efs access point without transit encryption", efsReq(func(e *ecsv1.EFSVolumeConfiguration) {
			e.AuthorizationConfig = &ecsv1.EFSAuthorizationConfig{AccessPointId: proto.String("fsap-1234")}
		}), "ClientException", "Transit encryption must be enabled when using an EFS access point"},
		{"efs iam without transit encryption", efsReq(func(e *ecsv1.EFSVolumeConfiguration) {
			e.AuthorizationConfig = &ecsv1.EFSAuthorizationConfig{Iam: proto.String("ENABLED")}
		}), "ClientException", "Transit encryption must be enabled when using EFS IAM authorization"},
		{"efs bad transitEncryption", efsReq(func(e *ecsv1.EFSVolumeConfiguration) { e.TransitEncryption = proto.String("yes") }), "ClientException", "valid values are ENABLED and DISABLED"},
		{"efs rootDirectory leaves the export", efsReq(func(e *ecsv1.EFSVolumeConfiguration) { e.RootDirectory = proto.String("/a/../../etc") }), "ClientException", `The root directory must not contain ".."`},
		{"efs and host", efsReq(func(e *ecsv1.EFSVolumeConfiguration) {}, func(v *ecsv1.Volume) { v.Host = &ecsv1.HostVolumeProperties{} }), "ClientException", "Specify only one of host, dockerVolumeConfiguration and efsVolumeConfiguration."},
		{"efs transit encryption refused", efsReq(func(e *ecsv1.EFSVolumeConfiguration) { e.TransitEncryption = proto.String("ENABLED") }), "ClientException", `volumes[0].efsVolumeConfiguration.transitEncryption "ENABLED" is not supported by Berth.`},
		{"efs transit encryption port refused", efsReq(func(e *ecsv1.EFSVolumeConfiguration) { e.TransitEncryptionPort = proto.Int32(2999) }), "ClientException", "volumes[0].efsVolumeConfiguration.transitEncryptionPort is not supported by Berth."},
		{"efs access point refused", efsReq(func(e *ecsv1.EFSVolumeConfiguration) {
			e.TransitEncryption = proto.String("ENABLED")
			e.AuthorizationConfig = &ecsv1.EFSAuthorizationConfig{AccessPointId: proto.String("fsap-1234")}
		}), "ClientException", `volumes[0].efsVolumeConfiguration.authorizationConfig.accessPointId "fsap-1234" is not supported by Berth.`},
		{"efs iam refused", efsReq(func(e *ecsv1.EFSVolumeConfiguration) {
			e.TransitEncryption = proto.String("ENABLED")
			e.AuthorizationConfig = &ecsv1.EFSAuthorizationConfig{Iam: proto.String("ENABLED")}
		}), "ClientException", `volumes[0].efsVolumeConfiguration.authorizationConfig.iam "ENABLED" is not supported by Berth.`},
		{"awsvpc host port remap", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), NetworkMode: proto.String("awsvpc"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80), HostPort: proto.Int32(8081)}}
		})}}, "ClientException", "When networkMode=awsvpc, the host ports and container ports in port mappings must match."},
		{"links outside bridge", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), NetworkMode: proto.String("host"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.Links = []string{"b"}
		}), container("b")}}, "ClientException", "Links are not supported when networkMode=host."},
		{"link to an unknown container", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.Links = []string{"db:database"}
		})}}, "ClientException", "Invalid 'links' setting for container 'a'. Unknown container 'db'."},
		{"hostname with awsvpc", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), NetworkMode: proto.String("awsvpc"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.Hostname = proto.String("web")
		})}}, "ClientException", "hostname is not supported when networkMode=awsvpc."},
		{"environmentFiles refused", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.EnvironmentFiles = []*ecsv1.EnvironmentFile{{Type: proto.String("s3"), Value: proto.String("arn:aws:s3:::b/x.env")}}
		})}}, "ClientException", "containerDefinitions[0].environmentFiles is not supported by Berth."},
		{"fargate needs awsvpc", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), RequiresCompatibilities: []string{"FARGATE"}, Cpu: proto.String("256"), Memory: proto.String("512"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")}}, "ClientException", "awsvpc"},
		{"dependsOn unknown", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.DependsOn = []*ecsv1.ContainerDependency{{ContainerName: proto.String("b"), Condition: proto.String("START")}}
		})}}, "ClientException", "dependsOn"},
		{"too many containers", &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), ContainerDefinitions: func() []*ecsv1.ContainerDefinition {
			var cs []*ecsv1.ContainerDefinition
			for i := range 11 {
				cs = append(cs, container(fmt.Sprint("c", i)))
			}
			return cs
		}()}, "ClientException", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(e, e.s.RegisterTaskDefinition, tc.req)
			wantErr(t, err, tc.wantErr)
			if !strings.Contains(err.Message, tc.msg) {
				t.Fatalf("message %q does not contain %q", err.Message, tc.msg)
			}
		})
	}
	// Nothing half-written: the family does not exist.
	l := must(e, e.s.ListTaskDefinitionFamilies, &ecsv1.ListTaskDefinitionFamiliesRequest{})
	if len(l.GetFamilies()) != 0 {
		t.Fatalf("families after failed registrations: %v", l.GetFamilies())
	}
}

func TestRegisterTaskDefinitionDefaults(t *testing.T) {
	e := newEnv(t)
	r := must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
		Family: proto.String("web"), Cpu: proto.String("1 vCPU"), Memory: proto.String("0.5GB"),
		Tags: []*ecsv1.Tag{{Key: proto.String("k"), Value: proto.String("v")}},
		ContainerDefinitions: []*ecsv1.ContainerDefinition{container("app", func(c *ecsv1.ContainerDefinition) {
			c.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(80)}}
		})},
	})
	td := r.GetTaskDefinition()
	if td.GetRevision() != 1 || td.GetStatus() != "ACTIVE" || td.GetTaskDefinitionArn() != "arn:aws:ecs:us-east-1:"+e.acc+":task-definition/web:1" {
		t.Fatalf("td %v", td)
	}
	if td.GetCpu() != "1024" || td.GetMemory() != "512" || td.GetNetworkMode() != "bridge" {
		t.Fatalf("normalised cpu %q memory %q mode %q", td.GetCpu(), td.GetMemory(), td.GetNetworkMode())
	}
	c := td.GetContainerDefinitions()[0]
	if !c.GetEssential() || c.GetCpu() != 0 || c.GetPortMappings()[0].GetProtocol() != "tcp" || c.Environment == nil || c.MountPoints == nil {
		t.Fatalf("container defaults %v", c)
	}
	if td.RegisteredAt == nil || td.GetRegisteredBy() == "" || len(td.GetCompatibilities()) == 0 {
		t.Fatalf("registration fields %v", td)
	}
	if len(r.GetTags()) != 1 {
		t.Fatalf("tags %v", r.GetTags())
	}
	for in, want := range map[string]string{"256": "256", "0.25 vcpu": "256", "2 vCPU": "2048"} {
		if got, ok := normalizeCPU(in); !ok || got != want {
			t.Errorf("normalizeCPU(%q) = %q %v", in, got, ok)
		}
	}
	for in, want := range map[string]string{"512": "512", "1 GB": "1024", "2gb": "2048", "0.5 GB": "512"} {
		if got, ok := normalizeMemory(in); !ok || got != want {
			t.Errorf("normalizeMemory(%q) = %q %v", in, got, ok)
		}
	}
	// host mode fills hostPort = containerPort.
	h := must(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("h"), NetworkMode: proto.String("host"),
		ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.PortMappings = []*ecsv1.PortMapping{{ContainerPort: proto.Int32(8080)}}
		})}}).GetTaskDefinition()
	if h.GetContainerDefinitions()[0].GetPortMappings()[0].GetHostPort() != 8080 {
		t.Fatalf("host mode hostPort %v", h.GetContainerDefinitions()[0].GetPortMappings())
	}
}

func TestTaskDefinitionLifecycle(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.simpleTaskDef("app", 10, 10)
	}
	e.simpleTaskDef("app-worker", 10, 10)
	e.simpleTaskDef("other", 10, 10)

	describe := func(ref string) *ecsv1.TaskDefinition {
		t.Helper()
		return must(e, e.s.DescribeTaskDefinition, &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: proto.String(ref)}).GetTaskDefinition()
	}
	if describe("app").GetRevision() != 3 || describe("app:2").GetRevision() != 2 || describe("arn:aws:ecs:us-east-1:"+e.acc+":task-definition/app:1").GetRevision() != 1 {
		t.Fatal("describe by family / family:rev / ARN")
	}
	_, err := call(e, e.s.DescribeTaskDefinition, &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: proto.String("app:9")})
	wantErr(t, err, "ClientException")
	if err.Message != "Unable to describe task definition." {
		t.Fatalf("message %q", err.Message)
	}

	// Deregister 3: the family's latest ACTIVE is 2; the next registration is 4.
	d := must(e, e.s.DeregisterTaskDefinition, &ecsv1.DeregisterTaskDefinitionRequest{TaskDefinition: proto.String("app:3")}).GetTaskDefinition()
	if d.GetStatus() != "INACTIVE" || d.DeregisteredAt == nil {
		t.Fatalf("deregistered %v", d)
	}
	if describe("app:3").GetStatus() != "INACTIVE" || describe("app").GetRevision() != 2 {
		t.Fatal("INACTIVE describable; family resolves to latest ACTIVE")
	}
	if e.simpleTaskDef("app", 10, 10).GetRevision() != 4 {
		t.Fatal("revision reused")
	}
	_, err = call(e, e.s.DeregisterTaskDefinition, &ecsv1.DeregisterTaskDefinitionRequest{TaskDefinition: proto.String("app")})
	wantErr(t, err, "ClientException")

	// DeleteTaskDefinitions: only INACTIVE moves to DELETE_IN_PROGRESS.
	del := must(e, e.s.DeleteTaskDefinitions, &ecsv1.DeleteTaskDefinitionsRequest{TaskDefinitions: []string{"app:3", "app:2", "app:99"}})
	if len(del.GetTaskDefinitions()) != 1 || del.GetTaskDefinitions()[0].GetStatus() != "DELETE_IN_PROGRESS" || len(del.GetFailures()) != 2 {
		t.Fatalf("delete %v", del)
	}
	if describe("app:3").GetStatus() != "DELETE_IN_PROGRESS" {
		t.Fatal("DELETE_IN_PROGRESS describable")
	}

	list := func(req *ecsv1.ListTaskDefinitionsRequest) []string {
		t.Helper()
		var out []string
		for {
			r := must(e, e.s.ListTaskDefinitions, req)
			for _, a := range r.GetTaskDefinitionArns() {
				out = append(out, a[strings.LastIndexByte(a, '/')+1:])
			}
			if r.NextToken == nil {
				return out
			}
			req.NextToken = r.NextToken
		}
	}
	if got := list(&ecsv1.ListTaskDefinitionsRequest{MaxResults: proto.Int32(2)}); strings.Join(got, ",") != "app-worker:1,app:1,app:2,app:4,other:1" && strings.Join(got, ",") != "app:1,app:2,app:4,app-worker:1,other:1" {
		t.Fatalf("ACTIVE list %v", got)
	}
	if got := list(&ecsv1.ListTaskDefinitionsRequest{FamilyPrefix: proto.String("app"), Sort: proto.String("DESC"), MaxResults: proto.Int32(1)}); strings.Join(got, ",") != "app:4,app:2,app:1" {
		t.Fatalf("DESC list %v", got)
	}
	if got := list(&ecsv1.ListTaskDefinitionsRequest{Status: proto.String("DELETE_IN_PROGRESS")}); strings.Join(got, ",") != "app:3" {
		t.Fatalf("DELETE_IN_PROGRESS list %v", got)
	}

	// Families: familyPrefix is a true prefix; status filters.
	fams := func(req *ecsv1.ListTaskDefinitionFamiliesRequest) []string {
		t.Helper()
		r := must(e, e.s.ListTaskDefinitionFamilies, req)
		sort.Strings(r.Families)
		return r.GetFamilies()
	}
	if got := fams(&ecsv1.ListTaskDefinitionFamiliesRequest{FamilyPrefix: proto.String("app")}); strings.Join(got, ",") != "app,app-worker" {
		t.Fatalf("prefix families %v", got)
	}
	must(e, e.s.DeregisterTaskDefinition, &ecsv1.DeregisterTaskDefinitionRequest{TaskDefinition: proto.String("other:1")})
	if got := fams(&ecsv1.ListTaskDefinitionFamiliesRequest{Status: proto.String("INACTIVE")}); strings.Join(got, ",") != "other" {
		t.Fatalf("INACTIVE families %v", got)
	}
	if got := fams(&ecsv1.ListTaskDefinitionFamiliesRequest{Status: proto.String("ACTIVE")}); strings.Join(got, ",") != "app,app-worker" {
		t.Fatalf("ACTIVE families %v", got)
	}
	if got := fams(&ecsv1.ListTaskDefinitionFamiliesRequest{}); len(got) != 3 {
		t.Fatalf("ALL families %v", got)
	}
	// Re-registering an INACTIVE family makes it ACTIVE again.
	e.simpleTaskDef("other", 1, 10)
	if got := fams(&ecsv1.ListTaskDefinitionFamiliesRequest{Status: proto.String("INACTIVE")}); len(got) != 0 {
		t.Fatalf("INACTIVE families after re-register %v", got)
	}
}

func TestConcurrentRegisterTaskDefinition(t *testing.T) {
	e := newEnv(t)
	const n = 100
	revs := make(chan int32, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r, err := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
				Family: proto.String("hot"), ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a")},
			})
			if err != nil {
				t.Error(err)
				return
			}
			revs <- r.GetTaskDefinition().GetRevision()
		})
	}
	wg.Wait()
	close(revs)
	seen := map[int32]bool{}
	for r := range revs {
		if seen[r] {
			t.Fatalf("revision %d issued twice", r)
		}
		seen[r] = true
	}
	for i := int32(1); i <= n; i++ {
		if !seen[i] {
			t.Fatalf("revision %d missing (got %d revisions)", i, len(seen))
		}
	}
}

// TestDriverOptsRegistration: local driverOpts of Docker's local driver register and are
// described back; unknown options, or type without device, are refused naming the volume.
func TestDriverOptsRegistration(t *testing.T) {
	e := newEnv(t)
	reg := func(opts map[string]string) (*ecsv1.RegisterTaskDefinitionResponse, *awserr.Error) {
		return call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{
			Family:  proto.String("vol"),
			Volumes: []*ecsv1.Volume{{Name: proto.String("scratch"), DockerVolumeConfiguration: &ecsv1.DockerVolumeConfiguration{Scope: proto.String("task"), Driver: proto.String("local"), DriverOpts: opts}}},
			ContainerDefinitions: []*ecsv1.ContainerDefinition{{Name: proto.String("a"), Image: proto.String("busybox"), Memory: proto.Int32(16),
				MountPoints: []*ecsv1.MountPoint{{SourceVolume: proto.String("scratch"), ContainerPath: proto.String("/data")}}}},
		})
	}
	r, err := reg(map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "size=4m"})
	if err != nil {
		t.Fatalf("tmpfs driverOpts refused: %v", err)
	}
	if o := r.GetTaskDefinition().GetVolumes()[0].GetDockerVolumeConfiguration().GetDriverOpts(); o["o"] != "size=4m" || o["type"] != "tmpfs" {
		t.Fatalf("driverOpts described back as %v", o)
	}
	for _, tc := range []struct {
		opts map[string]string
		want string
	}{
		{map[string]string{"type": "nfs", "device": ":/export", "uid": "1"}, `Unknown option "uid"`},
		{map[string]string{"type": "tmpfs"}, "needs both type and device"},
		{map[string]string{"o": "size=1m"}, "needs both type and device"},
	} {
		_, err := reg(tc.opts)
		wantErr(t, err, "ClientException")
		if !strings.Contains(err.Message, tc.want) || !strings.Contains(err.Message, "volume 'scratch'") {
			t.Errorf("driverOpts %v: %q, want %q naming the volume", tc.opts, err.Message, tc.want)
		}
	}
}

// efsReq is a task definition with one EFS volume (fs-12345678, mounted by container a),
// changed by edit and then by each of vol.
func efsReq(edit func(*ecsv1.EFSVolumeConfiguration), vol ...func(*ecsv1.Volume)) *ecsv1.RegisterTaskDefinitionRequest {
	e := &ecsv1.EFSVolumeConfiguration{FileSystemId: proto.String("fs-12345678")}
	edit(e)
	v := &ecsv1.Volume{Name: proto.String("v"), EfsVolumeConfiguration: e}
	for _, f := range vol {
		f(v)
	}
	return &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String("f"), Volumes: []*ecsv1.Volume{v},
		ContainerDefinitions: []*ecsv1.ContainerDefinition{container("a", func(c *ecsv1.ContainerDefinition) {
			c.MountPoints = []*ecsv1.MountPoint{{SourceVolume: proto.String("v"), ContainerPath: proto.String("/v")}}
		})}}
}
