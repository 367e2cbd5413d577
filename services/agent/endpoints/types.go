package endpoints

import "time"

// Task is the task metadata endpoint v4's /task answer (AWS: "Amazon ECS task metadata
// V4 JSON response"). Fields the host does not know are omitted, as AWS omits them.
type Task struct {
	Cluster          string            `json:"Cluster"`
	ServiceName      string            `json:"ServiceName,omitempty"`
	TaskARN          string            `json:"TaskARN"`
	Family           string            `json:"Family"`
	Revision         string            `json:"Revision"`
	DesiredStatus    string            `json:"DesiredStatus"`
	KnownStatus      string            `json:"KnownStatus"`
	Limits           *Limits           `json:"Limits,omitempty"`
	PullStartedAt    *time.Time        `json:"PullStartedAt,omitempty"`
	PullStoppedAt    *time.Time        `json:"PullStoppedAt,omitempty"`
	ExecutionStopped *time.Time        `json:"ExecutionStoppedAt,omitempty"`
	AvailabilityZone string            `json:"AvailabilityZone,omitempty"`
	LaunchType       string            `json:"LaunchType"`
	TaskTags         map[string]string `json:"TaskTags,omitempty"`
	Containers       []*Container      `json:"Containers"`
}

// Limits are CPU (vCPUs at the task level, CPU units for a container) and memory (MiB).
type Limits struct {
	CPU    float64 `json:"CPU"`
	Memory int64   `json:"Memory,omitempty"`
}

// Container is the metadata of one container (the v4 / answer, and an element of
// Task.Containers).
type Container struct {
	DockerID      string            `json:"DockerId"`
	Name          string            `json:"Name"`
	DockerName    string            `json:"DockerName"`
	Image         string            `json:"Image"`
	ImageID       string            `json:"ImageID,omitempty"`
	Labels        map[string]string `json:"Labels,omitempty"`
	DesiredStatus string            `json:"DesiredStatus"`
	KnownStatus   string            `json:"KnownStatus"`
	ExitCode      *int32            `json:"ExitCode,omitempty"`
	Limits        Limits            `json:"Limits"`
	CreatedAt     *time.Time        `json:"CreatedAt,omitempty"`
	StartedAt     *time.Time        `json:"StartedAt,omitempty"`
	FinishedAt    *time.Time        `json:"FinishedAt,omitempty"`
	Type          string            `json:"Type"`
	LogDriver     string            `json:"LogDriver,omitempty"`
	LogOptions    map[string]string `json:"LogOptions,omitempty"`
	ContainerARN  string            `json:"ContainerARN,omitempty"`
	Health        *Health           `json:"Health,omitempty"`
	Networks      []Network         `json:"Networks,omitempty"`
	RestartCount  *int32            `json:"RestartCount,omitempty"`
}

// Health is a container's health check status.
type Health struct {
	Status string `json:"status"`
}

// Network is one network of a container.
type Network struct {
	NetworkMode   string   `json:"NetworkMode"`
	IPv4Addresses []string `json:"IPv4Addresses,omitempty"`
}

// Stats is a container's stats in the Docker Engine API's shape, as the v4 /stats
// endpoint answers them. CPU times are nanoseconds, memory bytes.
type Stats struct {
	Read        time.Time   `json:"read"`
	PreRead     time.Time   `json:"preread"`
	Name        string      `json:"name"`
	ID          string      `json:"id"`
	PidsStats   PidsStats   `json:"pids_stats"`
	CPUStats    CPUStats    `json:"cpu_stats"`
	PreCPUStats CPUStats    `json:"precpu_stats"`
	MemoryStats MemoryStats `json:"memory_stats"`
	BlkioStats  BlkioStats  `json:"blkio_stats"`
	NumProcs    uint32      `json:"num_procs"`
}

// PidsStats counts a container's processes.
type PidsStats struct {
	Current uint64 `json:"current"`
	Limit   uint64 `json:"limit,omitempty"`
}

// CPUStats is a container's CPU use.
type CPUStats struct {
	CPUUsage       CPUUsage `json:"cpu_usage"`
	SystemCPUUsage uint64   `json:"system_cpu_usage"`
	OnlineCPUs     uint32   `json:"online_cpus"`
}

// CPUUsage is CPU time in nanoseconds.
type CPUUsage struct {
	TotalUsage        uint64 `json:"total_usage"`
	UsageInKernelmode uint64 `json:"usage_in_kernelmode"`
	UsageInUsermode   uint64 `json:"usage_in_usermode"`
}

// MemoryStats is a container's memory use in bytes.
type MemoryStats struct {
	Usage    uint64            `json:"usage"`
	MaxUsage uint64            `json:"max_usage,omitempty"`
	Limit    uint64            `json:"limit"`
	Stats    map[string]uint64 `json:"stats"`
}

// BlkioStats is a container's block I/O; Berth reports the recursive byte counts.
type BlkioStats struct {
	IOServiceBytesRecursive []BlkioEntry `json:"io_service_bytes_recursive"`
}

// BlkioEntry is one block I/O counter.
type BlkioEntry struct {
	Major uint64 `json:"major"`
	Minor uint64 `json:"minor"`
	Op    string `json:"op"`
	Value uint64 `json:"value"`
}
