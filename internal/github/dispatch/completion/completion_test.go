package completion_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/dispatch/completion"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// finished enqueues a job of kind and lets a runner finish it with status.
func finished(t *testing.T, st store.Store, kind string, status jobstate.Status) store.Job {
	t.Helper()
	ctx := context.Background()
	job, err := st.Enqueue(ctx, store.JobSpec{Tier: "quick", Kind: kind, Repo: "acme/inference", HeadSHA: "9f4c3e1a", Config: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := st.RegisterAgent(ctx, store.AgentRegistration{Name: "runner-" + kind, Labels: []string{"gpu"}, TokenHash: store.HashToken("t-" + kind)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Claim(ctx, store.ClaimRequest{AgentID: ag.ID, Labels: ag.Labels, Lease: time.Minute})
	if err != nil || c.ID != job.ID {
		t.Fatalf("claim: %v %v", c.ID, err)
	}
	if _, err := st.Finish(ctx, job.ID, c.LeaseID, status, ""); err != nil {
		t.Fatal(err)
	}
	return job
}

// TestRouter: each finished job goes to the consumer of its kind (cancelled
// ones too), the rest to the fallback; a consumer that keeps failing has
// the job given up, with a context still alive to record why, and a job
// is taken once only.
func TestRouter(t *testing.T) {
	tests := []struct {
		name         string
		kind         string
		status       jobstate.Status
		failures     int  // the consumer fails this many times first
		wantAbandon  bool // given up after MaxAttempts
		wantConsumer string
	}{
		{"bisect measurement to the bisect", "bisect", jobstate.Succeeded, 0, false, "bisect"},
		{"cancelled profile still to the profile", "profile", jobstate.Cancelled, 0, false, "profile"},
		{"a check's job to the judge", "pull_request", jobstate.Failed, 0, false, "judge"},
		{"a failing consumer is retried", "bisect", jobstate.Succeeded, 2, false, "bisect"},
		{"a consumer that keeps failing gives the job up", "pull_request", jobstate.Succeeded, 100, true, "judge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
			st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"), store.WithClock(clk.now))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			r := completion.New(completion.Options{Queue: st, Now: clk.now, Log: zerolog.Nop(),
				Policy: backoff.Policy{Base: time.Second, Max: time.Second, MaxAttempts: 3}})
			var calls []string
			var abandoned []error
			consumer := func(name string) completion.Consumer {
				return func(ctx context.Context, job store.Job) error {
					calls = append(calls, name)
					if len(calls) <= tt.failures {
						return errors.New("store hiccup")
					}
					return nil
				}
			}
			abandon := func(ctx context.Context, job store.Job, cause error) error {
				if ctx.Err() != nil {
					t.Errorf("give-up called with a dead context: %v", ctx.Err())
				}
				abandoned = append(abandoned, cause)
				return nil
			}
			r.Route("bisect", consumer("bisect"), nil)
			r.Route("profile", consumer("profile"), nil)
			r.Otherwise(consumer("judge"), abandon)
			finished(t, st, tt.kind, tt.status)
			for range 6 {
				if _, err := r.Pass(ctx); err != nil {
					t.Fatal(err)
				}
				clk.add(2 * time.Second)
			}
			want := min(tt.failures+1, 3)
			if len(calls) != want || slices.IndexFunc(calls, func(c string) bool { return c != tt.wantConsumer }) >= 0 {
				t.Errorf("consumers called %v, want %s %d times", calls, tt.wantConsumer, want)
			}
			if (len(abandoned) == 1) != tt.wantAbandon || len(abandoned) > 1 {
				t.Errorf("given up %d times, want abandoned=%v", len(abandoned), tt.wantAbandon)
			}
		})
	}
}
