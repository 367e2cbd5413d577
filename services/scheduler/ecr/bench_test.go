package ecr_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	ecrv1 "github.com/berthhq/berth/gen/berth/ecr/v1"
	storev1 "github.com/berthhq/berth/gen/berth/store/v1"
	"github.com/berthhq/berth/services/scheduler/ecr"
	"github.com/berthhq/berth/services/scheduler/platform/caller"
	"github.com/berthhq/berth/services/scheduler/platform/etcdembed/etcdtest"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
	"github.com/berthhq/berth/services/scheduler/platform/store"
)

// BenchmarkDescribeImagesPage10kTags is the figure: one DescribeImages page
// (maxResults 100, the default) of a repository holding 10,000 tagged images, on the
// embedded etcd. The images are written straight into etcd, as pushes would leave them.
func BenchmarkDescribeImagesPage10kTags(b *testing.B) {
	kv := etcdtest.Start(b)
	st := ecr.NewStore(kv, nil, "127.0.0.1:5001", nil)
	h := ecr.New(st)
	ctx := caller.With(context.Background(), caller.Identity{Account: scope.Account, Region: scope.Region})
	if _, err := h.CreateRepository(ctx, connect.NewRequest(&ecrv1.CreateRepositoryRequest{RepositoryName: proto.String("big")})); err != nil {
		b.Fatal(err)
	}
	const images, workers = 10000, 8
	manifest := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":100},"layers":[]}`)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < images; i += workers {
				digest := fmt.Sprintf("sha256:%064x", i)
				tag := fmt.Sprintf("v%05d", i)
				txn := store.NewTxn(kv).
					Put(keys.EcrImage(scope, "big", digest), &storev1.EcrImageRecord{Digest: digest, MediaType: ecr.OCIManifest, Manifest: manifest,
						Size: 1000, PushedAt: float64(time.Now().Unix()), Tags: []string{tag}}).
					Put(keys.EcrTag(scope, "big", tag), &storev1.EcrTagRecord{Digest: digest})
				if _, err := txn.Commit(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := h.DescribeImages(ctx, connect.NewRequest(&ecrv1.DescribeImagesRequest{RepositoryName: proto.String("big")}))
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Msg.GetImageDetails()) != 100 || res.Msg.GetNextToken() == "" {
			b.Fatalf("page of %d, token %q", len(res.Msg.GetImageDetails()), res.Msg.GetNextToken())
		}
	}
}
