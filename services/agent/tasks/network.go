package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"

	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/services/agent/network"
	"github.com/berthhq/berth/services/agent/runtime"
)

// This file gives a task its network (package network) before its containers start, and
// takes it down once the task stopped: a namespace per container for networkMode bridge
// and none, one for the task for awsvpc, none for host. Setting up is a step of the
// task's start, as the ECS agent's ENI attachment is: a failure stops the task
// (TaskFailedToStart, ResourceInitializationError) before any container starts.

// reasonNetwork prefixes the stoppedReason of a task whose network could not be set up,
// as the ECS agent words resource initialisation failures.
const reasonNetwork = "ResourceInitializationError: unable to set up the task network: "

// attachmentType is the type of an awsvpc task's attachment, as AWS shows it.
const attachmentType = "ElasticNetworkInterface"

// networkMode returns the task's networkMode, bridge when unset (the EC2 default).
func (t *task) networkMode() string {
	return cmpOr(t.a.GetTaskDefinition().GetNetworkMode(), "bridge")
}

// taskID returns the id part of the task's ARN, safe as a file name.
func (t *task) taskID() string { return taskIDOf(t.arn) }

// setupNetwork gives the task its network when its mode needs one (an adopted task
// gets back the network it has). allAdopted says every container of the task was found
// at agent start: such a task without a recorded network was started by an agent from
// before task networking, in the host's namespace, and is left as it runs. It returns
// an error (for the task's stoppedReason) when the host cannot.
func (t *task) setupNetwork(ctx context.Context, allAdopted bool) error {
	mode := t.networkMode()
	if mode == "host" {
		return nil
	}
	nw := t.m.network()
	if allAdopted && (nw == nil || nw.Lookup(t.taskID()) == nil) {
		return nil
	}
	if nw == nil {
		return fmt.Errorf("networkMode %s needs CNI on the container instance, which the agent could not set up: %s", mode, cmpOr(t.m.networkError(), "no network configured"))
	}
	var reqs []network.EndpointRequest
	switch network.Mode(mode) {
	case network.AWSVPC:
		reqs = []network.EndpointRequest{{Key: "", ID: ContainerID(t.arn, "task")}}
	default:
		for _, c := range t.ctrs {
			r := network.EndpointRequest{Key: c.Name, ID: c.ID, LoopbackOnly: c.Def.GetDisableNetworking()}
			if mode == "bridge" && !r.LoopbackOnly {
				for _, pm := range c.Def.GetPortMappings() {
					if lo, hi, ok := network.ParseRange(pm.GetContainerPortRange()); ok && lo > 0 {
						r.Ports = append(r.Ports, network.PortRequest{ContainerPortRange: [2]int32{lo, hi}, Protocol: pm.GetProtocol()})
						continue
					}
					if pm.GetContainerPort() == 0 {
						continue
					}
					r.Ports = append(r.Ports, network.PortRequest{ContainerPort: pm.GetContainerPort(), HostPort: pm.GetHostPort(), Protocol: pm.GetProtocol()})
				}
			}
			reqs = append(reqs, r)
		}
	}
	tn, err := nw.Setup(ctx, t.taskID(), network.Mode(mode), reqs)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.net = tn
	for _, c := range t.ctrs {
		switch mode {
		case "bridge":
			bs := []*ecsv1.NetworkBinding{}
			for _, b := range tn.Endpoint(c.Name).Bindings {
				if b.ContainerPortRange != "" {
					bs = append(bs, &ecsv1.NetworkBinding{BindIp: proto.String(b.BindIP), ContainerPortRange: proto.String(b.ContainerPortRange), HostPortRange: proto.String(b.HostPortRange), Protocol: proto.String(b.Protocol)})
					continue
				}
				bs = append(bs, &ecsv1.NetworkBinding{BindIp: proto.String(b.BindIP), ContainerPort: proto.Int32(b.ContainerPort), HostPort: proto.Int32(b.HostPort), Protocol: proto.String(b.Protocol)})
			}
			c.Bindings = bs
		case "none":
			c.Bindings = []*ecsv1.NetworkBinding{}
		case "awsvpc":
			ep := tn.Endpoints[0]
			c.Bindings = []*ecsv1.NetworkBinding{}
			for _, pm := range c.Def.GetPortMappings() {
				if r := pm.GetContainerPortRange(); r != "" {
					// awsvpc maps a range statically: hostPortRange = containerPortRange.
					c.Bindings = append(c.Bindings, &ecsv1.NetworkBinding{BindIp: proto.String(ep.IP), ContainerPortRange: proto.String(r), HostPortRange: proto.String(r), Protocol: proto.String(cmpOr(pm.GetProtocol(), "tcp"))})
					continue
				}
				if pm.GetContainerPort() == 0 {
					continue
				}
				c.Bindings = append(c.Bindings, &ecsv1.NetworkBinding{BindIp: proto.String(ep.IP), ContainerPort: proto.Int32(pm.GetContainerPort()), HostPort: proto.Int32(pm.GetContainerPort()), Protocol: proto.String(cmpOr(pm.GetProtocol(), "tcp"))})
			}
			c.Interfaces = []*ecsv1.NetworkInterface{{AttachmentId: proto.String(t.attachmentID()), PrivateIpv4Address: proto.String(ep.IP)}}
		}
	}
	if mode == "awsvpc" {
		t.st.Attachments = []*ecsv1.Attachment{t.eniAttachment(tn.Endpoints[0], "ATTACHED")}
	}
	t.broadcastLocked()
	return nil
}

