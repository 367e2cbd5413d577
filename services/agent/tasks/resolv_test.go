package tasks

import (
	"strings"
	"testing"
)

func TestResolvConfAndHostname(t *testing.T) {
	got, err := resolvConf([]string{"192.0.2.53", "192.0.2.54"}, []string{"corp.example", "example"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "nameserver 192.0.2.53\nnameserver 192.0.2.54\n") || !strings.Contains(got, "search corp.example example\n") {
		t.Errorf("resolv.conf:\n%s", got)
	}
	if strings.Count(got, "nameserver") != 2 || strings.Count(got, "search") != 1 {
		t.Errorf("host nameservers or search kept beside the container's:\n%s", got)
	}
	if !onlyLoopback("nameserver 127.0.0.53\n") || onlyLoopback("nameserver 127.0.0.53\nnameserver 10.0.0.2\n") || onlyLoopback("") {
		t.Errorf("onlyLoopback wrong")
	}
	if h := shortHostname("0123456789abcdef0123456789abcdef-my_web.1"); h != "0123456789abcdef0123456789abcdef-my-web-1" {
		t.Errorf("shortHostname = %q", h)
	}
	if n := privateDNSName("arn:aws:ecs:eu-west-1:000000000000:task/c/x", "10.240.0.2"); n != "ip-10-240-0-2.eu-west-1.compute.internal" {
		t.Errorf("privateDNSName = %q", n)
	}
	if n := privateDNSName("arn:aws:ecs:us-east-1:000000000000:task/c/x", "10.240.0.2"); n != "ip-10-240-0-2.ec2.internal" {
		t.Errorf("privateDNSName = %q", n)
	}
}
