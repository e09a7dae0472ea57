package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/runner/sim"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// modelTally serves a sim engine over loopback HTTP and counts the model
// each generation request names.
type modelTally struct {
	mu     sync.Mutex
	models map[string]int
}

func startTalliedSim(t *testing.T, cfg sim.Config) (string, *modelTally, func()) {
	t.Helper()
	e, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tally := &modelTally{models: map[string]int{}}
	h := e.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == EndpointChat || r.URL.Path == EndpointCompletions {
			body, _ := io.ReadAll(r.Body)
			var p struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal(body, &p)
			tally.mu.Lock()
			tally.models[p.Model]++
			tally.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if err := e.Close(); err != nil {
				t.Errorf("close sim: %v", err)
			}
			srv.Close()
		})
	}
	t.Cleanup(stop)
	return srv.URL, tally, stop
}

func fastSim() sim.Config {
	cfg := sim.DefaultConfig().Quiet()
	cfg.BaseTTFT, cfg.PrefillPerToken, cfg.DecodeStep, cfg.PerSeqCost, cfg.PrefillStepOverhead = 0, 0, 100*time.Microsecond, 0, 0
	return cfg
}

// Multi-turn sessions against the real sim over HTTP: each turn's prompt
// is the previous prompt, an answer and new user text; a turn goes only
// after the previous answer; the engine finds each conversation's prefix
// in its cache (turn 0 finds nothing), so the run's prefix-cache hit rate
// is high where the same number of plain prompts finds none; the prompts
// are the seed's.
func TestSessionsReuseTheConversationPrefix(t *testing.T) {
	const sessions, turns, in, out, user, block = 6, 4, 64, 16, 32, 16
	for _, endpoint := range []string{EndpointChat, EndpointCompletions} {
		t.Run(endpoint, func(t *testing.T) {
			var trace lockedBuffer
			cfg := fastSim()
			cfg.Trace = &trace
			url, _, stop := startTalliedSim(t, cfg)
			shape := &result.Traffic{Sessions: &result.Sessions{Count: sessions, Turns: turns, UserLen: user}}
			run := func(id string, seed int64, traffic *result.Traffic) *result.Result {
				t.Helper()
				r, err := Run(context.Background(), Options{Target: url, Endpoint: endpoint, NumPrompts: sessions * turns, InputLen: in, OutputLen: out,
					MaxConcurrency: 3, Seed: seed, RunID: id, Traffic: traffic, Timeout: time.Minute,
					CacheSalt: id}) // as the agent salts runs: no run (nor the first request) warms another
				if err != nil {
					t.Fatal(err)
				}
				if r.Completed != sessions*turns || r.Failed != 0 {
					t.Fatalf("%s: completed %d failed %d: %v", id, r.Completed, r.Failed, r.Perfgate.ErrorCounts)
				}
				return r
			}
			plain := run("plain", 1, nil)
			shaped := run("chat", 1, shape)
			again := run("again", 1, shape)
			other := run("other", 2, shape)
			stop()

			if shaped.Perfgate.DatasetHash != again.Perfgate.DatasetHash || shaped.Perfgate.DatasetHash == other.Perfgate.DatasetHash || shaped.Perfgate.DatasetHash == plain.Perfgate.DatasetHash {
				t.Errorf("dataset hashes: seed 1 %s and %s must match, seed 2 %s and plain %s differ", shaped.Perfgate.DatasetHash, again.Perfgate.DatasetHash, other.Perfgate.DatasetHash, plain.Perfgate.DatasetHash)
			}
			tr := shaped.Perfgate.Traffic
			if tr == nil || tr.Sessions == nil || tr.Counts["sessions"] != sessions || plain.Perfgate.Traffic != nil {
				t.Errorf("result records traffic %+v (plain %+v); want %d sessions", tr, plain.Perfgate.Traffic, sessions)
			}
			hit := func(r *result.Result) float64 {
				if p := r.Perfgate.ServerMetrics.PrefixCacheHitRate; p != nil {
					return *p
				}
				t.Fatalf("no prefix-cache hit rate in %s", r.Perfgate.RunID)
				return 0
			}
			// Turn t reuses all but the last (t−1)·48 + 64 of … tokens: over
			// the run about half the prompt tokens are cached.
			if h, p := hit(shaped), hit(plain); h < 0.45 || p > 0.05 {
				t.Errorf("prefix-cache hit rate: sessions %.2f, plain %.2f; want ≥ 0.45 and ≈ 0", h, p)
			}

			recs := readSimTrace(t, trace.buf.Bytes())
			for s := range sessions {
				for turn := range turns {
					rec := recs[fmt.Sprintf("chat-%d", s*turns+turn)]
					if want := in + turn*(out+user); rec.PromptTokens != want {
						t.Errorf("session %d turn %d: %d prompt tokens, want %d", s, turn, rec.PromptTokens, want)
					}
					if turn == 0 {
						if rec.CachedTokens != 0 {
							t.Errorf("session %d's first turn found %d cached tokens", s, rec.CachedTokens)
						}
						continue
					}
					prev := recs[fmt.Sprintf("chat-%d", s*turns+turn-1)]
					if min := prev.PromptTokens / block * block; rec.CachedTokens < min {
						t.Errorf("session %d turn %d: %d cached tokens, want at least the previous prompt's %d", s, turn, rec.CachedTokens, min)
					}
					if rec.ArrivalUnixNS < prev.LastTokenUnixNS {
						t.Errorf("session %d turn %d arrived before the previous answer ended", s, turn)
					}
				}
			}
		})
	}
}

