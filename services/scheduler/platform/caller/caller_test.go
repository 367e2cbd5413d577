package caller

import (
	"errors"
	"net/http"
	"testing"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
)

// TestIdentityNeedsRegion: every call is served in a region, so a call without a valid
// Berth-Region header is refused like one without an account.
func TestIdentityNeedsRegion(t *testing.T) {
	for _, tc := range []struct {
		account, region string
		want            error
	}{
		{"123456789012", "eu-west-1", nil},
		{"123456789012", "us-gov-west-1", nil},
		{"123456789012", "", ErrNoRegion},
		{"123456789012", "../x", ErrNoRegion},
		{"123456789012", "eu-west-1/a", ErrNoRegion},
		{"123456789012", "EU-WEST-1", ErrNoRegion},
		{"123456789012", "local", nil},
		{"12345", "eu-west-1", ErrNoAccount},
	} {
		h := http.Header{}
		h.Set(identity.AccountHeader, tc.account)
		h.Set(identity.RegionHeader, tc.region)
		id, err := identityFrom(h)
		switch {
		case tc.want == nil && (err != nil || id.Scope().Region != tc.region || id.Scope().Account != tc.account):
			t.Errorf("%s/%s: %+v %v", tc.account, tc.region, id, err)
		case tc.want != nil && (!errors.Is(err, tc.want) || connect.CodeOf(err) != connect.CodeUnauthenticated):
			t.Errorf("%s/%s: %v, want %v", tc.account, tc.region, err, tc.want)
		}
	}
}

// TestPrincipal: the principal the gateway sent, else the account's root user.
func TestPrincipal(t *testing.T) {
	for _, tc := range []struct {
		id            Identity
		arn, uniqueID string
	}{
		{Identity{Account: "123456789012"}, "arn:aws:iam::123456789012:root", "123456789012"},
		{Identity{Account: "123456789012", PrincipalARN: "arn:aws:sts::123456789012:assumed-role/r/s", PrincipalID: "AROAX:s"},
			"arn:aws:sts::123456789012:assumed-role/r/s", "AROAX:s"},
	} {
		if arn, uid := tc.id.Principal(); arn != tc.arn || uid != tc.uniqueID {
			t.Errorf("%+v: Principal() = %q, %q; want %q, %q", tc.id, arn, uid, tc.arn, tc.uniqueID)
		}
	}
}
