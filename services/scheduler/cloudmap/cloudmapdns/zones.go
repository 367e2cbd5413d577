// Package cloudmapdns is the DNS server of Berth's Cloud Map: it answers the private
// DNS namespaces of the (account, region) scopes it serves — A and SRV records of their
// services, with each service's TTL — and forwards every other question to the host's
// resolvers. It is built on github.com/miekg/dns and follows the Cloud Map records in
// etcd (keys.CloudMapAll) with a watch, so a registered or deregistered instance is in
// or out of its answers at once (clients may cache an answer for its TTL).
//
// With Config.LoadBalancerAddrs it also answers each load balancer's DNSName
// (elb.amazonaws.com names of its scopes' ELBv2 load balancers) with those addresses.
//
// Tasks reach it on 169.254.169.253:53 (the address of the Amazon-provided DNS server
// in a VPC): the agent redirects that address from its bridges to the server and writes
// it as the nameserver of every bridge and awsvpc task without dnsServers. See
// docs/service-discovery.md.
package cloudmapdns

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
)

// maxMultivalue is how many records a MULTIVALUE answer carries at most (Route 53's
// multivalue answer routing returns up to eight).
const maxMultivalue = 8

// Zones is an immutable view of the private DNS namespaces a server answers: built by
// Build, swapped whole by Server.Set.
type Zones struct {
	// zones are the namespace domains (fqdn, lower case) with their SOA TTL.
	zones map[string]uint32
	// names are the owner names (fqdn, lower case) that have records.
	names map[string]*owner
}

type owner struct {
	a          []netip.Addr
	srv        []srvTarget
	ttlA       uint32
	ttlSRV     uint32
	weighted   bool
	hasA, hasS bool
}

type srvTarget struct {
	target string
	port   uint16
}

// Build returns the view of the given records: every DNS_PRIVATE namespace is a zone;
// each of its DNS_HTTP services answers, at {service}.{namespace}, an A record per
// instance with AWS_INSTANCE_IPV4 (when the service has an A record) and an SRV record
// per instance with AWS_INSTANCE_PORT targeting {instance}.{service}.{namespace} (when
// it has an SRV record), which answers the instance's A record. Instances that are
// UNHEALTHY are left out unless none is healthy (Route 53 then answers with all of
// them, as it does for multivalue answers).
func Build(nss []*storev1.CloudMapNamespaceRecord, svcs []*storev1.CloudMapServiceRecord, insts []*storev1.CloudMapInstanceRecord) *Zones {
	z := &Zones{zones: map[string]uint32{}, names: map[string]*owner{}}
	nsByID := map[string]string{}
	for _, ns := range nss {
		if ns.GetType() != "DNS_PRIVATE" {
			continue
		}
		fq := dns.Fqdn(strings.ToLower(ns.GetName()))
		z.zones[fq] = uint32(ns.GetSoaTtl())
		nsByID[ns.GetId()] = fq
	}
	bySvc := map[string][]*storev1.CloudMapInstanceRecord{}
	for _, i := range insts {
		bySvc[i.GetServiceId()] = append(bySvc[i.GetServiceId()], i)
	}
	for _, s := range svcs {
		zone, ok := nsByID[s.GetNamespaceId()]
		if !ok || len(s.GetDnsRecords()) == 0 {
			continue
		}
		name := strings.ToLower(s.GetName()) + "." + zone
		o := &owner{weighted: s.GetRoutingPolicy() == "WEIGHTED"}
		for _, d := range s.GetDnsRecords() {
			switch d.GetType() {
			case "A":
				o.hasA, o.ttlA = true, uint32(d.GetTtl())
			case "SRV":
				o.hasS, o.ttlSRV = true, uint32(d.GetTtl())
			}
		}
		members := bySvc[s.GetId()]
		healthy := slices.DeleteFunc(slices.Clone(members), func(i *storev1.CloudMapInstanceRecord) bool { return i.GetHealthStatus() == "UNHEALTHY" })
		if len(healthy) > 0 {
			members = healthy
		}
		slices.SortFunc(members, func(a, b *storev1.CloudMapInstanceRecord) int { return strings.Compare(a.GetId(), b.GetId()) })
		for _, i := range members {
			ip, err := netip.ParseAddr(i.GetAttributes()["AWS_INSTANCE_IPV4"])
			if err != nil || !ip.Is4() {
				continue
			}
			if o.hasA {
				o.a = append(o.a, ip)
			}
			port, err := strconv.ParseUint(i.GetAttributes()["AWS_INSTANCE_PORT"], 10, 16)
			label := strings.ToLower(i.GetId())
			if !o.hasS || err != nil || port == 0 || !validLabel(label) {
				continue
			}
			target := label + "." + name
			o.srv = append(o.srv, srvTarget{target: target, port: uint16(port)})
			ttl := o.ttlSRV
			if o.hasA {
				ttl = o.ttlA
			}
			z.names[target] = &owner{hasA: true, ttlA: ttl, a: []netip.Addr{ip}}
		}
		z.names[name] = o
	}
	return z
}