// A prompt mix and a model mix against a sim serving two models: each
// request draws its class and its model from the seed, the result records
// what was drawn, and the engine saw exactly that.
func TestPromptAndModelMix(t *testing.T) {
	var trace lockedBuffer
	cfg := fastSim()
	cfg.LoRAModules = "adapter"
	cfg.Trace = &trace
	url, tally, stop := startTalliedSim(t, cfg)
	shape := &result.Traffic{
		PromptMix: []result.PromptClass{{Name: "short", InputLen: 16, Weight: 3}, {Name: "long", InputLen: 128, OutputLen: 4, Weight: 1}},
		Models:    []result.ModelShare{{Name: cfg.Model, Weight: 1}, {Name: "adapter", Weight: 1}},
	}
	const n = 200
	r, err := Run(context.Background(), Options{Target: url, Endpoint: EndpointCompletions, NumPrompts: n, InputLen: 64, OutputLen: 8,
		MaxConcurrency: 16, Seed: 7, RunID: "mix", Traffic: shape, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	c := r.Perfgate.Traffic.Counts
	if r.Completed != n || c["class:short"]+c["class:long"] != n || c["model:"+cfg.Model]+c["model:adapter"] != n {
		t.Fatalf("completed %d, counts %v", r.Completed, c)
	}
	// 3:1 and 1:1 of 200 draws, far inside four standard deviations.
	if c["class:short"] < 125 || c["class:short"] > 175 || c["model:adapter"] < 70 || c["model:adapter"] > 130 {
		t.Errorf("counts %v; want about 150 short and 100 per model", c)
	}
	// The first request (the probe) names the run's model; the rest as drawn.
	tally.mu.Lock()
	if tally.models[cfg.Model] != c["model:"+cfg.Model]+1 || tally.models["adapter"] != c["model:adapter"] {
		t.Errorf("the engine saw models %v; the result says %v (plus the first request)", tally.models, c)
	}
	tally.mu.Unlock()
	long, short := 0, 0
	for id, rec := range readSimTrace(t, trace.buf.Bytes()) {
		if id == "mix-probe" {
			continue
		}
		switch {
		case rec.PromptTokens == 16 && rec.OutputTokens == 8:
			short++
		case rec.PromptTokens == 128 && rec.OutputTokens == 4:
			long++
		default:
			t.Errorf("%s: %d prompt and %d output tokens fit no class", id, rec.PromptTokens, rec.OutputTokens)
		}
	}
	if short != c["class:short"] || long != c["class:long"] {
		t.Errorf("the engine saw %d short and %d long prompts; the result says %v", short, long, c)
	}
	if sig := r.Perfgate.Traffic.Signature(); sig != "short 16→0 ×3; long 128→4 ×1; model perfgate-sim ×1; model adapter ×1" {
		t.Errorf("signature %q", sig)
	}
}

func TestTrafficOptionsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Dataset: "sharegpt", DatasetPath: "x.json", Traffic: &result.Traffic{Sessions: &result.Sessions{Turns: 3, UserLen: 8}}}, "--dataset: sessions and a prompt mix"},
		{Options{Dataset: DatasetMooncake, DatasetPath: "x.jsonl", Traffic: &result.Traffic{Models: []result.ModelShare{{Name: "a", Weight: 1}}}}, "a trace is its own traffic"},
		{Options{Traffic: &result.Traffic{Sessions: &result.Sessions{Turns: 3}}}, "sessions.user_len: 0 tokens"},
		{Options{Traffic: &result.Traffic{PromptMix: []result.PromptClass{{Name: "s", InputLen: 8, Weight: 1}, {Name: "s", InputLen: 9, Weight: 1}}}}, "used twice"},
		{Options{Traffic: &result.Traffic{Models: []result.ModelShare{{Name: "a", Weight: 0}}}}, "models[0].weight: weight 0 must be positive"},
	} {
		tc.o.Target = "http://127.0.0.1:1"
		if err := tc.o.normalize(); err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.o.Traffic, err, tc.want)
		}
	}
}
