package control

import (
	"context"
	"fmt"
	"net"
	"regexp"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/platform/awserr"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// DefaultTaskSubnetPool is the range awsvpc task subnets are carved from when
// Config.TaskSubnetPool is unset: 256 instances of /24 each.
const DefaultTaskSubnetPool = "10.240.0.0/16"

// CheckTaskSubnetPool returns an error unless pool is "" (the default) or an IPv4 CIDR
// of /24 or wider, which Config.TaskSubnetPool needs.
func CheckTaskSubnetPool(pool string) error {
	if pool == "" {
		return nil
	}
	_, n, err := net.ParseCIDR(pool)
	if err != nil || n.IP.To4() == nil {
		return fmt.Errorf("task subnet pool %q is not an IPv4 CIDR", pool)
	}
	if ones, _ := n.Mask.Size(); ones > 24 {
		return fmt.Errorf("task subnet pool %q is narrower than one /24", pool)
	}
	return nil
}

// parseTaskSubnetPool parses pool (DefaultTaskSubnetPool when empty; callers check it
// with CheckTaskSubnetPool first).
func parseTaskSubnetPool(pool string) *net.IPNet {
	_, n, err := net.ParseCIDR(pool)
	if err != nil || n.IP.To4() == nil {
		_, n, _ = net.ParseCIDR(DefaultTaskSubnetPool)
		return n
	}
	if ones, _ := n.Mask.Size(); ones > 24 {
		_, n, _ = net.ParseCIDR(DefaultTaskSubnetPool)
	}
	return n
}

// freeTaskSubnet returns a /24 of the pool no instance claims (keys.TaskSubnet) and that
// overlaps none of avoid (what the host reported in use: another Berth installation's
// subnet, an interface's network), or "" when every one is taken. The caller claims it in
// its registration txn (IfAbsent), so two registrations racing for one subnet conflict
// and retry.
func (s *Server) freeTaskSubnet(ctx context.Context, avoid []string) (string, error) {
	resp, err := s.kv.Get(ctx, keys.TaskSubnets(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return "", fmt.Errorf("task subnets: %w", err)
	}
	taken := map[string]bool{}
	for _, kv := range resp.Kvs {
		taken[string(kv.Key)] = true
	}
	ones, _ := s.pool.Mask.Size()
	base := s.pool.IP.To4()
	for i := 0; i < 1<<(24-ones); i++ {
		ip := net.IPv4(base[0], base[1]+byte(i>>8), base[2]+byte(i), 0).To4()
		cidr := ip.String() + "/24"
		if !taken[keys.TaskSubnet(cidr)] && !overlapsAny(cidr, avoid) {
			return cidr, nil
		}
	}
	return "", nil
}

// overlapsAny reports whether the IPv4 CIDR cidr shares an address with one of others
// (entries that do not parse are ignored).
func overlapsAny(cidr string, others []string) bool {
	_, a, err := net.ParseCIDR(cidr)
	if err != nil {
		return false
	}
	for _, o := range others {
		if _, b, err := net.ParseCIDR(o); err == nil && (a.Contains(b.IP) || b.Contains(a.IP)) {
			return true
		}
	}
	return false
}

// claimTaskSubnet gives rec a task subnet when it has none, or when its host reports the
// one it has as taken (avoid: the RegisterRequest's taken_task_subnets; the old claim is
// released in txn): a free one overlapping none of avoid, claimed in txn.
func (s *Server) claimTaskSubnet(ctx context.Context, txn *store.Txn, rec *storev1.ContainerInstanceRecord, avoid []string) error {
	if old := rec.GetTaskSubnet(); old != "" {
		if !overlapsAny(old, avoid) {
			return nil
		}
		txn.Delete(keys.TaskSubnet(old))
		rec.TaskSubnet = ""
	}
	cidr, err := s.freeTaskSubnet(ctx, avoid)
	if err != nil || cidr == "" {
		return err
	}
	rec.TaskSubnet = cidr
	txn.IfAbsent(keys.TaskSubnet(cidr)).Put(keys.TaskSubnet(cidr), wrapperspb.String(rec.GetContainerInstance().GetContainerInstanceArn()))
	return nil
}

// DefaultSecurityGroup is the one security group Berth has: every awsvpc task is in it,
// and it allows all inbound and all outbound traffic (Berth enforces no rules of its own;
// what reaches a task is what its host's routes and the peer firewall chains let through,
// docs/networking.md). An awsvpcConfiguration may name it or leave securityGroups out;
// any other group does not exist on Berth and is refused, as AWS refuses a group that
// does not exist.
const DefaultSecurityGroup = "sg-berthallowall"

// subnetID and securityGroupID are the shapes of EC2 ids AWS accepts; Berth records
// subnets as labels (docs/networking.md) and checks only their form.
var (
	subnetID        = regexp.MustCompile(`^subnet-[0-9a-zA-Z]{1,32}$`)
	securityGroupID = regexp.MustCompile(`^sg-[0-9a-zA-Z]{1,32}$`)
)

// CheckNetworkConfiguration validates a RunTask, StartTask, CreateService or
// UpdateService networkConfiguration against the task definition's networkMode as AWS
// does: awsvpc requires awsvpcConfiguration with 1–16 subnets and at most 5 security
// groups, each of which must be DefaultSecurityGroup (the only group that exists on
// Berth); the other modes refuse it. assignPublicIp ENABLED is refused whatever the
// launch type: AWS accepts it for Fargate tasks in a public subnet, but Berth has no
// public addresses to give, and accepting it would ignore it. Errors are
// InvalidParameterException.
func CheckNetworkConfiguration(td *ecsv1.TaskDefinition, nc *ecsv1.NetworkConfiguration) error {
	vpc := nc.GetAwsvpcConfiguration()
	if td.GetNetworkMode() != "awsvpc" {
		if vpc != nil {
			return awserr.InvalidParameterf("Network Configuration is not valid for the given networkMode of this task definition.")
		}
		return nil
	}
	if vpc == nil {
		return awserr.InvalidParameterf("Network Configuration must be provided when networkMode 'awsvpc' is specified.")
	}
	if len(vpc.GetSubnets()) == 0 {
		return awserr.InvalidParameterf("subnets can not be empty.")
	}
	if len(vpc.GetSubnets()) > 16 {
		return awserr.InvalidParameterf("subnets can have at most 16 items.")
	}
	for _, s := range vpc.GetSubnets() {
		if !subnetID.MatchString(s) {
			return awserr.InvalidParameterf("Invalid subnet id %q: subnet ids look like subnet-0123456789abcdef0.", s)
		}
	}
	if len(vpc.GetSecurityGroups()) > 5 {
		return awserr.InvalidParameterf("securityGroups can have at most 5 items.")
	}
	for _, g := range vpc.GetSecurityGroups() {
		if !securityGroupID.MatchString(g) {
			return awserr.InvalidParameterf("Invalid security group id %q: security group ids look like sg-0123456789abcdef0.", g)
		}
	}
	for _, g := range vpc.GetSecurityGroups() {
		if g != DefaultSecurityGroup {
			return awserr.InvalidParameterf("Error retrieving security group information for [%s]: the security group '%s' does not exist on Berth. awsvpcConfiguration.securityGroups can name only %s, Berth's one group, which allows all inbound and outbound traffic (Berth enforces no security group rules); give %s or leave securityGroups out. See docs/networking.md.", g, g, DefaultSecurityGroup, DefaultSecurityGroup)
		}
	}
	switch vpc.GetAssignPublicIp() {
	case "", "DISABLED":
	case "ENABLED":
		return awserr.InvalidParameterf("assignPublicIp ENABLED is not supported by Berth, for FARGATE tasks either: Berth has no public addresses (a task's address comes from its container instance's task subnet). Use DISABLED, and reach the task through a Berth load balancer.")
	default:
		return awserr.InvalidParameterf("Invalid assignPublicIp %q: valid values are ENABLED and DISABLED.", vpc.GetAssignPublicIp())
	}
	return nil
}
