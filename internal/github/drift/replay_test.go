package drift_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/drift"
	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/github/history"
	"github.com/perfgate/perfgate/internal/store"
)

// nightView is the store as the pass saw it on one night: the series up to
// that night.
type nightView struct {
	store.Store
	night time.Time
}

func (v *nightView) SeriesPoints(ctx context.Context, repo, key, metric string, since time.Time) ([]store.SeriesPoint, error) {
	pts, err := v.Store.SeriesPoints(ctx, repo, key, metric, since)
	var out []store.SeriesPoint
	for _, p := range pts {
		if !p.Date.After(v.night) {
			out = append(out, p)
		}
	}
	return out, err
}

// replay is what a month and more of nightly passes told people.
type replay struct {
	slack, issues, edits, bisects int
	leaders                       map[int64]bool
}

// replayNights seeds spec and runs the pass once per night from night
// `from` to the last, each seeing the series up to its night, as the
// server's cron does.
func replayNights(t *testing.T, spec history.Spec, from int) (replay, *githubtest.Server, store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "perfgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	nights, err := history.Seed(ctx, st, spec)
	if err != nil {
		t.Fatal(err)
	}
	gh := ghtest.New(t)
	sink := &slackSink{}
	slack := httptest.NewServer(sink)
	t.Cleanup(slack.Close)
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	out := replay{leaders: map[int64]bool{}}
	view := &nightView{Store: st}
	pass := drift.New(drift.Options{Store: view, Clients: cc, Links: links{}, Log: zerolog.Nop(),
		Config: drift.Config{Slack: map[string]string{"acme": slack.URL}},
		Now:    func() time.Time { return view.night },
		Regressed: func(_ context.Context, rec store.ChangePointRecord) error {
			out.bisects++
			out.leaders[rec.ID] = true
			return nil
		}})
	seen := map[time.Time]bool{}
	for _, n := range nights {
		if seen[n.Day] {
			continue
		}
		seen[n.Day] = true
		if len(seen) <= from {
			continue
		}
		view.night = n.Day.Add(23 * time.Hour)
		if sum, err := pass.Run(ctx); err != nil || len(sum.Errors) > 0 {
			t.Fatalf("night %s: %+v, %v", n.Day.Format("01-02"), sum, err)
		}
	}
	out.slack = sink.count()
	for _, is := range gh.Issues() {
		out.issues++
		out.edits += is.Edits
	}
	return out, gh, st
}

// TestOneRegressionOneAlert replays the issue's scenario: an 8% step on
// night 20 of two matrix cells, then 30 more nights, the pass run every
// night as the server's cron runs it. Before events (perfgate at the time
// of the issue) this told 1 issue per slow commit plus 1–2 more where a
// noisy p99 placed the step early, one Slack message per change point and
// an edit on most nights; now: one issue, one Slack message, one bisect
// leader, and a handful of edits at most.
func TestOneRegressionOneAlert(t *testing.T) {
	spec := history.Spec{Repo: repo, Cells: []string{"c=1", "c=32"}, Days: 50, StepDay: 20, Step: 0.08, Noise: 0.01,
		Requests: 100, Runs: 5, ReleaseDay: -1, InstallationID: githubtest.InstallationID, Seed: 11,
		End: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}
	got, gh, st := replayNights(t, spec, 8)
	t.Logf("8%% step, 2 cells, 42 nightly passes: %d issue(s), %d Slack message(s), %d issue edit(s), %d bisect call(s) of %d leader(s)",
		got.issues, got.slack, got.edits, got.bisects, len(got.leaders))
	if got.issues != 1 || got.slack != 1 || len(got.leaders) != 1 {
		t.Errorf("one step: %d issues, %d Slack messages, %d bisect leaders; want 1 of each", got.issues, got.slack, len(got.leaders))
	}
	if got.edits > 3 {
		t.Errorf("the issue was edited %d times over 30 nights; want it edited only when a change point joins, leaves or moves materially (≤ 3)", got.edits)
	}
	cps, err := st.ListChangePoints(context.Background(), store.ChangePointFilter{Repo: repo, State: store.ChangePointOpen})
	if err != nil {
		t.Fatal(err)
	}
	regressions := 0
	for _, c := range cps {
		if c.Regression {
			regressions++
			if is := gh.Issues(); c.IssueNumber != is[0].Number {
				t.Errorf("%s %s is not on the event's issue: %d", c.Key, c.Metric, c.IssueNumber)
			}
		}
	}
	if regressions < 4 {
		t.Errorf("%d regression change points on the issue; want the step's metrics of both cells grouped into it", regressions)
	}
}

