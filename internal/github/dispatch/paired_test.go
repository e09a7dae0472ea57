package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

const baseSHA = "b0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3"

// requestMerge asks for the merge tier of sha over base, as an approving
// review or the merge queue does.
func (l *lifecycle) requestMerge(sha string, confirm bool) int64 {
	l.t.Helper()
	l.n++
	if err := l.svc.RequestRun(l.ctx, request.Run{InstallationID: githubtest.InstallationID, Owner: "acme", Repo: "inference", PR: 17,
		HeadSHA: sha, BaseSHA: baseSHA, BaseRef: "main", Tier: check.TierMerge, Trigger: "pull_request_review.approved", Confirm: confirm,
		Author: "octocat", DeliveryID: fmt.Sprintf("m-%d", l.n)}); err != nil {
		l.t.Fatal(err)
	}
	l.flush()
	cr, err := l.st.GetCheckRun(l.ctx, testRepo, sha, "merge")
	if err != nil {
		l.t.Fatal(err)
	}
	return cr.GitHubID
}

// runPaired measures a claimed interleaved job as its plan schedules it:
// each run of side "head" has its latencies times head (and its
// throughput divided), each run times exp(noise·N(0,1)) — or, with no
// rng, each head engine start's runs times exp(±noise), alternating from
// start to start (head runs of pairs 2k and 2k+1 share a start in the ABBA
// order: noise that alternated within a start would cancel in it) — and
// records the commit it measured.
func (l *lifecycle) runPaired(j store.Job, head, noise float64, rng *rand.Rand) {
	l.t.Helper()
	var p agentapi.Plan
	if err := json.Unmarshal(j.Config, &p); err != nil {
		l.t.Fatal(err)
	}
	if p.Interleave == nil || p.BaseSHA == "" || p.HeadSHA == "" {
		l.t.Fatalf("job %d is not an interleaved plan: %+v", j.ID, p)
	}
	for _, slot := range p.Schedule() {
		r := quickRuns(1)[0]
		f := 1.0
		switch {
		case rng != nil:
			f = math.Exp(noise * rng.NormFloat64())
		case slot.Side == agentapi.SideHead && (slot.Pair/2)%2 == 0:
			f = math.Exp(noise)
		case slot.Side == agentapi.SideHead:
			f = math.Exp(-noise)
		}
		if slot.Side == agentapi.SideHead {
			f *= head
		}
		for k := range r.Metrics {
			r.Metrics[k] *= f
		}
		r.OutputThroughput /= f
		r.RequestThroughput /= f
		r.Perfgate.Environment.Commit = p.Commit(slot.Side)
		if l.decorate != nil {
			l.decorate(slot, r)
		}
		full, err := json.Marshal(r)
		if err != nil {
			l.t.Fatal(err)
		}
		if _, _, err := l.st.PutResult(context.Background(), store.ResultUpload{JobID: j.ID, LeaseID: j.LeaseID, IdempotencyKey: fmt.Sprintf("p%d", slot.RunIndex),
			RunIndex: slot.RunIndex, Kind: jobstate.KindMeasured, Side: slot.Side, Pair: slot.Pair, GPUUUID: r.Perfgate.Environment.GPUUUID,
			Summary: full, Samples: full}); err != nil {
			l.t.Fatal(err)
		}
	}
	if _, err := l.st.Finish(l.ctx, j.ID, j.LeaseID, jobstate.Succeeded, ""); err != nil {
		l.t.Fatal(err)
	}
	l.judge()
}

// claimCard claims job j, which is pinned to a card, on that card.
func (l *lifecycle) claimCard(j store.Job) store.Job {
	l.t.Helper()
	got, err := l.st.Claim(l.ctx, store.ClaimRequest{AgentID: l.agent.ID, Labels: l.agent.Labels, GPUUUIDs: []string{j.GPUUUID}, Lease: time.Minute})
	if err != nil {
		l.t.Fatal(err)
	}
	if got.ID != j.ID {
		l.t.Fatalf("claimed job %d, want %d", got.ID, j.ID)
	}
	return got
}

func (l *lifecycle) mergeRow(sha string) store.CheckRun {
	l.t.Helper()
	cr, err := l.st.GetCheckRun(l.ctx, testRepo, sha, "merge")
	if err != nil {
		l.t.Fatal(err)
	}
	return cr
}

// The merge tier queues ONE job naming both commits, measured in ABBA
// order on one card, and judges its pairs — no stored baseline needed.
// The check names both commits and the order.
func TestInterleavedMergeJudgedPaired(t *testing.T) {
	for _, tc := range []struct {
		name       string
		head       float64
		conclusion string
	}{
		{"head 10% slower", 1.10, "neutral"}, // a warning
		{"head and base alike", 1.0, "success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			id := l.requestMerge(headSHA, false)
			cr := l.mergeRow(headSHA)
			if len(cr.JobIDs) != 1 {
				t.Fatalf("%d jobs queued, want one interleaved job", len(cr.JobIDs))
			}
			j := l.claim()
			if j.HeadSHA != headSHA || j.BaseSHA != baseSHA {
				t.Errorf("job names head %s base %s", j.HeadSHA, j.BaseSHA)
			}
			l.runPaired(j, tc.head, 0.005, rand.New(rand.NewPCG(3, 4)))
			c := l.check(id)
			if c.Conclusion != tc.conclusion {
				t.Fatalf("conclusion %s, want %s\n%s\n%s", c.Conclusion, tc.conclusion, c.Summary, c.Text)
			}
			for _, want := range []string{"8 interleaved pairs", "base `" + rev.Short(baseSHA) + "` (B) and head `" + rev.Short(headSHA) + "` (H)", "B H H B B H H B B H H B B H H B"} {
				if !strings.Contains(c.Summary+c.Text, want) {
					t.Errorf("the check does not show %q:\n%s\n%s", want, c.Summary, c.Text)
				}
			}
			doc := l.svc.docOf(l.mergeRow(headSHA))
			if doc.Report == nil || doc.Report.Design != "interleaved" || doc.Report.Pairs != 8 || len(doc.Looks["merge"].Spent) != 1 {
				t.Errorf("stored report %+v, looks %+v; want an interleaved judgement of 8 pairs at look 1", doc.Report, doc.Looks)
			}
			if _, err := l.st.LatestBaseline(l.ctx, testRepo, "merge"); err == nil {
				t.Error("an interleaved judgement promoted a baseline")
			}
		})
	}
}

