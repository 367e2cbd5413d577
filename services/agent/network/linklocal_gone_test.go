package network

import (
	"errors"
	"testing"
)

// TestRuleGone: a -D racing another agent's removal of the same rule is not an error;
// any other iptables failure is.
func TestRuleGone(t *testing.T) {
	for msg, want := range map[string]bool{
		"network: iptables -t nat -D PREROUTING ...: exit status 1: iptables: Bad rule (does a matching rule exist in that chain?).": true,
		"network: iptables -t nat -D PREROUTING ...: exit status 4: iptables: Resource temporarily unavailable.":                     false,
		"network: iptables -t nat -D PREROUTING ...: exit status 2: iptables v1.8.9: unknown option \"--bogus\"":                     false,
	} {
		if got := ruleGone(errors.New(msg)); got != want {
			t.Errorf("ruleGone(%q) = %v, want %v", msg, got, want)
		}
	}
}
