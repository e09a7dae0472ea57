package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/app"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
)

// BenchmarkUnauthenticatedBodies measures the server's heap while 64
// connections send webhook bodies with a wrong signature: "large" sends
// 25 MB bodies as fast as it can, "slow" declares 25 MB and trickles
// 1 KiB every 100 ms. The webhook's in-flight budget (64 MiB by default)
// bounds what is held; the reported peak-heap-MiB is the heap in use above
// the idle server's.
//
//	go test -run XXX -bench UnauthenticatedBodies -benchtime 1x ./internal/github/server
func BenchmarkUnauthenticatedBodies(b *testing.B) {
	for _, mode := range []string{"large", "slow"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				peak, codes := unauthenticatedBodies(b, mode, 64)
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
				b.Logf("%s: answers %v", mode, codes)
			}
		})
	}
}

func unauthenticatedBodies(b *testing.B, mode string, conns int) (uint64, map[int]int) {
	gh := ghtest.New(b)
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	cfg := Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken}
	cfg.HTTP.ReadTimeout = 3 * time.Second // the slow bodies are cut here
	srv, err := New(cfg, st, zerolog.Nop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := srv.HTTPServer()
	go hs.Serve(srv.Listener(ln))
	defer hs.Close()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
				peak.Store(m.HeapInuse - base)
			}
		}
	}()

	const size = 25 << 20
	var (
		mu    sync.Mutex
		codes = map[int]int{}
		wg    sync.WaitGroup
	)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: pull_request\r\nX-GitHub-Delivery: bench-%d\r\n"+
				"X-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n", app.WebhookPath, i, strings.Repeat("0", 64), size)
			go func() {
				chunk := make([]byte, 1<<10)
				if mode == "large" {
					chunk = make([]byte, 64<<10)
				}
				for sent := 0; sent < size; sent += len(chunk) {
					if _, err := c.Write(chunk); err != nil {
						return
					}
					if mode == "slow" {
						time.Sleep(100 * time.Millisecond)
					}
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			code := 0
			if err == nil {
				code = resp.StatusCode
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	return peak.Load(), codes
}
