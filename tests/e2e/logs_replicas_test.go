package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	logsv1 "github.com/berthhq/berth/gen/berth/logs/v1"
	"github.com/berthhq/berth/gen/berth/logs/v1/logsv1connect"
	"github.com/berthhq/berth/tests/e2e/harness"
)

// replicaLogs is a CloudWatch Logs client of one scheduler replica, called as the
// gateway calls it (identity headers over the internal h2c listener).
func replicaLogs(addr string) logsv1connect.LogsServiceClient {
	id := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Berth-Account", harness.AccountID)
			req.Header().Set("Berth-Region", harness.Region)
			return next(ctx, req)
		}
	})
	return logsv1connect.NewLogsServiceClient(&http.Client{Timeout: 30 * time.Second}, "http://"+addr, connect.WithInterceptors(id))
}

// readAll pages GetLogEvents from the head of group/stream through cl.
func readAll(ctx context.Context, cl logsv1connect.LogsServiceClient, group, stream string) ([]string, error) {
	var out []string
	var token *string
	for {
		resp, err := cl.GetLogEvents(ctx, connect.NewRequest(&logsv1.GetLogEventsRequest{
			LogGroupName: proto.String(group), LogStreamName: proto.String(stream), StartFromHead: true, NextToken: token}))
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Msg.GetEvents() {
			out = append(out, e.GetMessage())
		}
		if token != nil && resp.Msg.GetNextForwardToken() == *token {
			return out, nil
		}
		token = resp.Msg.NextForwardToken
	}
}

// TestLogStoreReplicas: with two scheduler replicas, events put through either are read
// through the other, in the same order; after kill -9 of one replica every acknowledged
// event is read through the survivor; and the killed replica, restarted with its log
// store's disk lost, catches up and serves every event again.
func TestLogStoreReplicas(t *testing.T) {
	t.Parallel() // see main_test.go
	c := harness.Start(t, harness.Options{Agents: 1})
	ctx := t.Context()
	c.Eventually(ctx, 60*time.Second, "both replicas in the log store replica set", func() error {
		resp, err := c.EtcdClient.Get(ctx, "/berth/v1/logpeers/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count != 2 {
			err = fmt.Errorf("%d members", resp.Count)
		}
		return err
	})
	r := []logsv1connect.LogsServiceClient{replicaLogs(c.SchedulerAddrs[0]), replicaLogs(c.SchedulerAddrs[1])}
	const group, stream = "/e2e/replicas", "s"
	c.Eventually(ctx, 30*time.Second, "log group created through s0", func() error {
		_, err := r[0].CreateLogGroup(ctx, connect.NewRequest(&logsv1.CreateLogGroupRequest{LogGroupName: proto.String(group)}))
		if connect.CodeOf(err) == connect.CodeAlreadyExists {
			return nil
		}
		return err
	})
	if _, err := r[1].CreateLogStream(ctx, connect.NewRequest(&logsv1.CreateLogStreamRequest{LogGroupName: proto.String(group), LogStreamName: proto.String(stream)})); err != nil {
		t.Fatalf("CreateLogStream through s1: %v", err)
	}
	var acked []string
	put := func(via int, batch int, retryFor time.Duration) error {
		var evs []*logsv1.InputLogEvent
		var msgs []string
		now := time.Now().UnixMilli()
		for i := range 50 {
			m := fmt.Sprintf("b%03d-e%02d", batch, i)
			msgs = append(msgs, m)
			evs = append(evs, &logsv1.InputLogEvent{Timestamp: now, Message: proto.String(m)})
		}
		deadline := time.Now().Add(retryFor)
		for {
			_, err := r[via].PutLogEvents(ctx, connect.NewRequest(&logsv1.PutLogEventsRequest{
				LogGroupName: proto.String(group), LogStreamName: proto.String(stream), LogEvents: evs}))
			if err == nil {
				acked = append(acked, msgs...)
				return nil
			}
			if time.Now().After(deadline) {
				return err
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for b := range 40 {
		if err := put(b%2, b, 0); err != nil {
			t.Fatalf("batch %d through s%d: %v", b, b%2, err)
		}
	}
	var first []string
	for i := range 2 {
		got, err := readAll(ctx, r[i], group, stream)
		if err != nil {
			t.Fatalf("read through s%d: %v", i, err)
		}
		if len(got) != len(acked) {
			t.Fatalf("s%d reads %d events, want %d", i, len(got), len(acked))
		}
		if i == 0 {
			first = got
		} else if !slices.Equal(first, got) {
			t.Fatal("the replicas read the events in different orders")
		}
	}

	// kill -9 s0: writes through s1 fail until s0's membership lease expires, then go on;
	// every acknowledged event is read through s1.
	c.Schedulers[0].Kill()
	killed := time.Now()
	for b := 40; b < 60; b++ {
		if err := put(1, b, 30*time.Second); err != nil {
			t.Fatalf("batch %d through s1 after s0 died: %v", b, err)
		}
	}
	t.Logf("20 batches through s1 within %s of killing s0", time.Since(killed).Round(time.Millisecond))
	wantAll := func(i int) error {
		got, err := readAll(ctx, r[i], group, stream)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, m := range got {
			have[m] = true
		}
		for _, m := range acked {
			if !have[m] {
				return fmt.Errorf("s%d lacks acknowledged event %s (reads %d events)", i, m, len(got))
			}
		}
		return nil
	}
	if err := wantAll(1); err != nil {
		t.Fatal(err)
	}

	// s0 comes back without its log store (the disk is lost): it catches up from s1
	// before it answers reads, then serves everything, and takes new writes again.
	if err := os.RemoveAll(filepath.Join(c.Dir, "cwlogs-0")); err != nil {
		t.Fatal(err)
	}
	if err := c.Schedulers[0].Start(); err != nil {
		t.Fatal(err)
	}
	c.Eventually(ctx, 60*time.Second, "s0 caught up", func() error {
		err := wantAll(0)
		var ce *connect.Error
		if errors.As(err, &ce) {
			return fmt.Errorf("s0: %v", ce)
		}
		return err
	})
	if err := put(0, 60, 30*time.Second); err != nil {
		t.Fatalf("batch through s0 after its return: %v", err)
	}
	if err := wantAll(1); err != nil {
		t.Fatal(err)
	}
}
