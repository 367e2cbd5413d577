package registrytest_test

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/berthhq/berth/testkit/registrytest"
	"github.com/berthhq/berth/testkit/testimage"
)

func TestPushTestImageRoundTrip(t *testing.T) {
	reg := registrytest.Start(t)
	ref := registrytest.PushTestImage(t, reg, "berth/testimage", "v1")
	if want := reg.Addr() + "/berth/testimage:v1"; ref != want {
		t.Errorf("ref = %q, want %q", ref, want)
	}

	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(r, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	img, err := testimage.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := pulled.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("pulled digest %s, pushed %s", got, want)
	}
}
