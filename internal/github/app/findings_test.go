package app

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/rs/zerolog"
)

type fakeFindings struct {
	mu       sync.Mutex
	profiles []request.Profile
	causes   []request.RootCause
	noRegr   bool
}

func (f *fakeFindings) Profile(_ context.Context, r request.Profile) (request.ProfileQueued, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.profiles = append(f.profiles, r)
	return request.ProfileQueued{JobID: int64(40 + len(f.profiles)), Already: len(f.profiles) > 1, Requests: 64}, nil
}

func (f *fakeFindings) RootCause(_ context.Context, r request.RootCause) (request.RootCauseRecorded, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noRegr {
		return request.RootCauseRecorded{}, request.ErrNoRegression
	}
	f.causes = append(f.causes, r)
	return request.RootCauseRecorded{ID: 7, Commit: "9f4c3e1a2b7d8e6f", Tier: "quick", Phenomenon: "tpot_p90 +18%",
		Profile: "prefill interruptions of decode went up by 102%"}, nil
}

// withFindings rebuilds the harness's app with f as its Findings.
func (h *harness) withFindings(t *testing.T, f Findings) {
	t.Helper()
	cfg := Config{GitHub: h.gh.AppConfig(), Logger: zerolog.Nop(),
		Retry: RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxRateLimitWait: time.Minute, Sleep: func(context.Context, time.Duration) error { return nil }}}
	a, err := New(cfg, Deps{Dispatcher: h.disp, Inbox: h.inbox, Outbox: h.out, Appeals: h.appeals, Findings: f})
	if err != nil {
		t.Fatal(err)
	}
	h.app = a
}

// /perf profile needs write access and answers started (or already
// running) with the job; /perf rootcause needs maintain and answers what
// was recorded, or why nothing was; a server without findings says so.
func TestProfileAndRootCauseCommands(t *testing.T) {
	h := newHarness(t)
	h.command(t, "monalisa", "/perf profile")
	if got := h.lastComment(t); !strings.Contains(got, "not enabled") {
		t.Errorf("without findings: %q", got)
	}

	f := &fakeFindings{}
	h.withFindings(t, f)
	h.command(t, "octocat", "/perf profile")
	if got := h.lastComment(t); !strings.Contains(got, "needs write access") || len(f.profiles) != 0 {
		t.Errorf("read-only /perf profile: %q (%d queued)", got, len(f.profiles))
	}
	h.command(t, "monalisa", "/perf profile")
	if got := h.lastComment(t); !strings.Contains(got, "Profiling base") || !strings.Contains(got, "job 41") || len(f.profiles) != 1 {
		t.Errorf("/perf profile: %q", got)
	}
	if p := f.profiles[0]; p.PR != prNumber || p.HeadSHA == "" || p.BaseSHA == "" || p.By != "monalisa" || p.Trigger != "/perf profile" {
		t.Errorf("profile request %+v", p)
	}
	h.command(t, "monalisa", "/perf profile")
	if got := h.lastComment(t); !strings.Contains(got, "already queued or running (job 42)") {
		t.Errorf("second /perf profile: %q", got)
	}

	h.gh.SetPermission(repoName, "octocat", "write", "write")
	h.command(t, "octocat", "/perf rootcause scheduler priority change fix #130")
	if got := h.lastComment(t); !strings.Contains(got, "maintain or admin") || len(f.causes) != 0 {
		t.Errorf("writer's /perf rootcause: %q", got)
	}
	h.command(t, "monalisa", "/perf rootcause scheduler priority change fix #130")
	got := h.lastComment(t)
	for _, want := range []string{"Recorded in the knowledge base (entry 7)", "tpot_p90 +18%", "prefill interruptions of decode went up", "scheduler priority change", "**fix**: #130"} {
		if !strings.Contains(got, want) {
			t.Errorf("/perf rootcause reply lacks %q:\n%s", want, got)
		}
	}
	if c := f.causes[0]; c.Cause != "scheduler priority change" || c.Fix != "#130" || c.PR != prNumber || !strings.HasSuffix(c.PRURL, "/pull/17") {
		t.Errorf("root cause request %+v", c)
	}
	f.noRegr = true
	h.command(t, "monalisa", "/perf rootcause something")
	if got := h.lastComment(t); !strings.Contains(got, "no regression verdict") {
		t.Errorf("/perf rootcause without a regression: %q", got)
	}
}
