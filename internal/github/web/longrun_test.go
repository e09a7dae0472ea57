package web_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/capacity"
	"github.com/perfgate/perfgate/internal/analysis/longrun"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// capacitySHA is the commit of the capacity check capacityCheck stores.
const capacitySHA = "c0ffee0000000000000000000000000000000031"

// capacityCheck stores a judged `perfgate / capacity` check: its verdict
// document made by the capacity judge from the sweeps measured against the
// sim (internal/analysis/capacity/testdata), and the sweeps beside it, as
// dispatch writes them; it returns its commit.
func capacityCheck(t *testing.T, f *fixture) string {
	t.Helper()
	var base, head capacity.Sweep
	for path, s := range map[string]*capacity.Sweep{"../../analysis/capacity/testdata/base.json": &base, "../../analysis/capacity/testdata/head.json": &head} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, s); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := longrun.Capacity(capacity.Compare([]capacity.Knee{base.Knee()}, []capacity.Knee{head.Knee()}, 0.1))
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	if err := capacity.Markdown(&md, &base, &head); err != nil {
		t.Fatal(err)
	}
	verdict, err := json.Marshal(map[string]any{"report": rep, "long_run": map[string]any{
		"markdown": md.String(), "base_sweep": &base, "head_sweep": &head,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.st.ApplyCheck(context.Background(), store.CheckChange{Repo: repo, HeadSHA: capacitySHA, Tier: "capacity", PRNumber: 31,
		State: "warned", Verdict: verdict}); err != nil {
		t.Fatal(err)
	}
	return capacitySHA
}

// The nightly's capacity knee is its own series on the dashboard: the
// repository page lists it and its page draws it in req/s, lower is worse.
func TestCapacitySeries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	day := time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)
	for i, v := range []float64{20.7, 20.1, 21, 8.7, 8.4} {
		if err := f.st.PutTrend(ctx, store.TrendPoint{Repo: repo, Key: "capacity", Metric: config.SustainableRate, Date: day.AddDate(0, 0, i), Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	code, body, _ := get(t, nil, f.srv.URL+"/r/"+repo+"/series?key=capacity&metric=sustainable_rate")
	if code != 200 || !strings.Contains(body, "sustainable_rate <span class=\"muted\">req/s</span>") || !strings.Contains(body, "lower is worse") || !strings.Contains(body, "8.4") {
		t.Errorf("capacity series page: %d\n%.2000s", code, body)
	}
	if code, body, _ := get(t, nil, f.srv.URL+"/r/"+repo); code != 200 || !strings.Contains(body, `data-metric="sustainable_rate" data-key="capacity"`) {
		t.Errorf("the repository page does not list the capacity series: %d", code)
	}
}
