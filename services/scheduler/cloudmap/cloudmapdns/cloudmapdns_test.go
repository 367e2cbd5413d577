package cloudmapdns_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/cloudmap"
	"github.com/berthhq/berth/services/scheduler/cloudmap/cloudmapdns"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

// upstream starts a DNS server on loopback (UDP and TCP) that answers every A question
// with 192.0.2.1 (TTL 42), standing for the host's resolver.
func upstream(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 42}, A: net.ParseIP("192.0.2.1")})
		_ = w.WriteMsg(m)
	})
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}} {
		go func() { _ = srv.ActivateAndServe() }()
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return pc.LocalAddr().String()
}

func query(t *testing.T, network, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	res, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	return res
}

func aRecords(m *dns.Msg) ([]string, uint32) {
	var ips []string
	var ttl uint32
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
			ttl = a.Hdr.Ttl
		}
	}
	slices.Sort(ips)
	return ips, ttl
}

// TestServerFollowsCloudMap drives the DNS server with miekg/dns's client over the
// records the Cloud Map registry writes to a real embedded etcd: A and SRV answers with
// the service's TTLs, instances coming and going, unhealthy instances left out,
// NXDOMAIN inside a namespace, another account's namespace not answered, and other
// names forwarded to the upstream resolver over UDP and TCP.
func TestServerFollowsCloudMap(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	etcd := etcdtest.Start(t)
	reg := cloudmap.NewRegistry(etcd, nil)
	mine := keys.Scope{Account: "111111111111", Region: "us-east-1"}
	other := keys.Scope{Account: "222222222222", Region: "us-east-1"}

	srv, err := cloudmapdns.Listen(cloudmapdns.Config{Addr: "127.0.0.1:0", Scopes: []keys.Scope{mine}, Upstreams: []string{upstream(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() { _ = srv.Follow(ctx, etcd) }()

	if _, err := reg.CreateNamespace(ctx, mine, cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "internal.test", Vpc: "vpc-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.CreateNamespace(ctx, other, cloudmap.CreateNamespaceInput{Type: cloudmap.TypeDNSPrivate, Name: "secret.test", Vpc: "vpc-1"}); err != nil {
		t.Fatal(err)
	}
	nss, err := reg.Namespaces(ctx, mine)
	if err != nil || len(nss) != 1 {
		t.Fatalf("namespaces = %v, %v", nss, err)
	}
	web, err := reg.CreateService(ctx, mine, cloudmap.CreateServiceInput{
		Name: "web", NamespaceID: nss[0].GetId(), HasDNSConfig: true, HasCustomHealth: true,
		DNSRecords: dnsRecords("A", 10, "SRV", 20),
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, ip := range map[string]string{"task1": "10.1.0.5", "task2": "10.1.0.6"} {
		if _, err := reg.RegisterInstance(ctx, mine, web.GetId(), id, "", map[string]string{cloudmap.AttrIPv4: ip, cloudmap.AttrPort: "8080"}); err != nil {
			t.Fatal(err)
		}
	}
	addr := srv.Addr()
	eventually(t, func() bool {
		ips, _ := aRecords(query(t, "udp", addr, "web.internal.test", dns.TypeA))
		return len(ips) == 2
	})

	res := query(t, "udp", addr, "WEB.internal.test", dns.TypeA)
	if ips, ttl := aRecords(res); !slices.Equal(ips, []string{"10.1.0.5", "10.1.0.6"}) || ttl != 10 || !res.Authoritative {
		t.Errorf("A web = %v ttl %d aa %v", ips, ttl, res.Authoritative)
	}
	res = query(t, "tcp", addr, "web.internal.test", dns.TypeSRV)
	var ports []uint16
	for _, rr := range res.Answer {
		if s, ok := rr.(*dns.SRV); ok && s.Hdr.Ttl == 20 {
			ports = append(ports, s.Port)
		}
	}
	if len(ports) != 2 || ports[0] != 8080 || len(res.Extra) != 2 {
		t.Errorf("SRV web = %v", res)
	}
	if ips, _ := aRecords(query(t, "udp", addr, "task1.web.internal.test", dns.TypeA)); !slices.Equal(ips, []string{"10.1.0.5"}) {
		t.Errorf("A task1.web = %v", ips)
	}
	if res := query(t, "udp", addr, "nope.internal.test", dns.TypeA); res.Rcode != dns.RcodeNameError || len(res.Ns) != 1 {
		t.Errorf("nope.internal.test = %v", res)
	}

	// Unhealthy and deregistered instances leave the answer.
	if err := reg.SetCustomHealth(ctx, mine, web.GetId(), "task1", cloudmap.Unhealthy); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		ips, _ := aRecords(query(t, "udp", addr, "web.internal.test", dns.TypeA))
		return slices.Equal(ips, []string{"10.1.0.6"})
	})
	if _, err := reg.DeregisterInstance(ctx, mine, web.GetId(), "task2"); err != nil {
		t.Fatal(err)
	}
	// With no healthy instance left, the unhealthy one is answered (Route 53's fallback).
	eventually(t, func() bool {
		ips, _ := aRecords(query(t, "udp", addr, "web.internal.test", dns.TypeA))
		return slices.Equal(ips, []string{"10.1.0.5"})
	})

	// Another account's namespace and public names go to the upstream resolver.
	for _, network := range []string{"udp", "tcp"} {
		for _, name := range []string{"secret.test", "example.com"} {
			if ips, ttl := aRecords(query(t, network, addr, name, dns.TypeA)); !slices.Equal(ips, []string{"192.0.2.1"}) || ttl != 42 {
				t.Errorf("%s %s forwarded = %v ttl %d", network, name, ips, ttl)
			}
		}
	}
}

func dnsRecords(kv ...any) []*storev1.CloudMapDnsRecord {
	var out []*storev1.CloudMapDnsRecord
	for i := 0; i < len(kv); i += 2 {
		out = append(out, &storev1.CloudMapDnsRecord{Type: kv[i].(string), Ttl: int64(kv[i+1].(int))})
	}
	return out
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