// teardownNetwork releases the task's network once it stopped; the ENI of an awsvpc
// task is then DELETED in the task's next report.
func (t *task) teardownNetwork(ctx context.Context) {
	nw := t.m.network()
	if nw == nil || t.networkMode() == "host" {
		return
	}
	if err := nw.Teardown(context.WithoutCancel(ctx), t.taskID()); err != nil {
		t.m.log.Warn("network teardown failed; retried at the next agent start", "task", t.arn, "err", err)
		return
	}
	t.mu.Lock()
	tn := t.net
	if t.networkMode() == "awsvpc" {
		ep := &network.Endpoint{}
		if tn != nil && len(tn.Endpoints) > 0 {
			ep = tn.Endpoints[0]
		}
		t.st.Attachments = []*ecsv1.Attachment{t.eniAttachment(ep, "DELETED")}
	}
	t.mu.Unlock()
}

// attachmentID is the id of the awsvpc task's attachment: a UUID-shaped hash of the
// task ARN, the same the control plane gives the PRECREATED attachment.
func (t *task) attachmentID() string { return AttachmentID(t.arn) }

// AttachmentID returns the id of the ENI attachment of the awsvpc task taskARN: a
// UUID-shaped hash of the ARN, which the control plane computes the same way when it
// records the attachment PRECREATED.
func AttachmentID(taskARN string) string {
	h := sha256.Sum256([]byte("eni\x00" + taskARN))
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// eniAttachment is the ElasticNetworkInterface attachment of an awsvpc task with its
// details as AWS names them.
func (t *task) eniAttachment(ep *network.Endpoint, status string) *ecsv1.Attachment {
	kv := func(k, v string) *ecsv1.KeyValuePair {
		return &ecsv1.KeyValuePair{Name: proto.String(k), Value: proto.String(v)}
	}
	details := []*ecsv1.KeyValuePair{
		kv("subnetId", cmpOr(t.subnetID(), ep.Subnet)),
		kv("networkInterfaceId", "eni-"+strings.ReplaceAll(t.attachmentID(), "-", "")[:17]),
	}
	if ep.MAC != "" {
		details = append(details, kv("macAddress", ep.MAC))
	}
	if ep.IP != "" {
		details = append(details, kv("privateDnsName", privateDNSName(t.arn, ep.IP)), kv("privateIPv4Address", ep.IP))
	}
	return &ecsv1.Attachment{Id: proto.String(t.attachmentID()), Type: proto.String(attachmentType), Status: proto.String(status), Details: details}
}

// subnetID returns the subnet the task's PRECREATED attachment names (the first of
// networkConfiguration's subnets), or "".
func (t *task) subnetID() string {
	for _, a := range t.a.GetTask().GetAttachments() {
		for _, d := range a.GetDetails() {
			if d.GetName() == "subnetId" {
				return d.GetValue()
			}
		}
	}
	return ""
}

// privateDNSName is the EC2-style DNS name of ip in the region of arn:
// ip-10-0-0-5.ec2.internal in us-east-1, ip-10-0-0-5.<region>.compute.internal elsewhere.
func privateDNSName(arn, ip string) string {
	region := ""
	if f := strings.Split(arn, ":"); len(f) > 3 {
		region = f[3]
	}
	host := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if region == "" || region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + region + ".compute.internal"
}

// netSpec points spec at c's network: its namespace, and hosts and resolv.conf files
// written for it (its own address and host name, links, extraHosts, dnsServers,
// dnsSearchDomains). Host mode keeps the host's unless the container changes them
// (hostModeFiles).
func (t *task) netSpec(c *ctrState, spec *runtime.ContainerSpec) error {
	mode := t.networkMode()
	if mode == "host" {
		return t.hostModeFiles(c, spec)
	}
	t.mu.Lock()
	tn := t.net
	t.mu.Unlock()
	key := c.Name
	if mode == "awsvpc" {
		key = ""
	}
	ep := tn.Endpoint(key)
	if ep == nil {
		return errors.New("the task's network is not set up")
	}
	spec.NetNS = ep.NetNS
	if spec.Hostname == "" {
		if mode == "awsvpc" {
			spec.Hostname = strings.SplitN(privateDNSName(t.arn, ep.IP), ".", 2)[0]
		} else {
			spec.Hostname = shortHostname(c.ID)
		}
	}
	dir := filepath.Join(t.m.netDir(t.arn), c.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if ep.IP != "" {
		fmt.Fprintf(&hosts, "%s\t%s\n", ep.IP, spec.Hostname)
	} else {
		fmt.Fprintf(&hosts, "127.0.0.1\t%s\n", spec.Hostname)
	}
	for _, l := range c.Def.GetLinks() {
		name, alias, _ := strings.Cut(l, ":")
		peer := tn.Endpoint(name)
		if peer == nil || peer.IP == "" {
			return fmt.Errorf("link %q: container %s has no address in the task's network", l, name)
		}
		names := name
		if alias != "" && alias != name {
			names += " " + alias
		}
		fmt.Fprintf(&hosts, "%s\t%s\n", peer.IP, names)
	}
	for _, h := range c.Def.GetExtraHosts() {
		fmt.Fprintf(&hosts, "%s\t%s\n", h.GetIpAddress(), h.GetHostname())
	}
	servers := c.Def.GetDnsServers()
	if r := t.m.network().TaskResolver(); len(servers) == 0 && r != "" {
		// The Cloud Map DNS server: the account's private namespaces, the rest forwarded
		// to the host's resolvers.
		servers = []string{r}
	}
	resolv, err := resolvConf(servers, c.Def.GetDnsSearchDomains())
	if err != nil {
		return err
	}
	spec.HostsFile, spec.ResolvConf = filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(spec.HostsFile, []byte(hosts.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(spec.ResolvConf, []byte(resolv), 0o644)
}

// hostModeFiles gives a host-mode container its own hosts and resolv.conf files when it
// sets extraHosts, dnsServers or dnsSearchDomains (Docker honours them with --network
// host too): the host's files with those applied. Otherwise it keeps the host's.
func (t *task) hostModeFiles(c *ctrState, spec *runtime.ContainerSpec) error {
	def := c.Def
	if len(def.GetExtraHosts()) == 0 && len(def.GetDnsServers()) == 0 && len(def.GetDnsSearchDomains()) == 0 {
		return nil
	}
	dir := filepath.Join(t.m.netDir(t.arn), c.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var b strings.Builder
	b.Write(hosts)
	if len(hosts) > 0 && hosts[len(hosts)-1] != '\n' {
		b.WriteByte('\n')
	}
	for _, h := range def.GetExtraHosts() {
		fmt.Fprintf(&b, "%s\t%s\n", h.GetIpAddress(), h.GetHostname())
	}
	resolv, err := resolvConf(def.GetDnsServers(), def.GetDnsSearchDomains())
	if err != nil {
		return err
	}
	spec.HostsFile, spec.ResolvConf = filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(spec.HostsFile, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(spec.ResolvConf, []byte(resolv), 0o644)
}

// shortHostname is a container's default host name in its own namespace, as Docker's is
// its id: the containerd id cut to a valid host name label.
func shortHostname(id string) string {
	h := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, id)
	return strings.Trim(h[:min(len(h), 63)], "-")
}

// resolvConf returns a container's resolv.conf: the host's, with dnsServers replacing
// its nameservers and dnsSearchDomains its search list. Loopback nameservers (a local
// resolver on the host) cannot be reached from a container's namespace: the resolver's
// upstream file (systemd-resolved's) is used instead when there is one.
func resolvConf(servers, search []string) (string, error) {
	base, err := os.ReadFile("/etc/resolv.conf")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if b, err := os.ReadFile("/run/systemd/resolve/resolv.conf"); err == nil && onlyLoopback(string(base)) {
		base = b
	}
	var out strings.Builder
	for _, line := range strings.Split(string(base), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && ((f[0] == "nameserver" && len(servers) > 0) || ((f[0] == "search" || f[0] == "domain") && len(search) > 0)) {
			continue
		}
		if strings.TrimSpace(line) != "" {
			out.WriteString(line + "\n")
		}
	}
	for _, s := range servers {
		fmt.Fprintf(&out, "nameserver %s\n", s)
	}
	if len(search) > 0 {
		fmt.Fprintf(&out, "search %s\n", strings.Join(search, " "))
	}
	return out.String(), nil
}

func onlyLoopback(resolv string) bool {
	n := 0
	for _, line := range strings.Split(resolv, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			n++
			if ip := net.ParseIP(f[1]); ip == nil || !ip.IsLoopback() {
				return false
			}
		}
	}
	return n > 0
}

// netDir returns the directory of the task's hosts and resolv.conf files, beside its
// volume directory and removed with the task (removeTaskResources).
func (m *Manager) netDir(arn string) string { return m.volumeDir(arn) + ".net" }

// networkHook gives the task its network before its containers are created (an adopted
// task gets back the one it has) and releases it once the task is STOPPED. A network
// that cannot be set up fails the start of the whole task, adopted containers included:
// they all share it.
type networkHook struct{ t *task }

func (h *networkHook) name() string { return "network" }

func (h *networkHook) prestart(ctx context.Context, ts *taskStart) error {
	if h.t.isStopping() {
		return nil
	}
	err := h.t.setupNetwork(ctx, len(ts.missing) == 0)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return errAgentStopping
	}
	return &startFailure{reason: reasonNetwork + err.Error(), all: true}
}

// stop releases the network before STOPPED is reported, so the report carries an awsvpc
// task's ENI DELETED.
func (h *networkHook) stop(ctx context.Context) { h.t.teardownNetwork(ctx) }