// loadBalancerTTL is the TTL of a load balancer's A records, ELB's own (60 s).
const loadBalancerTTL = 60

// addLoadBalancers makes each active (or provisioning) load balancer's DNSName answer
// addrs, the hosts its listeners are served on (the `berth lb` role's), as ELB's DNS name
// answers its nodes' addresses. Each name is a zone of its own, so another record type
// of it answers NODATA with its SOA and nothing under it exists.
func (z *Zones) addLoadBalancers(lbs []*storev1.LoadBalancerRecord, addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	for _, lb := range lbs {
		if lb.GetDnsName() == "" || (lb.GetState() != "active" && lb.GetState() != "provisioning") {
			continue
		}
		name := dns.Fqdn(strings.ToLower(lb.GetDnsName()))
		z.zones[name] = loadBalancerTTL
		z.names[name] = &owner{hasA: true, ttlA: loadBalancerTTL, a: slices.Clone(addrs)}
	}
}

// validLabel reports whether s can be one DNS label (an instance id of an ECS task is).
func validLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// zoneOf returns the zone (fqdn) name belongs to, the longest that matches; "" when
// none.
func (z *Zones) zoneOf(name string) string {
	best := ""
	for zone := range z.zones {
		if (name == zone || strings.HasSuffix(name, "."+zone)) && len(zone) > len(best) {
			best = zone
		}
	}
	return best
}

// answer fills m (a reply to q) when q's name is in one of the zones and reports
// whether it did; false means the question is forwarded.
func (z *Zones) answer(q dns.Question, m *dns.Msg) bool {
	name := strings.ToLower(q.Name)
	zone := z.zoneOf(name)
	if zone == "" {
		return false
	}
	m.Authoritative = true
	soaTTL := z.zones[zone]
	soa := &dns.SOA{
		Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: soaTTL},
		Ns:  "ns.berth." + zone, Mbox: "hostmaster.berth." + zone, Serial: 1, Refresh: 7200, Retry: 900, Expire: 1209600, Minttl: 86400,
	}
	o := z.names[name]
	if name == zone && q.Qtype == dns.TypeSOA {
		m.Answer = append(m.Answer, soa)
		return true
	}
	if o == nil && name != zone {
		// No such name: NXDOMAIN unless a longer name below it exists (an empty
		// non-terminal answers NODATA).
		nx := true
		for n := range z.names {
			if strings.HasSuffix(n, "."+name) {
				nx = false
				break
			}
		}
		if nx {
			m.Rcode = dns.RcodeNameError
		}
		m.Ns = append(m.Ns, soa)
		return true
	}
	if o != nil {
		switch q.Qtype {
		case dns.TypeA, dns.TypeANY:
			for _, ip := range pick(o.a, o.weighted) {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: o.ttlA}, A: ip.AsSlice()})
			}
		case dns.TypeSRV:
			for _, t := range pick(o.srv, o.weighted) {
				m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: o.ttlSRV},
					Priority: 1, Weight: 1, Port: t.port, Target: t.target})
				if to := z.names[t.target]; to != nil {
					for _, ip := range to.a {
						m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: t.target, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: to.ttlA}, A: ip.AsSlice()})
					}
				}
			}
		}
	}
	if len(m.Answer) == 0 {
		m.Ns = append(m.Ns, soa)
	}
	return true
}

// pick returns the records of one answer: up to eight for MULTIVALUE, in random
// order; one at random for WEIGHTED (every instance weighs the same).
func pick[T any](recs []T, weighted bool) []T {
	if len(recs) == 0 {
		return nil
	}
	out := slices.Clone(recs)
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if weighted {
		return out[:1]
	}
	return out[:min(len(out), maxMultivalue)]
}
