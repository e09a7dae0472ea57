package web_test

import (
	"context"
	"encoding/json"
	"html"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/analysis/cost"
	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/store"
)

// A priced regression on a pull request shows its cost on its check page
// and in its API document, and the repository page sums what the open
// ones cost; a passed check's stale figure is not summed.
func TestRegressionCost(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	price := cost.Price{GPUHourUSD: 4, GPUs: 10}
	put := func(sha, state string, e cost.Estimate) {
		t.Helper()
		doc, err := json.Marshal(map[string]any{"report": gate.Report{Tier: "quick", Verdict: gate.Regression}, "cost": e})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.PutCheckRun(ctx, store.CheckRun{Repo: repo, HeadSHA: sha, Tier: "quick", PRNumber: 7, State: state, Verdict: doc}); err != nil {
			t.Fatal(err)
		}
	}
	thr := cost.Of(price, []cost.Change{{Metric: "output_throughput", Estimate: -0.09, Regressed: true}})
	tpot := cost.Of(price, []cost.Change{{Metric: "tpot_median", Estimate: 0.10, Regressed: true}})
	ttft := cost.Of(price, []cost.Change{{Metric: "ttft_p90", Estimate: 0.20, Regressed: true}})
	a, b, c, d := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40), strings.Repeat("d", 40)
	put(a, store.CheckWarned, thr)
	put(b, store.CheckEscalated, tpot)
	put(c, store.CheckWarned, ttft)
	put(d, store.CheckPassed, thr) // retested and passed: no longer open

	code, body, _ := get(t, nil, f.srv.URL+"/r/"+repo)
	body = html.UnescapeString(body)
	// $2,888 + $2,920
	if want := `id="open-cost">Open pull-request regressions (2 priced, 1 not priced) would cost <b>+$5,808 a month</b>`; code != 200 || !strings.Contains(body, want) {
		t.Errorf("repository page: %d, want %q in\n%.2000s", code, want, body)
	}
	code, body, _ = get(t, nil, f.srv.URL+"/r/"+repo+"/checks/"+a+"/quick")
	body = html.UnescapeString(body)
	if want := "output throughput −9.0%: 1.10× the GPU-hours for the same traffic, +$2,888 a month at 10 GPUs ($4.00/GPU-hour)."; code != 200 || !strings.Contains(body, want) || !strings.Contains(body, "sized by throughput") {
		t.Errorf("check page: %d, want %q", code, want)
	}
	code, body, _ = get(t, nil, f.srv.URL+"/api/data/repos/"+repo+"/checks/"+a+"/quick")
	var got struct{ Cost *cost.Estimate }
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || got.Cost == nil || got.Cost.Short() != "+$2,888/mo" {
		t.Errorf("check API: %d cost %+v\n%.300s", code, got.Cost, body)
	}
}
