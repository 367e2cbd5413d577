package task

import (
	"crypto/sha256"
	"encoding/hex"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
)

// ENIAttachmentID returns the id of the ElasticNetworkInterface attachment of the awsvpc
// task taskARN: a UUID-shaped hash of the ARN. The agent computes the same id
// (tasks.AttachmentID) for the attachment it reports ATTACHED and DELETED.
func ENIAttachmentID(taskARN string) string {
	h := sha256.Sum256([]byte("eni\x00" + taskARN))
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// precreatedENI is an awsvpc task's attachment as AWS shows it before the task's network
// exists: status PRECREATED, with the subnet (the first of awsvpcConfiguration's) it is
// created in.
func precreatedENI(taskARN string, nc *ecsv1.NetworkConfiguration) *ecsv1.Attachment {
	details := []*ecsv1.KeyValuePair{}
	if s := nc.GetAwsvpcConfiguration().GetSubnets(); len(s) > 0 {
		details = append(details, &ecsv1.KeyValuePair{Name: proto.String("subnetId"), Value: proto.String(s[0])})
	}
	return &ecsv1.Attachment{Id: proto.String(ENIAttachmentID(taskARN)), Type: proto.String("ElasticNetworkInterface"), Status: proto.String("PRECREATED"), Details: details}
}
