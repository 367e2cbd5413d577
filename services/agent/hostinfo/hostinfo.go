package hostinfo

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Info is what the agent registers about its host.
type Info struct {
	// Cores is the number of CPUs the agent may use.
	Cores int
	// MemoryMiB is the host's total memory in MiB.
	MemoryMiB int64
	// OSType is "linux", the value of the ecs.os-type attribute.
	OSType string
	// Arch is the ecs.cpu-architecture attribute: "x86_64" or "arm64" as
	// the ECS agent reports it.
	Arch string
}

// Detect reads the host's CPU count (runtime.NumCPU) and total memory
// (/proc/meminfo). It returns an error when /proc/meminfo cannot be read.
func Detect() (Info, error) {
	mem, err := memTotalMiB("/proc/meminfo")
	if err != nil {
		return Info{}, err
	}
	return Info{Cores: runtime.NumCPU(), MemoryMiB: mem, OSType: "linux", Arch: ecsArch(runtime.GOARCH)}, nil
}

// ecsArch maps a Go architecture to the ECS agent's ecs.cpu-architecture
// value.
func ecsArch(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	default:
		return goarch
	}
}

func memTotalMiB(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("hostinfo: read memory size: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("hostinfo: parse MemTotal %q: %w", fields[1], err)
			}
			return kib / 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("hostinfo: read %s: %w", path, err)
	}
	return 0, fmt.Errorf("hostinfo: no MemTotal in %s", path)
}

// HostID returns the host id stored in dir/host-id, creating it (random, 16
// bytes hex) on first use, so the id stays the same across agent restarts
// on the same data directory. suffix (e.g. the containerd namespace) is
// appended after a dash, so two agents sharing a machine but not a
// namespace get different ids.
func HostID(dir, suffix string) (string, error) {
	path := filepath.Join(dir, "host-id")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist):
		var raw [16]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return "", fmt.Errorf("hostinfo: generate host id: %w", err)
		}
		b = []byte(hex.EncodeToString(raw[:]))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("hostinfo: create %s: %w", dir, err)
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return "", fmt.Errorf("hostinfo: write host id: %w", err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return "", fmt.Errorf("hostinfo: write host id: %w", err)
		}
	default:
		return "", fmt.Errorf("hostinfo: read host id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if suffix != "" {
		id += "-" + suffix
	}
	return id, nil
}
