package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

func testDashboardReads(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	a := e.enqueue(t, store.JobSpec{Repo: "acme/llm", Tier: "nightly", HeadSHA: "1111111111111111111111111111111111111111"})
	b := e.enqueue(t, store.JobSpec{Repo: "acme/llm", Tier: "nightly", HeadSHA: "2222222222222222222222222222222222222222"})
	e.enqueue(t, store.JobSpec{Repo: "zeta/other", Tier: "quick"})
	day := time.Date(2025, 3, 1, 3, 0, 0, 0, time.UTC)
	put := func(key, metric string, d int, v float64, job int64) {
		t.Helper()
		if err := e.st.PutTrend(e.ctx, store.TrendPoint{Repo: "acme/llm", Key: key, Metric: metric, Date: day.AddDate(0, 0, d), Value: v, JobID: job}); err != nil {
			t.Fatal(err)
		}
	}
	put("nightly/c=1", "tpot_p99", 0, 10, a.ID)
	put("nightly/c=1", "tpot_p99", 1, 11, b.ID)
	put("nightly/c=1", "tpot_p99", 2, 12, 999) // its job is gone: no commit
	put("nightly/c=1", "output_throughput", 1, 500, b.ID)
	put("nightly/c=64", "tpot_p99", 1, 30, b.ID)

	repos, err := e.st.ListRepos(e.ctx)
	if err != nil || fmt.Sprint(repos) != "[acme/llm zeta/other]" {
		t.Fatalf("repos = %v, %v", repos, err)
	}
	series, err := e.st.ListSeries(e.ctx, "acme/llm")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range series {
		got = append(got, fmt.Sprintf("%s %s %d %s..%s", s.Key, s.Metric, s.Points, s.First.Format("01-02"), s.Last.Format("01-02")))
	}
	if fmt.Sprint(got) != "[nightly/c=1 output_throughput 1 03-02..03-02 nightly/c=1 tpot_p99 3 03-01..03-03 nightly/c=64 tpot_p99 1 03-02..03-02]" {
		t.Errorf("series = %v", got)
	}
	if all, err := e.st.ListAllSeries(e.ctx); err != nil || len(all) != 3 {
		t.Errorf("all series = %d, %v; want 3", len(all), err)
	}
	pts, err := e.st.SeriesPoints(e.ctx, "acme/llm", "nightly/c=1", "tpot_p99", day.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, p := range pts {
		got = append(got, fmt.Sprintf("%s=%g#%d@%.4s/%s", p.Date.Format("01-02"), p.Value, p.JobID, p.HeadSHA, p.Tier))
	}
	if fmt.Sprint(got) != "[03-02=11#2@2222/nightly 03-03=12#999@/]" {
		t.Errorf("points = %v", got)
	}
	recent, err := e.st.RecentPoints(e.ctx, "acme/llm", day.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, p := range recent {
		got = append(got, fmt.Sprintf("%s %s %s=%g", p.Key, p.Metric, p.Date.Format("01-02"), p.Value))
	}
	if fmt.Sprint(got) != "[nightly/c=1 output_throughput 03-02=500 nightly/c=1 tpot_p99 03-02=11 nightly/c=1 tpot_p99 03-03=12 nightly/c=64 tpot_p99 03-02=30]" {
		t.Errorf("recent points = %v", got)
	}

	for i, st := range []string{store.CheckPassed, store.CheckWarned, store.CheckEscalated} {
		sha := fmt.Sprintf("%040d", i)
		if _, err := e.st.PutCheckRun(e.ctx, store.CheckRun{Repo: "acme/llm", HeadSHA: sha, Tier: "nightly", State: st}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.st.PutCheckRun(e.ctx, store.CheckRun{Repo: "acme/llm", HeadSHA: fmt.Sprintf("%040d", 9), Tier: "quick", PRNumber: 3, State: store.CheckWarned}); err != nil {
		t.Fatal(err)
	}
	crs, err := e.st.RepoCheckRuns(e.ctx, store.CheckRunFilter{Repo: "acme/llm", Tier: "nightly", States: []string{store.CheckWarned, store.CheckEscalated}})
	if err != nil || len(crs) != 2 || crs[0].State != store.CheckEscalated || crs[1].State != store.CheckWarned {
		t.Fatalf("regressed nightly check runs = %+v, %v", crs, err)
	}
	if crs, err := e.st.RepoCheckRuns(e.ctx, store.CheckRunFilter{Repo: "acme/llm", Limit: 2}); err != nil || len(crs) != 2 || crs[0].Tier != "quick" {
		t.Errorf("latest two check runs = %+v, %v", crs, err)
	}
	if _, err := e.st.RepoCheckRuns(e.ctx, store.CheckRunFilter{}); err == nil {
		t.Error("check runs without a repo: no error")
	}

	for _, action := range []string{"release.published", "gate.pass", "release.published"} {
		if _, err := e.st.AppendAudit(e.ctx, store.AuditEntry{Actor: "perfgate", Action: action, Repo: "acme/llm"}); err != nil {
			t.Fatal(err)
		}
	}
	if rel, err := e.st.AuditByAction(e.ctx, "acme/llm", "release.published"); err != nil || len(rel) != 2 || rel[0].ID > rel[1].ID {
		t.Errorf("releases = %+v, %v", rel, err)
	}
}

func testChangePoints(t *testing.T, newDSN func(t testing.TB) string) {
	e := newEnv(t, newDSN)
	day := time.Date(2025, 3, 20, 0, 0, 0, 0, time.UTC)
	in := store.ChangePointRecord{Repo: "acme/llm", Key: "nightly/c=1", Metric: "tpot_p99", Day: day, GoodDay: day.AddDate(0, 0, -1),
		GoodSHA: "aaaa", BadSHA: "bbbb", GoodJobID: 4, BadJobID: 5, MeanBefore: 10, MeanAfter: 10.5, StdBefore: 0.2, StdAfter: 0.3,
		Change: 0.05, Magnitude: 0.05, PValue: 1e-6, Regression: true}
	c, err := e.st.PutChangePoint(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID == 0 || c.State != store.ChangePointOpen || !c.Day.Equal(day) || !c.GoodDay.Equal(day.AddDate(0, 0, -1)) ||
		c.BadSHA != "bbbb" || c.MeanAfter != 10.5 || !c.Regression || c.CreatedAt.IsZero() {
		t.Fatalf("stored = %+v", c)
	}
	if _, err := e.st.PutChangePoint(e.ctx, in); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second record on the same day: %v, want ErrConflict", err)
	}
	e.clock.Advance(time.Hour)
	c.IssueNumber, c.IssueURL, c.SlackSent, c.Day = 12, "https://github.com/acme/llm/issues/12", true, day.AddDate(0, 0, 1)
	up, err := e.st.PutChangePoint(e.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if up.ID != c.ID || up.IssueNumber != 12 || !up.SlackSent || !up.Day.Equal(day.AddDate(0, 0, 1)) || !up.UpdatedAt.After(up.CreatedAt) {
		t.Fatalf("updated = %+v", up)
	}
	other := in
	other.Metric, other.Regression = "output_throughput", false
	if _, err := e.st.PutChangePoint(e.ctx, other); err != nil {
		t.Fatal(err)
	}
	got, err := e.st.GetChangePoint(e.ctx, c.ID)
	if err != nil || got.IssueNumber != 12 {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if _, err := e.st.GetChangePoint(e.ctx, 9999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("get missing: %v, want ErrNotFound", err)
	}
	list, err := e.st.ListChangePoints(e.ctx, store.ChangePointFilter{Repo: "acme/llm"})
	if err != nil || len(list) != 2 || list[0].Metric != "output_throughput" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if list, err := e.st.ListChangePoints(e.ctx, store.ChangePointFilter{Repo: "acme/llm", Metric: "tpot_p99", State: store.ChangePointOpen}); err != nil || len(list) != 1 {
		t.Errorf("filtered list = %d, %v", len(list), err)
	}
	c.ID = 9999
	if _, err := e.st.PutChangePoint(e.ctx, c); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update missing: %v, want ErrNotFound", err)
	}
	if _, err := e.st.PutChangePoint(e.ctx, store.ChangePointRecord{Repo: "acme/llm"}); err == nil {
		t.Error("record without key, metric, day: no error")
	}
}
