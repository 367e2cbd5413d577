package network

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAddGate: ADDs of a network without a successful ADD run one at a time, whatever
// the network, a failed ADD leaves its network unprimed, and once a network's ADD has
// succeeded its ADDs run concurrently.
func TestAddGate(t *testing.T) {
	var g addGate
	var running, most atomic.Int32
	slowAdd := func(err error) func() error {
		return func() error {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			return err
		}
	}
	// Unprimed: a failing first ADD of bridge beside first ADDs of bridge and awsvpc.
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	boom := errors.New("boom")
	wg.Go(func() { errc <- g.add("bridge", slowAdd(boom)) })
	wg.Go(func() { errc <- g.add("bridge", slowAdd(nil)) })
	wg.Go(func() { errc <- g.add("awsvpc", slowAdd(nil)) })
	wg.Wait()
	close(errc)
	failed := 0
	for err := range errc {
		if errors.Is(err, boom) {
			failed++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if failed != 1 {
		t.Fatalf("%d ADDs returned the failure, want 1", failed)
	}
	if got := most.Load(); got != 1 {
		t.Fatalf("%d unprimed ADDs ran at once, want 1", got)
	}

	// Primed: two ADDs of bridge that each wait for the other to start must both finish
	// (serialised, they would wait forever).
	started := make(chan struct{}, 2)
	both := make(chan struct{})
	var once sync.Once
	rendezvous := func() error {
		started <- struct{}{}
		if len(started) == 2 {
			once.Do(func() { close(both) })
		}
		select {
		case <-both:
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("the other ADD did not start: primed ADDs ran one at a time")
		}
	}
	done := make(chan error, 2)
	go func() { done <- g.add("bridge", rendezvous) }()
	go func() { done <- g.add("bridge", rendezvous) }()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
