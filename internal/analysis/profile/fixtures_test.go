package profile_test

import (
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/tokenize"
	"github.com/perfgate/perfgate/internal/runner/sim"
)

var update = flag.Bool("update", false, "regenerate testdata/profile from the simulated engine and rewrite the golden files")

const fixtureDir = "../../../testdata/profile"

// fixtures are scheduler profiles of the simulated engine under one closed
// loop load; they differ in one knob each from base.
var fixtures = []struct {
	name   string
	mutate func(*sim.Config)
}{
	{"base", func(*sim.Config) {}},
	{"eager", func(c *sim.Config) { c.PrefillEagerness = 1 }},
	{"eager-again", func(c *sim.Config) { c.PrefillEagerness = 1; c.Seed = 2 }},
	{"slow", func(c *sim.Config) { c.Slowdown = 1.3 }},
}

func fixtureConfig() sim.Config {
	c := sim.DefaultConfig().Quiet()
	c.Jitter = 0.02
	c.DecodeStep, c.PerSeqCost = 2*time.Millisecond, 20*time.Microsecond
	c.BaseTTFT, c.PrefillPerToken, c.PrefillStepOverhead = time.Millisecond, 10*time.Microsecond, 3*time.Millisecond
	c.PrefillEagerness = 0.25
	return c
}

// TestRegenerateFixtures writes testdata/profile/*.trace.json.gz when run
// with -update; otherwise it checks they exist.
func TestRegenerateFixtures(t *testing.T) {
	t.Parallel()
	for _, f := range fixtures {
		path := filepath.Join(fixtureDir, f.name+".trace.json.gz")
		if !*update {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("fixture missing: %v (run go test ./internal/analysis/profile -update)", err)
			}
			continue
		}
		cfg := fixtureConfig()
		f.mutate(&cfg)
		body := profileUnderLoad(t, cfg)
		if err := os.MkdirAll(fixtureDir, 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		zw := gzip.NewWriter(out)
		if _, err := zw.Write(body); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// profileUnderLoad runs cfg with 16 closed-loop streams for 1.5 s between
// /start_profile and /stop_profile and returns the trace.
func profileUnderLoad(t *testing.T, cfg sim.Config) []byte {
	e, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(e.Handler())
	defer ts.Close()
	defer e.Close()
	postEmpty := func(path string) []byte {
		resp, err := http.Post(ts.URL+path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
		return b
	}
	postEmpty("/start_profile")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				ids := make([]int, 64)
				for j := range ids {
					ids[j] = (w*1000 + i*64 + j) % tokenize.VocabSize
				}
				prompt, err := tokenize.Decode(ids)
				if err != nil {
					t.Error(err)
					return
				}
				body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"stream":true}`, prompt, 12+(w*7+i*13)%25)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/completions", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return postEmpty("/stop_profile")
}
