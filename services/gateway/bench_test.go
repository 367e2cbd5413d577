package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/berthhq/berth/pkg/identity"

	"connectrpc.com/connect"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	ecsv1 "github.com/berthhq/berth/gen/berth/ecs/v1"
	"github.com/berthhq/berth/gen/berth/ecs/v1/ecsv1connect"
	"github.com/berthhq/berth/services/gateway"
)

// latencies records per-call durations and reports p50 and p99 in microseconds.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	b.ReportMetric(float64(l[len(l)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkGatewayOverhead compares one DescribeContainerInstances call made through the
// gateway (HTTP/2 in, SigV4 verification with a cached key, AWS JSON decode, Connect call,
// AWS JSON encode) with the same call made directly to the scheduler's Connect API. Both
// go over h2c on loopback to the same stub handler; the client's request is signed once
// and replayed, so client-side signing is not counted.
func BenchmarkGatewayOverhead(b *testing.B) {
	e := newEnv(b, func(c *gateway.Config) { c.Rate = -1 })
	ctx := context.Background()
	body := []byte(`{"cluster":"default","containerInstances":["abc"]}`)

	b.Run("direct", func(b *testing.B) {
		client := ecsv1connect.NewEcsServiceClient(gateway.NewH2CClient(), e.sched)
		req := &ecsv1.DescribeContainerInstancesRequest{}
		lat := make(latencies, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			r := connect.NewRequest(req)
			r.Header().Set(identity.AccountHeader, devAccount)
			if _, err := client.DescribeContainerInstances(ctx, r); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		lat.report(b)
	})

	b.Run("gateway", func(b *testing.B) {
		signed, _ := http.NewRequest(http.MethodPost, e.url+"/", bytes.NewReader(body))
		signed.Header.Set("Content-Type", "application/x-amz-json-1.1")
		signed.Header.Set("X-Amz-Target", gateway.TargetPrefix+"DescribeContainerInstances")
		sum := sha256.Sum256(body)
		if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: devKey, SecretAccessKey: devSecret}, signed, hex.EncodeToString(sum[:]), "ecs", region, time.Now()); err != nil {
			b.Fatal(err)
		}
		client := gateway.NewH2CClient()
		lat := make(latencies, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			req, _ := http.NewRequest(http.MethodPost, e.url+"/", bytes.NewReader(body))
			req.Header = signed.Header
			res, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("status %d", res.StatusCode)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		lat.report(b)
	})
}
