package tasks

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestContainerIDSafeAndBounded(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	arn := "arn:aws:ecs:us-east-1:000000000000:task/default/0123456789abcdef0123456789abcdef"
	for _, name := range []string{"web", "a b/c", strings.Repeat("x", 200), "_lead"} {
		id := ContainerID(arn, name)
		if len(id) > 76 || !valid.MatchString(id) {
			t.Errorf("ContainerID(%q) = %q: not a valid containerd id", name, id)
		}
	}
	if ContainerID(arn, strings.Repeat("x", 200)) == ContainerID(arn, strings.Repeat("x", 201)) {
		t.Error("long names collide")
	}
}

func TestHealthArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"CMD", "/check", "x"}, []string{"/check", "x"}},
		{[]string{"CMD-SHELL", "curl -f localhost || exit 1"}, []string{"/bin/sh", "-c", "curl -f localhost || exit 1"}},
	} {
		got, err := healthArgs(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("healthArgs(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := healthArgs([]string{"CMD"}); err == nil {
		t.Error("CMD without a command accepted")
	}
}
