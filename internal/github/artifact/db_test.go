package artifact_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/storetest"
)

var backends = []struct {
	name string
	dsn  func(t testing.TB) string
}{
	{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "perfgate.db") }},
	{"postgres", storetest.PostgresDSN},
}

// pattern is n bytes that differ at every offset mod 251, so a chunk read
// at the wrong place shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// Artifacts in the database: every size around the chunk boundary reads
// back whole and by range (as http.ServeContent serves them), the same
// bytes twice are stored once, a file past the cap is refused, and an
// unknown one is fs.ErrNotExist (the dashboard's 410).
func TestDBSaveOpen(t *testing.T) {
	const chunk = store.ArtifactChunkBytes
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, be.dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			d := artifact.NewDB(st, 3*chunk)
			for _, size := range []int{0, 1, chunk - 1, chunk, chunk + 1, 2*chunk + chunk/2} {
				body := pattern(size)
				sum, n, err := d.Save(bytes.NewReader(body))
				if err != nil || n != int64(size) {
					t.Fatalf("save %d bytes = %d, %v", size, n, err)
				}
				again, _, err := d.Save(bytes.NewReader(body))
				if err != nil || again != sum {
					t.Fatalf("save the same %d bytes again = %s, %v", size, again, err)
				}
				f, err := d.Open(sum)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(f)
				if err != nil || !bytes.Equal(got, body) {
					t.Errorf("%d bytes read back as %d, %v", size, len(got), err)
				}
				f.Close()
				if size < 3 {
					continue
				}
				// A range across the first chunk boundary, served.
				f, _ = d.Open(sum)
				from, to := size/2-1, min(size-1, size/2+chunk/2)
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("GET", "/t", nil)
				req.Header.Set("Range", "bytes="+strconv.Itoa(from)+"-"+strconv.Itoa(to))
				http.ServeContent(rec, req, "t.json", time.Time{}, f)
				f.Close()
				if rec.Code != http.StatusPartialContent || !bytes.Equal(rec.Body.Bytes(), body[from:to+1]) {
					t.Errorf("%d bytes, range %d-%d: %d, %d bytes", size, from, to, rec.Code, rec.Body.Len())
				}
			}
			if _, _, err := d.Save(bytes.NewReader(pattern(3*chunk + 1))); !errors.Is(err, artifact.ErrTooLarge) {
				t.Errorf("one byte over the cap: %v, want ErrTooLarge", err)
			}
			if _, err := d.Open(strings.Repeat("ab", 32)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("open of an unknown sum: %v, want fs.ErrNotExist", err)
			}
			if _, err := d.Open("../../../etc/passwd"); err == nil {
				t.Error("Open accepted a path")
			}
		})
	}
}

// The sweep deletes the blobs no artifact row references once they are
// older than the grace, and keeps a referenced one and a young one.
func TestDBSweep(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			clock := storetest.NewClock()
			st, err := store.Open(ctx, be.dsn(t), store.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			d := artifact.NewDB(st, 0)
			kept, _, _ := d.Save(strings.NewReader("referenced trace"))
			orphan, _, _ := d.Save(strings.NewReader("orphan trace"))
			if _, err := st.Enqueue(ctx, store.JobSpec{Repo: "acme/llm", Tier: "profile"}); err != nil {
				t.Fatal(err)
			}
			j, err := st.Claim(ctx, store.ClaimRequest{Lease: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.PutArtifact(ctx, store.ArtifactUpload{JobID: j.ID, LeaseID: j.LeaseID, Name: "t.json", Size: 16, SHA256: kept}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(2 * time.Hour)
			young, _, _ := d.Save(strings.NewReader("upload whose row is being written"))
			freed, err := d.Sweep(nil, clock.Now().Add(-time.Hour))
			if err != nil || freed.Files != 1 || freed.Bytes != int64(len("orphan trace")) {
				t.Errorf("sweep = %+v, %v; want the orphan's 12 bytes", freed, err)
			}
			for sum, want := range map[string]bool{kept: true, orphan: false, young: true} {
				f, err := d.Open(sum)
				if err == nil {
					f.Close()
				}
				if (err == nil) != want {
					t.Errorf("%s: stored=%v after the sweep (%v), want %v", sum[:8], err == nil, err, want)
				}
			}
		})
	}
}
