package elb

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// ELBv2 ARNs, as AWS formats them:
//
//	arn:aws:elasticloadbalancing:{region}:{account}:loadbalancer/{app|net}/{name}/{id}
//	arn:aws:elasticloadbalancing:{region}:{account}:targetgroup/{name}/{id}
//	arn:aws:elasticloadbalancing:{region}:{account}:listener/{app|net}/{lbName}/{lbId}/{id}
//	arn:aws:elasticloadbalancing:{region}:{account}:listener-rule/{app|net}/{lbName}/{lbId}/{listenerId}/{id}
//
// ids are 16 hex digits.

// arnPrefix returns "arn:aws:elasticloadbalancing:{region}:{account}:".
func arnPrefix(s keys.Scope) string {
	return "arn:" + keys.Partition + ":elasticloadbalancing:" + s.Region + ":" + s.Account + ":"
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// parsed is an ELBv2 ARN's resource part split into its segments.
type parsed struct {
	kind string   // loadbalancer, targetgroup, listener, listener-rule
	segs []string // the segments after the kind
}

// parseARN splits an ARN of the scope; ok is false when it is not an ELBv2 ARN of this
// account and region (such an ARN names nothing here, as on AWS).
func parseARN(s keys.Scope, arn string) (parsed, bool) {
	rest, ok := strings.CutPrefix(arn, arnPrefix(s))
	if !ok {
		return parsed{}, false
	}
	parts := strings.Split(rest, "/")
	want := map[string]int{"loadbalancer": 3, "targetgroup": 2, "listener": 4, "listener-rule": 5}
	n, ok := want[parts[0]]
	if !ok || len(parts)-1 != n {
		return parsed{}, false
	}
	for _, p := range parts[1:] {
		if p == "" {
			return parsed{}, false
		}
	}
	return parsed{kind: parts[0], segs: parts[1:]}, true
}

// lbShort returns "app" or "net" for a load balancer type.
func lbShort(typ string) string {
	if typ == TypeNetwork {
		return "net"
	}
	return "app"
}
