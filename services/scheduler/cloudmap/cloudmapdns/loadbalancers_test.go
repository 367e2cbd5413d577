package cloudmapdns_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/berthhq/berth/services/scheduler/cloudmap/cloudmapdns"
	"github.com/berthhq/berth/services/scheduler/elbv2/elb"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// TestServerAnswersLoadBalancerNames: with LoadBalancerAddrs, a load balancer that the
// ELBv2 model creates in a real embedded etcd has its DNSName answered with those
// addresses (TTL 60 s, as ELB's), AAAA answers NODATA, another account's load balancer
// is forwarded, and a deleted one is gone from the answers.
func TestServerAnswersLoadBalancerNames(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	etcd := etcdtest.Start(t)
	lbs := elb.New(etcd)
	mine := keys.Scope{Account: "111111111111", Region: "us-east-1"}
	other := keys.Scope{Account: "222222222222", Region: "us-east-1"}
	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.8")}
	srv, err := cloudmapdns.Listen(cloudmapdns.Config{Addr: "127.0.0.1:0", Scopes: []keys.Scope{mine}, LoadBalancerAddrs: addrs, Upstreams: []string{upstream(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() { _ = srv.Follow(ctx, etcd) }()

	web, err := lbs.CreateLoadBalancer(ctx, mine, elb.CreateLoadBalancerInput{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := lbs.CreateLoadBalancer(ctx, other, elb.CreateLoadBalancerInput{Name: "theirs"})
	if err != nil {
		t.Fatal(err)
	}
	name := web.GetDnsName()
	var ips []string
	var ttl uint32
	eventually(t, func() bool {
		ips, ttl = aRecords(query(t, "udp", srv.Addr(), name, dns.TypeA))
		return len(ips) == 2
	})
	if !slices.Equal(ips, []string{"10.0.0.7", "10.0.0.8"}) || ttl != 60 {
		t.Errorf("%s = %v TTL %d, want 10.0.0.7 and 10.0.0.8, TTL 60", name, ips, ttl)
	}
	if m := query(t, "tcp", srv.Addr(), name, dns.TypeAAAA); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || !m.Authoritative {
		t.Errorf("AAAA %s: rcode %s, %d answers, authoritative %t; want NODATA", name, dns.RcodeToString[m.Rcode], len(m.Answer), m.Authoritative)
	}
	if ips, _ := aRecords(query(t, "udp", srv.Addr(), theirs.GetDnsName(), dns.TypeA)); !slices.Equal(ips, []string{"192.0.2.1"}) {
		t.Errorf("another account's load balancer answered %v, want it forwarded (192.0.2.1)", ips)
	}

	if err := lbs.DeleteLoadBalancer(ctx, mine, web.GetLoadBalancerArn()); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		ips, _ := aRecords(query(t, "udp", srv.Addr(), name, dns.TypeA))
		return slices.Equal(ips, []string{"192.0.2.1"}) // no longer ours: forwarded
	})
}
