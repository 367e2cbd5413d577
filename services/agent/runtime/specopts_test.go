package runtime

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// apply runs opts on an empty spec (no image, no client: each option must stand alone).
func apply(t *testing.T, opts ...oci.SpecOpts) *oci.Spec {
	t.Helper()
	s := &oci.Spec{}
	for _, o := range opts {
		if err := o(context.Background(), nil, &containers.Container{ID: "c"}, s); err != nil {
			t.Fatalf("spec option: %v", err)
		}
	}
	return s
}

func TestWithMemoryReservation(t *testing.T) {
	t.Parallel()
	s := apply(t, withMemoryReservation(64<<20))
	if r := s.Linux.Resources.Memory.Reservation; r == nil || *r != 64<<20 {
		t.Errorf("reservation = %v, want %d", r, 64<<20)
	}
	if s.Linux.Resources.Memory.Limit != nil {
		t.Errorf("the reservation set a hard limit %d", *s.Linux.Resources.Memory.Limit)
	}
	// On top of a hard limit it keeps the limit. (containerd's WithMemoryLimit does
	// nothing without spec.Linux, which its default spec always has.)
	s = apply(t, func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		s.Linux = &specs.Linux{}
		return nil
	}, oci.WithMemoryLimit(128<<20), withMemoryReservation(32<<20))
	if m := s.Linux.Resources.Memory; *m.Limit != 128<<20 || *m.Reservation != 32<<20 {
		t.Errorf("limit %d reservation %d", *m.Limit, *m.Reservation)
	}
}

func TestWithUlimits(t *testing.T) {
	t.Parallel()
	s := apply(t, withUlimits([]Ulimit{{Name: "nofile", Soft: 1024, Hard: 4096}, {Name: "NPROC", Soft: 10, Hard: 20}}))
	want := []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 4096}, {Type: "RLIMIT_NPROC", Soft: 10, Hard: 20}}
	if !slices.Equal(s.Process.Rlimits, want) {
		t.Errorf("rlimits %+v, want %+v", s.Process.Rlimits, want)
	}
	// A limit of a type already set (as containerd's default spec sets RLIMIT_NOFILE)
	// replaces it instead of adding a second entry.
	s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1, Hard: 1}, {Type: "RLIMIT_CORE", Soft: 0, Hard: 0}}
	if err := withUlimits([]Ulimit{{Name: "nofile", Soft: 7, Hard: 8}})(context.Background(), nil, nil, s); err != nil {
		t.Fatal(err)
	}
	want = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 7, Hard: 8}, {Type: "RLIMIT_CORE", Soft: 0, Hard: 0}}
	if !slices.Equal(s.Process.Rlimits, want) {
		t.Errorf("rlimits after replace %+v, want %+v", s.Process.Rlimits, want)
	}
}

// TestSpecOpts checks each field of ContainerSpec that specOpts turns into an option, one
// at a time, on an empty spec.
func TestSpecOpts(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name  string
		spec  ContainerSpec
		check func(*oci.Spec) bool
	}{
		{"zero spec: host network, host's name, 2 CPU shares, writable root", ContainerSpec{}, func(s *oci.Spec) bool {
			netns := slices.ContainsFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.NetworkNamespace })
			return !netns && s.Hostname == host && *s.Linux.Resources.CPU.Shares == 2 && s.Linux.Resources.Memory == nil &&
				(s.Root == nil || !s.Root.Readonly) && s.Process.Rlimits == nil && len(s.Process.Env) == 0
		}},
		{"hosts and resolv.conf are the host's", ContainerSpec{}, func(s *oci.Spec) bool {
			has := func(dst string) bool {
				return slices.ContainsFunc(s.Mounts, func(m specs.Mount) bool { return m.Destination == dst && m.Type == "bind" })
			}
			return has("/etc/hosts") && has("/etc/resolv.conf")
		}},
		{"env", ContainerSpec{Env: []string{"A=1", "B=2"}}, func(s *oci.Spec) bool {
			return slices.Contains(s.Process.Env, "A=1") && slices.Contains(s.Process.Env, "B=2")
		}},
		{"working dir", ContainerSpec{WorkingDir: "/srv"}, func(s *oci.Spec) bool { return s.Process.Cwd == "/srv" }},
		{"numeric user", ContainerSpec{User: "1000:2000"}, func(s *oci.Spec) bool {
			return s.Process.User.UID == 1000 && s.Process.User.GID == 2000
		}},
		{"hostname", ContainerSpec{Hostname: "web-1"}, func(s *oci.Spec) bool { return s.Hostname == "web-1" }},
		{"CPU shares", ContainerSpec{CPUShares: 512}, func(s *oci.Spec) bool { return *s.Linux.Resources.CPU.Shares == 512 }},
		{"CPU shares below 2 become 2", ContainerSpec{CPUShares: 1}, func(s *oci.Spec) bool { return *s.Linux.Resources.CPU.Shares == 2 }},
		{"memory limit in MiB", ContainerSpec{MemoryMiB: 256}, func(s *oci.Spec) bool {
			return *s.Linux.Resources.Memory.Limit == 256<<20 && s.Linux.Resources.Memory.Reservation == nil
		}},
		{"memory reservation in MiB", ContainerSpec{MemoryReservationMiB: 100}, func(s *oci.Spec) bool {
			return *s.Linux.Resources.Memory.Reservation == 100<<20 && s.Linux.Resources.Memory.Limit == nil
		}},
		{"ulimits", ContainerSpec{Ulimits: []Ulimit{{Name: "nofile", Soft: 5, Hard: 6}}}, func(s *oci.Spec) bool {
			return slices.Equal(s.Process.Rlimits, []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 5, Hard: 6}})
		}},
		{"read-only root", ContainerSpec{ReadonlyRootfs: true}, func(s *oci.Spec) bool { return s.Root.Readonly }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The network namespace containerd's default spec has; host networking removes it.
			s := &oci.Spec{Process: &specs.Process{}, Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.NetworkNamespace}}}, Root: &specs.Root{}}
			for _, o := range specOpts(tc.spec) {
				if err := o(context.Background(), nil, &containers.Container{ID: "c"}, s); err != nil {
					t.Fatalf("spec option: %v", err)
				}
			}
			if !tc.check(s) {
				t.Errorf("spec: process %+v linux %+v root %+v hostname %q", s.Process, s.Linux, s.Root, s.Hostname)
			}
		})
	}
}
