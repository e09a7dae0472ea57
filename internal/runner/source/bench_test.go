package source_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/runner/source"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// fileSource stands in for GitHub's codeload: it streams a tarball file.
type fileSource struct{ path string }

func (f fileSource) Tarball(context.Context, int64, string, string) (io.ReadCloser, error) {
	return os.Open(f.path)
}

// BenchmarkSourceFetch200MB streams a 200 MB tarball (incompressible
// files, so 200 MB on the wire) from the server's source route to an agent
// client that unpacks it into the cache: the path a job's checkout takes.
// Server and agent run in this one process, so peak-RSS-MB (the process's
// high-water mark, reset before each op) bounds both together;
// peak-heap-MB is the Go heap's peak. Neither may grow with the tarball:
// the route copies through a 64 KiB buffer and Unpack writes as it reads.
//
//	go test -run XXX -bench SourceFetch -benchtime 3x ./internal/runner/source
func BenchmarkSourceFetch200MB(b *testing.B) {
	dir := b.TempDir()
	tgzPath := filepath.Join(dir, "repo.tar.gz")
	const sha = "0123456789abcdef0123456789abcdef01234567"
	if err := writeBigTarball(tgzPath, "o-r-0123456", 200, 1<<20); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(tgzPath)

	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "db.sqlite"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ts := httptest.NewServer(agentserver.NewServer(st, agentserver.Options{RegistrationToken: "reg", Lease: time.Hour, Source: fileSource{tgzPath}}))
	defer ts.Close()
	client, err := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, RegistrationToken: "reg", Name: "bench", Labels: []string{"gpu"}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := client.Register(ctx); err != nil {
		b.Fatal(err)
	}
	plan, err := agentapi.PlanAt(config.Default(), "quick", agentapi.Commits{Repo: "o/r", Head: sha})
	if err != nil {
		b.Fatal(err)
	}
	pb, _ := json.Marshal(plan)
	if _, err := st.Enqueue(ctx, store.JobSpec{Tier: "quick", Repo: "o/r", HeadSHA: sha, Labels: []string{"gpu"}, Config: pb}); err != nil {
		b.Fatal(err)
	}
	job, err := client.Claim(ctx, time.Second)
	if err != nil || job == nil {
		b.Fatalf("claim: %v", err)
	}

	var peakHeap, peakRSS float64
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cache, err := source.NewCache(filepath.Join(dir, fmt.Sprintf("cache-%d", i)), 0, source.Limits{}, zerolog.Nop())
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		resetHWM()
		stop := make(chan struct{})
		var heap atomic.Uint64
		go func() {
			var ms runtime.MemStats
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > heap.Load() {
					heap.Store(ms.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		co, err := cache.Get(ctx, sha, func(ctx context.Context) (io.ReadCloser, error) {
			return client.Source(ctx, job.JobID, job.LeaseID, sha)
		})
		close(stop)
		if err != nil {
			b.Fatal(err)
		}
		if co.Tree.Bytes != 200<<20 {
			b.Fatalf("unpacked %d bytes", co.Tree.Bytes)
		}
		co.Release()
		peakHeap = max(peakHeap, float64(heap.Load())/(1<<20))
		peakRSS = max(peakRSS, float64(hwmKB())/1024)
		b.StopTimer()
		_ = os.RemoveAll(filepath.Join(dir, fmt.Sprintf("cache-%d", i)))
		b.StartTimer()
	}
	b.ReportMetric(peakHeap, "peak-heap-MB")
	b.ReportMetric(peakRSS, "peak-RSS-MB")
}

// writeBigTarball writes n files of size random bytes under top/.
func writeBigTarball(path, top string, n, size int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		if _, err := rand.Read(buf); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%s/weights/part-%03d.bin", top, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(size)}); err != nil {
			return err
		}
		if _, err := tw.Write(buf); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// resetHWM resets the process's peak RSS (Linux: clear_refs 5).
func resetHWM() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func hwmKB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n
			}
		}
	}
	return 0
}
