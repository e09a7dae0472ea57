package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// webhookIntake reads a webhook delivery's body before the app's receiver
// verifies it, so clients that send slowly cannot starve GitHub:
//   - the bytes are charged to the in-flight budget as they arrive, not as
//     declared: a connection that declares 25 MB and trickles holds a
//     chunk, not 25 MB of everyone's budget;
//   - each chunk must arrive within chunkTimeout (32 KiB in 2 s, far below
//     what GitHub sends at), so a trickling body is cut in seconds.
//
// The receiver then checks the signature of a body already in memory.
type webhookIntake struct {
	next         http.Handler
	budget       *semaphore.Weighted
	maxBody      int64
	chunk        int64
	chunkTimeout time.Duration
	wait         time.Duration
}

// Intake defaults.
const (
	intakeChunk        = 32 << 10
	intakeChunkTimeout = 2 * time.Second
	intakeWait         = 5 * time.Second
	maxWebhookBody     = 25 << 20 // GitHub caps payloads at 25 MB
)

func newWebhookIntake(next http.Handler, budget int64) *webhookIntake {
	return &webhookIntake{next: next, budget: semaphore.NewWeighted(budget), maxBody: min(maxWebhookBody, budget),
		chunk: intakeChunk, chunkTimeout: intakeChunkTimeout, wait: intakeWait}
}

func (in *webhookIntake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(context.WithValue(r.Context(), arrivalKey{}, time.Now()))
	n := r.ContentLength
	if r.Method != http.MethodPost || n <= 0 || n > in.maxBody {
		in.next.ServeHTTP(w, r) // the receiver answers what is wrong
		return
	}
	var held int64
	defer func() {
		if held > 0 {
			in.budget.Release(held)
		}
	}()
	rc := http.NewResponseController(w)
	var buf bytes.Buffer
	for int64(buf.Len()) < n {
		step := min(in.chunk, n-int64(buf.Len()))
		ctx, cancel := context.WithTimeout(r.Context(), in.wait)
		err := in.budget.Acquire(ctx, step)
		cancel()
		if err != nil {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "too many webhook bodies in flight; redeliver shortly", http.StatusServiceUnavailable)
			return
		}
		held += step
		if err := rc.SetReadDeadline(time.Now().Add(in.chunkTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			http.Error(w, "set read deadline: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if _, err := io.CopyN(&buf, r.Body, step); err != nil {
			w.Header().Set("Connection", "close")
			http.Error(w, "webhook body arrived too slowly or was cut short", http.StatusBadRequest)
			return
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
	in.next.ServeHTTP(w, r)
}

// perIPListener closes a new connection from an address that already
// holds max open connections, so one client (a flood of slow bodies)
// cannot take every connection the server allows. Behind a reverse proxy
// every connection comes from the proxy: set the cap to 0 there.
type perIPListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func limitPerIP(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &perIPListener{Listener: ln, max: max, open: map[string]int{}}
}

func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		l.mu.Lock()
		if l.open[ip] >= l.max {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		return &ipConn{Conn: c, release: func() { l.done(ip) }}, nil
	}
}

func (l *perIPListener) done(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

type ipConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *ipConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
