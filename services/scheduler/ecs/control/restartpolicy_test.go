package control

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// TestRestartPolicyRegistration: an enabled restartPolicy registers and is described back
// whole (the agent honours it); values outside AWS's bounds are refused naming the
// container, and nothing is registered.
func TestRestartPolicyRegistration(t *testing.T) {
	e := newEnv(t)
	reg := func(family string, rp *ecsv1.ContainerRestartPolicy) (*ecsv1.RegisterTaskDefinitionResponse, string) {
		r, err := call(e, e.s.RegisterTaskDefinition, &ecsv1.RegisterTaskDefinitionRequest{Family: proto.String(family), ContainerDefinitions: []*ecsv1.ContainerDefinition{{
			Name: proto.String("app"), Image: proto.String("busybox"), Memory: proto.Int32(16), RestartPolicy: rp,
		}}})
		if err != nil {
			if err.Type != "ClientException" {
				t.Fatalf("%s: %s %s, want ClientException", family, err.Type, err.Message)
			}
			return nil, err.Message
		}
		return r, ""
	}
	r, msg := reg("ok", &ecsv1.ContainerRestartPolicy{Enabled: proto.Bool(true), IgnoredExitCodes: []int32{0, 3}, RestartAttemptPeriod: proto.Int32(60)})
	if msg != "" {
		t.Fatalf("valid restartPolicy refused: %s", msg)
	}
	got := r.GetTaskDefinition().GetContainerDefinitions()[0].GetRestartPolicy()
	if !got.GetEnabled() || got.GetRestartAttemptPeriod() != 60 || len(got.GetIgnoredExitCodes()) != 2 {
		t.Fatalf("restartPolicy described back as %v", got)
	}
	many := make([]int32, 51)
	for _, tc := range []struct {
		rp   *ecsv1.ContainerRestartPolicy
		want string
	}{
		{&ecsv1.ContainerRestartPolicy{Enabled: proto.Bool(true), RestartAttemptPeriod: proto.Int32(59)}, "restartAttemptPeriod must be between 60 and 1800"},
		{&ecsv1.ContainerRestartPolicy{Enabled: proto.Bool(true), RestartAttemptPeriod: proto.Int32(1801)}, "restartAttemptPeriod must be between 60 and 1800"},
		{&ecsv1.ContainerRestartPolicy{Enabled: proto.Bool(true), IgnoredExitCodes: many}, "at most 50 exit codes"},
		{&ecsv1.ContainerRestartPolicy{RestartAttemptPeriod: proto.Int32(60)}, "enabled is required"},
	} {
		_, msg := reg("bad", tc.rp)
		if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "container 'app'") {
			t.Errorf("restartPolicy %v: %q, want %q naming the container", tc.rp, msg, tc.want)
		}
	}
	if _, err := call(e, e.s.DescribeTaskDefinition, &ecsv1.DescribeTaskDefinitionRequest{TaskDefinition: proto.String("bad")}); err == nil {
		t.Fatal("a refused definition was registered")
	}
}
