package tasks

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Labels the agent sets on every container it creates, so a restarted
// agent can tell what each container is.
const (
	LabelTaskARN        = "com.berthhq.task-arn"
	LabelContainerName  = "com.berthhq.container-name"
	LabelCluster        = "com.berthhq.cluster"
	LabelInstance       = "com.berthhq.container-instance"
	LabelTaskDefinition = "com.berthhq.task-definition" // family:revision
	LabelHostID         = "com.berthhq.host-id"
)

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// ContainerID returns the containerd id of a task's container: the task
// id and the container name, made safe for containerd and at most 76
// bytes (a hash replaces the tail of long names).
func ContainerID(taskARN, name string) string {
	taskID := taskARN[strings.LastIndex(taskARN, "/")+1:]
	id := unsafeID.ReplaceAllString(taskID+"-"+name, "_")
	id = strings.TrimLeft(id, "_.-")
	if len(id) > 76 || id == "" {
		sum := sha256.Sum256([]byte(taskARN + "\x00" + name))
		id = strings.TrimRight(id[:min(len(id), 59)], "_.-") + "-" + hex.EncodeToString(sum[:8])
	}
	return id
}