// Noisy pairs leave the comparison inconclusive: perfgate adds the pairs
// the gate asks for (8 more), interleaved on the same card, and judges
// all 16 at the next look; earlier interleaved jobs of the repository are
// the noise prior of later ones.
func TestInterleavedAddsPairs(t *testing.T) {
	l := newLifecycle(t)
	rng := rand.New(rand.NewPCG(5, 6))
	id := l.requestMerge(headSHA, false)
	l.runPaired(l.claim(), 1.03, 0.08, nil)
	cr := l.mergeRow(headSHA)
	if cr.State != store.CheckInProgress || len(cr.JobIDs) != 2 {
		t.Fatalf("after noisy pairs: %s with %d jobs, want in progress with added pairs\n%s\n%s", cr.State, len(cr.JobIDs), l.check(id).Summary, l.check(id).Text)
	}
	ext, err := l.st.GetJob(l.ctx, cr.JobIDs[1])
	if err != nil {
		t.Fatal(err)
	}
	var p agentapi.Plan
	if err := json.Unmarshal(ext.Config, &p); err != nil {
		t.Fatal(err)
	}
	if ext.Kind != kindExtend || p.Interleave == nil || p.Interleave.Pairs != 8 || p.BaseSHA != baseSHA || ext.GPUUUID == "" {
		t.Fatalf("extension job: kind %s plan %+v card %q; want 8 more interleaved pairs on the same card", ext.Kind, p.Interleave, ext.GPUUUID)
	}
	l.runPaired(l.claimCard(ext), 1.03, 0.08, nil)
	// Still open, it doubles again while the settle budget pays for it.
	for cr = l.mergeRow(headSHA); cr.State == store.CheckInProgress; cr = l.mergeRow(headSHA) {
		j, err := l.st.GetJob(l.ctx, cr.JobIDs[len(cr.JobIDs)-1])
		if err != nil {
			t.Fatal(err)
		}
		l.runPaired(l.claimCard(j), 1.03, 0.08, nil)
	}
	doc := l.svc.docOf(cr)
	if doc.Report == nil || doc.Report.Pairs < 16 || doc.Report.Look() != len(cr.JobIDs) || doc.Report.CandidateSessions != len(cr.JobIDs) {
		t.Fatalf("final report %+v, want ≥ 16 pairs from %d jobs at look %d", doc.Report, len(cr.JobIDs), len(cr.JobIDs))
	}

	// The next commit's interleaved job is judged with this one's pairs as
	// its noise prior.
	// (Its own pairs are tight but the prior is wide: it may add pairs.)
	earlier := len(cr.JobIDs)
	l.requestMerge(newSHA, false)
	l.runPaired(l.claim(), 1.0, 0.005, rng)
	for cr := l.mergeRow(newSHA); cr.State == store.CheckInProgress; cr = l.mergeRow(newSHA) {
		j, err := l.st.GetJob(l.ctx, cr.JobIDs[len(cr.JobIDs)-1])
		if err != nil {
			t.Fatal(err)
		}
		l.runPaired(l.claimCard(j), 1.0, 0.005, rng)
	}
	if rep := l.svc.docOf(l.mergeRow(newSHA)).Report; rep == nil || rep.HistorySessions != earlier {
		t.Errorf("next commit's report %+v, want the %d earlier interleaved jobs as its history", rep, earlier)
	}
}

// A retest of an interleaved check adds an interleaved job on the same
// card; its pairs join the evidence at the next look.
func TestInterleavedRetest(t *testing.T) {
	l := newLifecycle(t)
	rng := rand.New(rand.NewPCG(7, 8))
	l.requestMerge(headSHA, false)
	l.runPaired(l.claim(), 1.10, 0.005, rng)
	retest := l.requestMerge(headSHA, true)
	j, err := l.st.GetJob(l.ctx, l.mergeRow(headSHA).JobIDs[1])
	if err != nil {
		t.Fatal(err)
	}
	var p agentapi.Plan
	if err := json.Unmarshal(j.Config, &p); err != nil {
		t.Fatal(err)
	}
	if p.Interleave == nil || j.GPUUUID == "" {
		t.Fatalf("retest job: plan %+v card %q; want interleaved on the same card", p.Interleave, j.GPUUUID)
	}
	l.runPaired(l.claimCard(j), 1.10, 0.005, rng)
	rep := l.svc.docOf(l.mergeRow(headSHA)).Report
	if rep == nil || rep.Pairs != 16 || rep.Look() != 2 {
		t.Fatalf("retest report %+v, want 16 pairs at look 2", rep)
	}
	if c := l.check(retest); c.Conclusion != "neutral" {
		t.Errorf("retest of a 10%% regression: %s", c.Conclusion)
	}
}
