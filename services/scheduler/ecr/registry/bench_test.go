package registry_test

import (
	"context"
	"crypto/rand"
	"io"
	"log"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/ecr/registry"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/seal"
)

// BenchmarkPushPull pushes then pulls (every layer read whole) a new 64 MiB image of four
// layers through go-containerregistry's in-memory registry and through Berth's ECR
// registry (disk blobs, etcd images, token auth), each in its own tag per iteration:
// the issue's push/pull ratio, at a size the shared test machine affords.
func BenchmarkPushPull(b *testing.B) { benchPushPull(b, 16<<20) }

// BenchmarkPushPull200 is BenchmarkPushPull with a 200 MiB image (four layers of 50
// MiB): `make bench`'s row of the registry (tests/e2e/bench), printed as the ratio of
// the ecr sub-benchmark's time to memory's.
func BenchmarkPushPull200(b *testing.B) { benchPushPull(b, 50<<20) }

// benchPushPull runs the push and pull of an image of four layers of layer bytes each.
func benchPushPull(b *testing.B, layer int64) {
	run := func(b *testing.B, host string, auth authn.Authenticator) {
		b.SetBytes(4 * layer)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			img, err := random.Image(layer, 4) // new layers: every push uploads them
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			ref, err := name.ParseReference(host + "/app:t" + time.Now().Format("150405.000000"))
			if err != nil {
				b.Fatal(err)
			}
			if err := remote.Write(ref, img, remote.WithAuth(auth)); err != nil {
				b.Fatal(err)
			}
			got, err := remote.Image(ref, remote.WithAuth(auth))
			if err != nil {
				b.Fatal(err)
			}
			layers, _ := got.Layers()
			for _, l := range layers {
				rc, err := l.Compressed()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		}
	}
	b.Run("memory", func(b *testing.B) {
		srv := httptest.NewServer(ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))))
		defer srv.Close()
		run(b, srv.Listener.Addr().String(), authn.Anonymous)
	})
	b.Run("ecr", func(b *testing.B) {
		key := make([]byte, seal.KeySize)
		_, _ = rand.Read(key)
		ring, _ := seal.New(seal.Key{ID: "t", Secret: key})
		srv := httptest.NewUnstartedServer(nil)
		host := srv.Listener.Addr().String()
		st := ecr.NewStore(etcdtest.Start(b), ring, host, nil)
		reg, err := registry.New(registry.Config{Store: st, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		srv.Config.Handler = reg
		srv.Start()
		defer srv.Close()
		ctx := caller.With(context.Background(), caller.Identity{Account: scope.Account, Region: scope.Region})
		if _, err := ecr.New(st).CreateRepository(ctx, connect.NewRequest(&ecrv1.CreateRepositoryRequest{RepositoryName: proto.String("app")})); err != nil {
			b.Fatal(err)
		}
		pw, _, _ := st.IssueToken(scope)
		run(b, host, &authn.Basic{Username: "AWS", Password: pw})
	})
}
