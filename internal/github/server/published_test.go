package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// Every payload shaped like GitHub's published examples
// (testdata/webhooks/published: no installation, old timestamps, nulls and
// unknown fields, plain issues, other apps' checks, push, a release on a
// repository without the config), signed and delivered to the whole
// server with a runner measuring what it queues, against the fake GitHub:
// every delivery is answered 2xx and ends done, none failed; no request
// perfgate makes to GitHub is refused as invalid, no token is asked for
// installation 0, and no job or check run is stored without an
// installation.
func TestPublishedShapes(t *testing.T) {
	l := newLoop(t)
	l.promoteBaseline()
	l.runJobs()
	// PR #17 of the fixtures' world, as GET /pulls/17 returns it.
	var ev struct {
		PullRequest json.RawMessage `json:"pull_request"`
	}
	if err := json.Unmarshal(ghtest.Fixture(t, "pull_request/opened.json"), &ev); err != nil {
		t.Fatal(err)
	}
	l.gh.SetPullRequest(testRepo, 17, ev.PullRequest)
	l.gh.SetFiles(testRepo, 17, []githubtest.File{{Filename: "model/attention.py"}})
	l.gh.SetPermission(testRepo, "monalisa", "write", "maintain")

	root := filepath.Join(filepath.Join("..", "..", "..", "testdata", "webhooks"), "published")
	files, err := filepath.Glob(filepath.Join(root, "*", "*.json"))
	if err != nil || len(files) < 20 {
		t.Fatalf("%d published fixtures (%v), want the whole set", len(files), err)
	}
	stored := 0
	for i, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		event := filepath.Base(filepath.Dir(f))
		code := l.deliver(event, fmt.Sprintf("published-%d", i), body)
		switch {
		case code == http.StatusAccepted:
			stored++
		case code/100 != 2:
			t.Errorf("%s/%s: answered %d", event, filepath.Base(f), code)
		}
	}

	ctx := context.Background()
	poll.Until(t, "every delivery processed, every job ended and every GitHub write sent", func() bool {
		counts, err := l.st.CountDeliveries(ctx)
		if err != nil || counts[store.DeliveryPending] != 0 || counts[store.DeliveryDone]+counts[store.DeliveryFailed] < stored {
			return false
		}
		for _, s := range []jobstate.Status{jobstate.Queued, jobstate.Running} {
			if jobs, err := l.st.ListJobs(ctx, store.JobFilter{Status: s, Limit: 1}); err != nil || len(jobs) > 0 {
				return false
			}
		}
		pending, err := l.st.ListEffects(ctx, store.EffectFilter{Status: store.EffectPending})
		return err == nil && len(pending) == 0
	})
	counts, err := l.st.CountDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d fixtures, %d stored: %v", len(files), stored, counts)
	if counts[store.DeliveryFailed] != 0 {
		for i := range files {
			if d, err := l.st.GetDelivery(ctx, fmt.Sprintf("published-%d", i)); err == nil && d.Status == store.DeliveryFailed {
				t.Errorf("%s failed: %s", strings.TrimPrefix(files[i], root+string(os.PathSeparator)), d.LastError)
			}
		}
	}
	writes := 0
	for _, r := range l.gh.Requests() {
		if r.Path == "/app/installations/0/access_tokens" {
			t.Errorf("a token was asked for installation 0")
		}
		if r.Method == http.MethodGet {
			continue
		}
		writes++
		if r.Status >= 400 {
			t.Errorf("%s %s answered %d: %v", r.Method, r.Path, r.Status, r.Body)
		}
	}
	jobs, err := l.st.ListJobs(ctx, store.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.InstallationID == 0 {
			t.Errorf("job %d (%s %s) stored without an installation", j.ID, j.Repo, j.Tier)
		}
	}
	runs, err := l.st.ListCheckRuns(ctx, testRepo, 17)
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range runs {
		if cr.InstallationID == 0 {
			t.Errorf("check run %d (%s) stored without an installation", cr.ID, cr.Tier)
		}
	}
	if len(jobs) == 0 || len(runs) == 0 {
		t.Errorf("%d jobs, %d check runs: the fixtures with an installation were not acted on", len(jobs), len(runs))
	}
	t.Logf("%d GitHub writes, %d jobs, %d check runs", writes, len(jobs), len(runs))
}
