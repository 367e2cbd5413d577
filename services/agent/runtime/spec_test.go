package runtime_test

import (
	"slices"
	"testing"

	"github.com/berthhq/berth/services/agent/runtime"
)

func TestArgsFollowDocker(t *testing.T) {
	t.Parallel()
	ep, cmd := []string{"/ep"}, []string{"a", "b"}
	for _, tc := range []struct {
		name                string
		entryPoint, command []string
		want                []string
	}{
		{"image defaults", nil, nil, []string{"/ep", "a", "b"}},
		{"command replaces cmd", nil, []string{"x"}, []string{"/ep", "x"}},
		{"entryPoint drops cmd", []string{"/other"}, nil, []string{"/other"}},
		{"both", []string{"/other"}, []string{"x"}, []string{"/other", "x"}},
	} {
		if got := runtime.Args(ep, cmd, tc.entryPoint, tc.command); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Args = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNormalizeRef(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"nginx":                     "docker.io/library/nginx:latest",
		"nginx:1.25":                "docker.io/library/nginx:1.25",
		"user/app":                  "docker.io/user/app:latest",
		"127.0.0.1:5000/berth/test": "127.0.0.1:5000/berth/test:latest",
	} {
		got, err := runtime.NormalizeRef(in)
		if err != nil || got != want {
			t.Errorf("NormalizeRef(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
