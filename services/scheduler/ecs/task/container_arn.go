package task

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// containerARN returns the ARN of a task's container as AWS formats it: with the long ARN
// format "arn:aws:ecs:{region}:{account}:container/{cluster}/{taskId}/{uuid}", else
// "arn:aws:ecs:{region}:{account}:container/{uuid}", where uuid is a 36-character UUID
// made from id (see uuidFrom). taskARN is the task's own ARN, from which the prefix, the
// cluster and the task id are taken. Documented in the API reference's Container shape
// (containerArn) and the long-ARN migration notes of the ECS developer guide.
func containerARN(taskARN string, long bool, id string) string {
	prefix, rest, ok := strings.Cut(taskARN, ":task/")
	if !ok {
		return taskARN + "/" + uuidFrom(id)
	}
	if !long {
		return prefix + ":container/" + uuidFrom(id)
	}
	return prefix + ":container/" + rest + "/" + uuidFrom(id)
}

// uuidFrom formats id as a version 4 UUID (8-4-4-4-12 lowercase hex, version and variant
// bits set). NewID's 32 random hex characters are used as they are; any other id (tests
// inject short ones) is hashed first, so the result is always a well-formed UUID and
// deterministic for a given id.
func uuidFrom(id string) string {
	if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
		sum := sha256.Sum256([]byte(id))
		id = hex.EncodeToString(sum[:16])
	}
	b := []byte(strings.ToLower(id))
	b[12] = '4'
	b[16] = "89ab"[strings.IndexByte(hexDigits, b[16])&3]
	return string(b[0:8]) + "-" + string(b[8:12]) + "-" + string(b[12:16]) + "-" + string(b[16:20]) + "-" + string(b[20:32])
}

const hexDigits = "0123456789abcdef"
