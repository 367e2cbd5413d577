package task

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"testing"
)

// randomID returns 32 random lowercase hex characters, the shape of control.NewID's ids.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestContainerARN(t *testing.T) {
	const long = "arn:aws:ecs:us-east-1:000000000000:task/web/0123456789abcdef0123456789abcdef"
	got := containerARN(long, true, randomID())
	re := regexp.MustCompile(`^arn:aws:ecs:us-east-1:000000000000:container/web/0123456789abcdef0123456789abcdef/([^/]+)$`)
	m := re.FindStringSubmatch(got)
	if m == nil || len(m[1]) != 36 || !uuidRE.MatchString(m[1]) {
		t.Errorf("long: %s, want container/{cluster}/{taskId}/{36-char UUID}", got)
	}
	short := containerARN("arn:aws:ecs:us-east-1:000000000000:task/0123456789abcdef0123456789abcdef", false, "c1")
	if !regexp.MustCompile(`^arn:aws:ecs:us-east-1:000000000000:container/[0-9a-f-]{36}$`).MatchString(short) {
		t.Errorf("short: %s, want container/{36-char UUID}", short)
	}
	if a, b := uuidFrom("c1"), uuidFrom("c1"); a != b || !uuidRE.MatchString(a) {
		t.Errorf("uuidFrom(c1) = %s then %s, want one well-formed UUID", a, b)
	}
	for range 100 {
		if u := uuidFrom(randomID()); !uuidRE.MatchString(u) {
			t.Fatalf("uuidFrom(randomID()) = %s", u)
		}
	}
}
