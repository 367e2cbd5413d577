package gateway

import (
	"os"
	"strings"
	"testing"
)

// TestServicesDocumented fails when a service the gateway routes has no row in
// docs/aws-services.md's table, or a row names a service the gateway does not route.
func TestServicesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/aws-services.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			rows[name] = true
		}
	}
	for _, s := range Services {
		if !rows[s.SigningName] {
			t.Errorf("docs/aws-services.md has no row for %s", s.SigningName)
		}
		delete(rows, s.SigningName)
	}
	for name := range rows {
		t.Errorf("docs/aws-services.md has a row for %s, which the gateway does not route", name)
	}
}
