package gateway

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// throttler is a token bucket per account.
type throttler struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu       sync.Mutex
	accounts map[string]*rate.Limiter
}

func newThrottler(perSecond float64, burst int, now func() time.Time) *throttler {
	if perSecond < 0 {
		return nil
	}
	return &throttler{limit: rate.Limit(perSecond), burst: burst, now: now, accounts: map[string]*rate.Limiter{}}
}

// allow takes a token from the account's bucket; a nil throttler allows everything.
func (t *throttler) allow(account string) bool {
	if t == nil {
		return true
	}
	t.mu.Lock()
	l, ok := t.accounts[account]
	if !ok {
		l = rate.NewLimiter(t.limit, t.burst)
		t.accounts[account] = l
	}
	t.mu.Unlock()
	return l.AllowN(t.now(), 1)
}

// maxTrackedAddrs bounds the lockout table.
const maxTrackedAddrs = 10000

// lockout slows down repeated failed authentication from one address: after threshold
// consecutive failures the address is locked for base, doubling at each further lockout
// up to max. A success clears the address's record; a record idle for longer than
// 2*max is forgotten.
type lockout struct {
	threshold int
	base, max time.Duration
	now       func() time.Time

	mu    sync.Mutex
	addrs map[string]*lockEntry
}

type lockEntry struct {
	failures    int
	level       int
	lockedUntil time.Time
	last        time.Time
}

func newLockout(threshold int, base, max time.Duration, now func() time.Time) *lockout {
	if threshold < 0 {
		return nil
	}
	return &lockout{threshold: threshold, base: base, max: max, now: now, addrs: map[string]*lockEntry{}}
}

// locked reports whether addr is locked out and for how much longer.
func (l *lockout) locked(addr string) (time.Duration, bool) {
	if l == nil {
		return 0, false
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.addrs[addr]
	if !ok || !now.Before(e.lockedUntil) {
		return 0, false
	}
	return e.lockedUntil.Sub(now), true
}

// failure records a failed authentication from addr.
func (l *lockout) failure(addr string) {
	if l == nil {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.addrs[addr]
	if ok && now.Sub(e.last) > 2*l.max {
		ok = false
	}
	if !ok {
		if len(l.addrs) >= maxTrackedAddrs {
			l.sweep(now)
		}
		e = &lockEntry{}
		l.addrs[addr] = e
	}
	e.last = now
	e.failures++
	if e.failures >= l.threshold {
		d := l.base << min(e.level, 30)
		if d > l.max || d <= 0 {
			d = l.max
		}
		e.lockedUntil = now.Add(d)
		e.level++
		e.failures = 0
	}
}

// success clears addr's record.
func (l *lockout) success(addr string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	delete(l.addrs, addr)
	l.mu.Unlock()
}

func (l *lockout) sweep(now time.Time) {
	for k, e := range l.addrs {
		if now.Sub(e.last) > 2*l.max && !now.Before(e.lockedUntil) {
			delete(l.addrs, k)
		}
	}
	if len(l.addrs) >= maxTrackedAddrs {
		// Under a flood of distinct addresses, keep the locked ones only.
		for k, e := range l.addrs {
			if !now.Before(e.lockedUntil) {
				delete(l.addrs, k)
			}
		}
	}
}
