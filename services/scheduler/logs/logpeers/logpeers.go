// Package logpeers replicates the CloudWatch Logs store (logstore) across scheduler
// replicas, so that events an agent or an application shipped through any replica can
// be read through every other, and survive the loss of the replica (and disk) that took
// them. The scheme (docs/logs.md, "Several scheduler replicas"):
//
//   - Membership: each replica with a log store registers its peer URL under
//     /berth/v1/logpeers/{replica} in etcd with a lease (TTL 5 s by default), so a replica
//     that dies leaves the set within the TTL.
//   - Writes go to every live replica: the replica a change reaches commits it to its own
//     store, then reads the live set from etcd (a linearizable read) and sends the change
//     (logstore.Op, events with the keys it assigned) to every other member; the caller
//     gets success only when all of them stored it. A member that does not answer fails
//     the call (ServiceUnavailable; agents and SDKs retry) until its lease expires.
//   - Reads are local: every live replica holds every change acknowledged while it was a
//     member, and the keys (hence event ids and tokens) are the same on all of them.
//   - Joining (start, or after its lease was lost): a replica first registers (from then
//     on it receives every change), then merges a copy of each shard of every other
//     member (logstore.MergeShard). It refuses reads (ServiceUnavailable) until that is
//     done. Because a replica lists the members only after committing locally, a change
//     it committed before the joiner registered is in the copy the joiner takes after.
package logpeers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/berthhq/berth/services/scheduler/logs/logstore"
)

// Prefix is the etcd prefix of the log store members: {Prefix}{replica} = peer base URL.
const Prefix = "/berth/v1/logpeers/"

// HTTP routes a replica serves for its peers.
const (
	ApplyPath = "/_berth/logpeer/apply"
	ShardPath = "/_berth/logpeer/shard"
)

// Config configures a replica's membership.
type Config struct {
	// Etcd holds the member set. Required.
	Etcd *clientv3.Client
	// Store is this replica's log store. Required.
	Store *logstore.Store
	// Replica names this replica (its key under Prefix). Required.
	Replica string
	// URL is the base URL other replicas reach this one at (http:// for h2c, https://
	// with TLS). Required.
	URL string
	// Client sends changes and fetches shard copies (its transport carries the client
	// certificate with TLS). Default: http.DefaultClient's transport.
	Client *http.Client
	// TTL is the membership lease's TTL; default 5 s.
	TTL time.Duration
	// ApplyTimeout bounds one copy of a change to one member; default 10 s.
	ApplyTimeout time.Duration
	// Authorize, when set, must accept a peer request (Handler) or it answers 403: with
	// TLS, a verified client certificate of the scheduler role.
	Authorize func(*http.Request) bool
	// Logger receives membership changes; nil discards.
	Logger *slog.Logger
}

// Peers is a replica's membership in the log store replica set.
type Peers struct {
	cfg Config

	mu     sync.Mutex
	synced bool
}

// New returns the membership of cfg.Store; Run joins. It makes Replicate the store's
// replication hook (logstore.Store.SetReplication, with SeqTag of the replica) and
// marks the store not ready until Run has caught up.
func New(cfg Config) *Peers {
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * time.Second
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Peers{cfg: cfg}
	cfg.Store.SetReplication(p.Replicate, SeqTag(cfg.Replica))
	cfg.Store.SetReady("not yet a member of the log store replicas")
	return p
}

// SeqTag returns a 16-bit tag of replica for logstore.Config.SeqTag (an FNV hash of its
// name), so two replicas' event keys differ.
func SeqTag(replica string) uint16 {
	var h uint32 = 2166136261
	for i := 0; i < len(replica); i++ {
		h ^= uint32(replica[i])
		h *= 16777619
	}
	return uint16(h ^ h>>16)
}

// members returns the live members other than this replica: name → URL.
func (p *Peers) members(ctx context.Context) (map[string]string, error) {
	resp, err := p.cfg.Etcd.Get(ctx, Prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), Prefix)
		if name != p.cfg.Replica {
			out[name] = string(kv.Value)
		}
	}
	return out, nil
}

