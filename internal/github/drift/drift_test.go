package drift_test

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	core "github.com/perfgate/perfgate/internal/analysis/drift"
	"github.com/perfgate/perfgate/internal/github/drift"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/history"
	"github.com/perfgate/perfgate/internal/store"
)

const repo = "acme/inference"

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with the file at path (rewritten with -update).
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run `go test ./internal/github/drift -update` to create it): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the rendering; diff it or run with -update after checking.\n--- got ---\n%s", path, got)
	}
}

type links struct{}

func (links) SeriesURL(repo, key, metric string) string {
	return "https://perfgate.example/r/" + repo + "/series?key=" + key + "&metric=" + metric + "&access=signed"
}

type slackSink struct {
	mu   sync.Mutex
	msgs []string
}

func (s *slackSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m struct {
		Text string `json:"text"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &m); err != nil || m.Text == "" || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.msgs = append(s.msgs, m.Text)
	s.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (s *slackSink) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.msgs) == 0 {
		return ""
	}
	return s.msgs[len(s.msgs)-1]
}

func (s *slackSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}

func seeded(t *testing.T, days, step int) (store.Store, string) {
	t.Helper()
	return seededSpec(t, history.Spec{Repo: repo, Cells: []string{"c=1", "c=64"}, Days: days, StepDay: step, Step: 0.10,
		Noise: 0.01, Requests: 60, Runs: 3, ReleaseDay: -1, InstallationID: githubtest.InstallationID, Seed: 3,
		End: time.Date(2025, 4, 30, 0, 0, 0, 0, time.UTC)})
}

func seededSpec(t *testing.T, spec history.Spec) (store.Store, string) {
	t.Helper()
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "perfgate.db")
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := history.Seed(ctx, st, spec); err != nil {
		t.Fatal(err)
	}
	return st, dsn
}

func newPass(t *testing.T, st store.Store, gh *githubtest.Server, slackURL string) *drift.Pass {
	t.Helper()
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := drift.Config{}
	if slackURL != "" {
		cfg.Slack = map[string]string{"acme": slackURL}
	}
	return drift.New(drift.Options{Store: st, Clients: cc, Links: links{}, Config: cfg, Log: zerolog.Nop()})
}

func TestPassOpensOneIssuePerStepAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	st, dsn := seeded(t, 30, 20)
	gh := ghtest.New(t)
	sink := &slackSink{}
	slack := httptest.NewServer(sink)
	defer slack.Close()

	sum, err := newPass(t, st, gh, slack.URL).Run(ctx)
	if err != nil || len(sum.Errors) > 0 {
		t.Fatalf("pass: %+v, %v", sum, err)
	}
	cps, err := st.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo, Key: "nightly/c=1", Metric: "tpot_p99"})
	if err != nil || len(cps) != 1 {
		t.Fatalf("tpot_p99 change points = %+v, %v; want one", cps, err)
	}
	cp := cps[0]
	if cp.BadSHA != history.Commit(repo, 20) || cp.GoodSHA != history.Commit(repo, 19) || !cp.Regression || cp.Change < 0.05 || cp.Change > 0.15 {
		t.Errorf("change point = %+v; want a ~10%% regression from night 20 (%s)", cp, history.Commit(repo, 20)[:7])
	}
	if tp, _ := st.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo, Key: "nightly/c=1", Metric: "output_throughput"}); len(tp) != 1 || !tp[0].Regression || tp[0].Change > 0 {
		t.Errorf("throughput change points = %+v; want one regression downwards", tp)
	}
	issues := gh.Issues()
	if len(issues) != 1 {
		t.Fatalf("issues = %d, want one for the one slow commit: %+v", len(issues), issues)
	}
	is := issues[0]
	for _, want := range []string{cp.GoodSHA, cp.BadSHA, "compare/" + cp.GoodSHA + "..." + cp.BadSHA, "`tpot_p99`", "`nightly/c=64`", "https://perfgate.example/r/acme/inference/series", "perfgate:change-point id="} {
		if !strings.Contains(is.Body, want) {
			t.Errorf("issue body lacks %q:\n%s", want, is.Body)
		}
	}
	if len(is.Labels) != 1 || is.Labels[0] != drift.IssueLabel || !strings.Contains(is.Title, "since") {
		t.Errorf("issue = %q labels %v", is.Title, is.Labels)
	}
	if cp.IssueNumber != is.Number {
		t.Errorf("record's issue = %d, want %d", cp.IssueNumber, is.Number)
	}
	regressions, _ := st.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo})
	nreg := 0
	for _, c := range regressions {
		if c.Regression && c.State == store.ChangePointOpen {
			nreg++
			if c.IssueNumber != is.Number || !c.SlackSent {
				t.Errorf("regression %s %s: issue %d slack %v", c.Key, c.Metric, c.IssueNumber, c.SlackSent)
			}
		}
	}
	if sink.count() != 1 || nreg < 2 {
		t.Errorf("slack messages = %d for %d regression change points, want one for the step", sink.count(), nreg)
	}

	// A restart (new store handle, new pass) with nothing new: no new issue,
	// no edit, no second Slack message.
	edits := is.Edits
	st2, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	sum, err = newPass(t, st2, gh, slack.URL).Run(ctx)
	if err != nil || len(sum.Errors) > 0 || sum.New != 0 || sum.IssuesOpened != 0 {
		t.Fatalf("second pass: %+v, %v", sum, err)
	}
	if got := gh.Issues(); len(got) != 1 || got[0].Edits != edits {
		t.Errorf("after a second pass: %d issues, %d edits (was %d)", len(got), got[0].Edits, edits)
	}
	if sink.count() != 1 {
		t.Errorf("slack messages after a second pass = %d, want still 1", sink.count())
	}
}

func TestPassFindsItsIssueAfterLosingTheNumber(t *testing.T) {
	ctx := context.Background()
	st, _ := seeded(t, 30, 20)
	gh := ghtest.New(t)
	if _, err := newPass(t, st, gh, "").Run(ctx); err != nil {
		t.Fatal(err)
	}
	// The crash window: the issue exists, the records lost its number.
	all, _ := st.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo})
	for _, c := range all {
		c.IssueNumber, c.IssueURL = 0, ""
		if _, err := st.PutChangePoint(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := newPass(t, st, gh, "").Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(gh.Issues()); n != 1 {
		t.Fatalf("issues = %d after a lost number, want the one found by its marker", n)
	}
	again, _ := st.ListChangePoints(ctx, store.ChangePointFilter{Repo: repo})
	for _, c := range again {
		if c.Regression && c.IssueNumber != gh.Issues()[0].Number {
			t.Errorf("%s %s: issue %d", c.Key, c.Metric, c.IssueNumber)
		}
	}
}

func TestPassWithoutAStepOpensNothing(t *testing.T) {
	ctx := context.Background()
	st, _ := seeded(t, 30, -1)
	gh := ghtest.New(t)
	sum, err := newPass(t, st, gh, "").Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gh.Issues()) != 0 {
		t.Errorf("flat history opened %d issues (%+v)", len(gh.Issues()), sum)
	}
}

func TestSlackFailureIsRetriedNextPass(t *testing.T) {
	ctx := context.Background()
	st, _ := seeded(t, 30, 20)
	gh := ghtest.New(t)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no_service", http.StatusNotFound) }))
	sum, err := newPass(t, st, gh, down.URL).Run(ctx)
	down.Close()
	if err != nil || len(sum.Errors) == 0 || !strings.Contains(strings.Join(sum.Errors, "\n"), "no_service") {
		t.Fatalf("pass with a broken webhook: %+v, %v; want its error listed", sum, err)
	}
	sink := &slackSink{}
	up := httptest.NewServer(sink)
	defer up.Close()
	if _, err := newPass(t, st, gh, up.URL).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if sink.count() == 0 {
		t.Error("the next pass did not deliver the messages the broken webhook refused")
	}
}

// With a declared price the nightly digest says what the step costs a
// month (the issue) and what the open regressions on the default branch
// cost together (the Slack message); without one neither speaks of money.
func TestDigestStatesTheCost(t *testing.T) {
	ctx := context.Background()
	for _, price := range []*cost.Price{{GPUHourUSD: 4, GPUs: 10}, nil} {
		st, _ := seededSpec(t, history.Spec{Repo: repo, Cells: []string{"c=1", "c=64"}, Days: 30, StepDay: 20, Step: 0.10,
			Noise: 0.01, Requests: 60, Runs: 3, ReleaseDay: -1, InstallationID: githubtest.InstallationID, Seed: 3,
			End: time.Date(2025, 4, 30, 0, 0, 0, 0, time.UTC), Price: price})
		gh := ghtest.New(t)
		sink := &slackSink{}
		slack := httptest.NewServer(sink)
		sum, err := newPass(t, st, gh, slack.URL).Run(ctx)
		slack.Close()
		if err != nil || len(sum.Errors) > 0 || len(gh.Issues()) != 1 || sink.count() != 1 {
			t.Fatalf("pass: %+v, %v; %d issues, %d messages", sum, err, len(gh.Issues()), sink.count())
		}
		body, msg := gh.Issues()[0].Body, sink.last()
		if price == nil {
			if strings.Contains(body, "Cost") || strings.Contains(msg, "$") {
				t.Errorf("no price declared, yet money shows:\n%s\n%s", body, msg)
			}
			continue
		}
		// A 10% step: the throughput falls to about 1/1.1, so about 10%
		// more of 7,300 GPU-hours at $4 (≈ $2,920) in the costliest cell.
		m := regexp.MustCompile(`\*\*Cost:\*\* if it stays, nightly/c=\d+ · (output|request|total token) throughput −[0-9.]+%: 1\.[01]\d× the GPU-hours for the same traffic, \*\*\+\$([0-9,]+) a month\*\* at 10 GPUs \(\$4\.00/GPU-hour\)`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("issue body lacks the cost line:\n%s", body)
		}
		// The fake GitHub's port changes from run to run.
		fakeHost := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
		golden(t, filepath.Join("testdata", "digest_cost.md"), "# "+gh.Issues()[0].Title+"\n\n"+body+"\n---- slack ----\n"+fakeHost.ReplaceAllString(msg, "http://github.test")+"\n")
		usd, _ := strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
		if usd < 2000 || usd > 4000 {
			t.Errorf("a 10%% step at 10 GPUs and $4 priced at $%d a month, want about $2,920", usd)
		}
		if want := "Open regressions on the default branch: 1 priced, +$" + m[2] + " a month in all."; !strings.Contains(msg, want) || !strings.Contains(msg, "Cost if it stays:") {
			t.Errorf("slack message lacks %q:\n%s", want, msg)
		}
	}
}

// The analysis compares a record's State with its own constants; they
// must be the store's words.
func TestStatesAreTheStores(t *testing.T) {
	for _, s := range [][2]string{{core.Open, store.ChangePointOpen}, {core.Gone, store.ChangePointGone}, {core.Retracted, store.ChangePointRetracted}} {
		if s[0] != s[1] {
			t.Errorf("analysis state %q, store state %q", s[0], s[1])
		}
	}
}