// copyNight sets every series' point of night `to` to its value on night
// `from`: a night re-measured at another night's level.
func copyNight(t *testing.T, st store.Store, day func(int) time.Time, from, to int) {
	t.Helper()
	ctx := context.Background()
	all, err := st.ListAllSeries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, si := range all {
		pts, err := st.SeriesPoints(ctx, si.Repo, si.Key, si.Metric, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pts {
			if p.Date.Truncate(24 * time.Hour).Equal(day(from)) {
				if err := st.PutTrend(ctx, store.TrendPoint{Repo: si.Repo, Key: si.Key, Metric: si.Metric, Date: day(to).Add(3 * time.Hour), Value: p.Value, JobID: p.JobID}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func newSlackPass(t *testing.T, st drift.Store, gh *githubtest.Server, sink *slackSink, now func() time.Time) *drift.Pass {
	t.Helper()
	slack := httptest.NewServer(sink)
	t.Cleanup(slack.Close)
	cc, err := githubapp.NewDefaultCachingClientCreator(gh.AppConfig())
	if err != nil {
		t.Fatal(err)
	}
	return drift.New(drift.Options{Store: st, Clients: cc, Links: links{}, Log: zerolog.Nop(), Now: now,
		Config: drift.Config{Slack: map[string]string{"acme": slack.URL}}})
}

// TestOneSlowNightIsConfirmedFirst: the last night is 15% slow on every
// metric of both cells. The pass that sees it alone tells no one (it is
// pending); the next night is normal again, and nothing is ever told.
func TestOneSlowNightIsConfirmedFirst(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	st, _ := seededSpec(t, history.Spec{Repo: repo, Cells: []string{"c=1", "c=64"}, Days: 30, StepDay: 29, Step: 0.15, Noise: 0.01,
		Requests: 60, Runs: 3, ReleaseDay: -1, InstallationID: githubtest.InstallationID, Seed: 3, End: end})
	day := func(d int) time.Time { return end.AddDate(0, 0, d-29) }
	gh := ghtest.New(t)
	sink := &slackSink{}
	view := &nightView{Store: st, night: day(29).Add(23 * time.Hour)}
	pass := newSlackPass(t, view, gh, sink, func() time.Time { return view.night })
	sum, err := pass.Run(ctx)
	if err != nil || len(sum.Errors) > 0 {
		t.Fatalf("pass: %+v, %v", sum, err)
	}
	if len(gh.Issues()) != 0 || sink.count() != 0 || sum.Pending == 0 {
		t.Errorf("a slow last night: %d issues, %d Slack messages, %d pending; want it pending, nothing told", len(gh.Issues()), sink.count(), sum.Pending)
	}
	// Night 30 is back at the level of night 28.
	copyNight(t, st, day, 28, 30)
	view.night = day(30).Add(23 * time.Hour)
	if sum, err = pass.Run(ctx); err != nil || len(sum.Errors) > 0 {
		t.Fatalf("pass: %+v, %v", sum, err)
	}
	if len(gh.Issues()) != 0 || sink.count() != 0 {
		t.Errorf("a slow night the next night did not confirm: %d issues, %d Slack messages; want none (%+v)", len(gh.Issues()), sink.count(), sum)
	}
}

// TestVanishedStepIsRetracted: a step alerted on, then its nights
// re-measured at the old level: the pass comments on the issue that it is
// retracted, closes it, and tells Slack once; the next pass does nothing.
func TestVanishedStepIsRetracted(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	st, _ := seededSpec(t, history.Spec{Repo: repo, Cells: []string{"c=1", "c=64"}, Days: 30, StepDay: 20, Step: 0.10, Noise: 0.01,
		Requests: 60, Runs: 3, ReleaseDay: -1, InstallationID: githubtest.InstallationID, Seed: 3, End: end})
	day := func(d int) time.Time { return end.AddDate(0, 0, d-29) }
	gh := ghtest.New(t)
	sink := &slackSink{}
	pass := newSlackPass(t, st, gh, sink, func() time.Time { return end })
	if sum, err := pass.Run(ctx); err != nil || len(sum.Errors) > 0 || len(gh.Issues()) != 1 || sink.count() != 1 {
		t.Fatalf("the step: %+v, %v; %d issues, %d Slack messages; want 1 and 1", sum, err, len(gh.Issues()), sink.count())
	}
	for d := 20; d < 30; d++ {
		copyNight(t, st, day, d-12, d)
	}
	sum, err := pass.Run(ctx)
	if err != nil || len(sum.Errors) > 0 || sum.Retracted != 1 {
		t.Fatalf("after the re-measure: %+v, %v; want one retraction", sum, err)
	}
	is := gh.Issues()[0]
	if is.State != "closed" {
		t.Errorf("retracted issue is %s, want closed", is.State)
	}
	var said []string
	for _, c := range gh.Comments() {
		if c.Number == is.Number {
			said = append(said, c.Body)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "Retracted") {
		t.Errorf("comments on the issue: %q; want one retraction", said)
	}
	if sink.count() != 2 || !strings.Contains(sink.last(), "retracted") {
		t.Errorf("Slack: %d messages, last %q; want the alert and its retraction", sink.count(), sink.last())
	}
	if sum, err := pass.Run(ctx); err != nil || sum.Retracted != 0 || len(gh.Comments()) != len(said) || sink.count() != 2 {
		t.Errorf("a pass after the retraction told again: %+v, %v", sum, err)
	}
}