// Replicate sends op to every other live member and returns when all stored it; the
// error names the members that did not. It is the store's Config.Replicate hook.
func (p *Peers) Replicate(op logstore.Op) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ApplyTimeout)
	defer cancel()
	peers, err := p.members(ctx)
	if err != nil {
		return fmt.Errorf("list log store replicas: %w", err)
	}
	if len(peers) == 0 {
		return nil
	}
	body, err := json.Marshal(op)
	if err != nil {
		return err
	}
	errs := make(chan error, len(peers))
	for name, url := range peers {
		go func() {
			if err := p.apply(ctx, url, body); err != nil {
				errs <- fmt.Errorf("replica %s: %w", name, err)
				return
			}
			errs <- nil
		}()
	}
	var all []error
	for range peers {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

func (p *Peers) apply(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+ApplyPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// Handler serves the peer routes: POST ApplyPath (a JSON logstore.Op, applied with
// Store.Apply; 204) and GET ShardPath?i=N (a copy of shard N, Store.WriteShard).
func (p *Peers) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ApplyPath, func(w http.ResponseWriter, r *http.Request) {
		var op logstore.Op
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&op); err != nil {
			http.Error(w, "bad op: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := p.cfg.Store.Apply(op); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+ShardPath, func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(r.URL.Query().Get("i"))
		if err != nil || i < 0 || i >= p.cfg.Store.Shards() {
			http.Error(w, "bad shard index", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Berth-Log-Shards", strconv.Itoa(p.cfg.Store.Shards()))
		if _, err := p.cfg.Store.WriteShard(i, w); err != nil {
			p.cfg.Logger.Warn("log store shard copy failed", "shard", i, "err", err)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.cfg.Authorize != nil && !p.cfg.Authorize(r) {
			http.Error(w, "only scheduler replicas may call the log store peer routes", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Synced reports whether this replica is a member and has merged the others' copies.
func (p *Peers) Synced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}

func (p *Peers) setSynced(v bool) {
	p.mu.Lock()
	p.synced = v
	p.mu.Unlock()
	if v {
		p.cfg.Store.SetReady("")
	}
}

// Run joins the replica set and stays in it until ctx ends: register with a lease,
// merge the other members' copies, then serve reads; when the lease is lost (etcd
// unreachable longer than the TTL) the store refuses reads again and joins anew, since
// the others stopped sending it changes meanwhile. It returns ctx's error.
func (p *Peers) Run(ctx context.Context) error {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		p.setSynced(false)
		p.cfg.Store.SetReady("joining the log store replicas")
		err := p.join(ctx)
		if ctx.Err() != nil {
			break
		}
		p.cfg.Logger.Warn("log store membership lost; joining again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return ctx.Err()
}

func (p *Peers) join(ctx context.Context) error {
	ttl := max(int(p.cfg.TTL/time.Second), 1)
	sess, err := concurrency.NewSession(p.cfg.Etcd, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	defer sess.Close()
	if _, err := p.cfg.Etcd.Put(ctx, Prefix+p.cfg.Replica, p.cfg.URL, clientv3.WithLease(sess.Lease())); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	// From here every change reaches this replica; now take in what it missed.
	for {
		err := p.sync(ctx)
		if err == nil {
			break
		}
		p.cfg.Logger.Warn("log store catch-up failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sess.Done():
			return errors.New("lease expired during catch-up")
		case <-time.After(time.Second):
		}
	}
	p.setSynced(true)
	p.cfg.Logger.Info("log store replica in sync", "replica", p.cfg.Replica)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-sess.Done():
		return errors.New("lease expired")
	}
}

// sync merges every shard of every other member into the store.
func (p *Peers) sync(ctx context.Context) error {
	peers, err := p.members(ctx)
	if err != nil {
		return err
	}
	for name, url := range peers {
		var added int64
		for i := 0; ; i++ {
			n, shards, err := p.fetchShard(ctx, url, i)
			if err != nil {
				return fmt.Errorf("replica %s shard %d: %w", name, i, err)
			}
			added += n
			if i+1 >= shards {
				break
			}
		}
		p.cfg.Logger.Info("log store caught up from replica", "replica", name, "events", added)
	}
	return nil
}

func (p *Peers) fetchShard(ctx context.Context, url string, i int) (added int64, shards int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+ShardPath+"?i="+strconv.Itoa(i), nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, 0, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	shards, err = strconv.Atoi(resp.Header.Get("Berth-Log-Shards"))
	if err != nil || shards < 1 {
		return 0, 0, errors.New("answer without Berth-Log-Shards")
	}
	added, err = p.cfg.Store.MergeFrom(resp.Body)
	return added, shards, err
}
