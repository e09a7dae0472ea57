package dispatch

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/kb"
	"github.com/perfgate/perfgate/internal/analysis/profile"
	kbstore "github.com/perfgate/perfgate/internal/github/kb"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// RootCause implements app.Findings: it records the PR's last regression
// verdict's phenomenon — the metrics that moved and, when a profile of
// the PR finished, its diff's fingerprint — with the cause in the
// knowledge base.
func (s *Service) RootCause(ctx context.Context, r request.RootCause) (request.RootCauseRecorded, error) {
	repo := r.Owner + "/" + r.Repo
	cr, rep, ok, err := s.lastRegression(ctx, repo, r.PR)
	if err != nil {
		return request.RootCauseRecorded{}, err
	}
	if !ok {
		return request.RootCauseRecorded{}, request.ErrNoRegression
	}
	sig := signatureOf(rep)
	out := request.RootCauseRecorded{Commit: cr.HeadSHA, Tier: cr.Tier}
	if job, found, err := s.lastProfile(ctx, repo, r.PR); err != nil {
		return request.RootCauseRecorded{}, err
	} else if found {
		if d, _, err := s.profileDiff(ctx, job); err == nil {
			fp := d.Fingerprint()
			sig.Profile = &fp
			out.Profile = profileWords(*d)
		}
	}
	rec, err := kbstore.New(s.finding()).Record(ctx, kb.Record{Repo: repo, Number: r.PR, URL: r.PRURL, Commit: cr.HeadSHA, CulpritPR: r.PR,
		Summary: phenomenonOf(sig), Cause: r.Cause, FixURL: r.Fix, Signature: sig, By: r.By})
	if err != nil {
		return request.RootCauseRecorded{}, err
	}
	out.ID, out.Phenomenon = rec.ID, rec.Summary
	if e, err := auditEntry(r.By, "rootcause.recorded", repo, r.PR, map[string]any{"id": rec.ID, "cause": r.Cause, "fix": r.Fix}); err == nil {
		if _, err := s.finding().AppendAudit(ctx, e); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Msg("audit root cause")
		}
	}
	return out, nil
}

// lastRegression is the PR's most recently judged check whose verdict is
// a regression.
func (s *Service) lastRegression(ctx context.Context, repo string, pr int) (store.CheckRun, *gate.Report, bool, error) {
	rows, err := s.finding().ListCheckRuns(ctx, repo, pr)
	if err != nil {
		return store.CheckRun{}, nil, false, fmt.Errorf("check runs of %s#%d: %w", repo, pr, err)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].UpdatedAt.After(rows[j].UpdatedAt) })
	for _, cr := range rows {
		if doc := s.docOf(cr); doc.Report != nil && doc.Report.Verdict == gate.Regression {
			return cr, doc.Report, true, nil
		}
	}
	return store.CheckRun{}, nil, false, nil
}

// lastProfile is the PR's newest profiling pass that succeeded.
func (s *Service) lastProfile(ctx context.Context, repo string, pr int) (store.Job, bool, error) {
	jobs, err := s.finding().ListJobs(ctx, store.JobFilter{Repo: repo, PRNumber: pr, Tier: agentapi.KindProfile, Status: jobstate.Succeeded, Newest: true})
	if err != nil {
		return store.Job{}, false, fmt.Errorf("profiles of %s#%d: %w", repo, pr, err)
	}
	for _, j := range jobs {
		if j.Kind == agentapi.KindProfile {
			return j, true, nil
		}
	}
	return store.Job{}, false, nil
}

// signatureOf is a regression verdict's phenomenon: each metric's change,
// marked moved when the gate found it significant.
func signatureOf(rep *gate.Report) kb.Signature {
	var sig kb.Signature
	for _, m := range rep.Metrics {
		if math.IsNaN(m.Delta) || math.IsInf(m.Delta, 0) {
			continue
		}
		sig.Metrics = append(sig.Metrics, kb.MetricChange{Metric: m.Metric, Change: m.Delta, Direction: m.Direction, Moved: m.Significant})
	}
	return sig
}

// regressionFacts are what a regression's notes and profiling pass go on,
// read by the load when findings are on: the knowledge base's records and
// any profiling pass of the check's head against the job's base, with its
// diff when it finished.
type regressionFacts struct {
	records []kb.Record
	// profile is the newest pass of the commits queued, running or
	// succeeded (nil: none); diff, its diff when it succeeded and its
	// traces could be read.
	profile *store.Job
	diff    *profile.Diff
	// profileUnread: the passes could not be listed (logged).
	profileUnread bool
}

// loadFindings reads what a regression verdict's notes and profiling pass
// go on (see regressionFacts). Nothing read here fails the judgement: an
// unreadable knowledge base is none, unreadable traces no diff.
func (s *Service) loadFindings(ctx context.Context, cr store.CheckRun, job store.Job) *regressionFacts {
	f := &regressionFacts{records: s.kbRecords(ctx, cr)}
	if job.BaseSHA == "" {
		return f
	}
	pj, ok, err := s.profileJob(ctx, cr.Repo, cr.HeadSHA, job.BaseSHA, true)
	switch {
	case err != nil:
		zerolog.Ctx(ctx).Warn().Err(err).Msg("look up the regression's profiling pass")
		f.profileUnread = true
	case ok:
		f.profile = &pj
		if pj.Status == jobstate.Succeeded {
			if d, _, err := s.profileDiff(ctx, pj); err == nil {
				f.diff = d
			}
		}
	}
	return f
}

// kbMatch is the check run's line on the knowledge base for a regression,
// "" when nothing recorded resembles it. Records made on the same PR are
// left out: a retest of the PR that found a cause is not news. The
// regression's profile is used when one finished; while one is queued
// (queued: by this verdict's step, or before it), a cause recorded with a
// profile is not named as a match but as what the profile will decide
// (profileVerdict answers then).
func kbMatch(f *regressionFacts, rep *gate.Report, queued bool) string {
	if len(f.records) == 0 {
		return ""
	}
	sig := signatureOf(rep)
	if f.diff != nil {
		fp := f.diff.Fingerprint()
		sig.Profile = &fp
	}
	v := kb.Judge(f.records, sig)
	switch {
	case v.OK:
		return "🔎 This " + kb.MatchLine(v.Match)
	case len(v.NeedsProfile) > 0:
		return "🔎 This regression: " + kb.PendingLine(v, queued)
	}
	return ""
}

// kbRecords are the repository's recorded causes, less the check's own
// PR's.
func (s *Service) kbRecords(ctx context.Context, cr store.CheckRun) []kb.Record {
	rows, err := s.finding().ListRootCauses(ctx, cr.Repo)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("read the knowledge base")
		return nil
	}
	var records []kb.Record
	for _, row := range rows {
		if cr.PRNumber > 0 && row.Number == cr.PRNumber {
			continue
		}
		r, err := kbstore.FromStore(row)
		if err != nil {
			continue
		}
		records = append(records, r)
	}
	return records
}

// profileVerdict is the knowledge base's answer once a regression's
// profile is in: the paragraph the profile comment ends with, "" when the
// PR has no regression verdict at the profiled commit or nothing recorded
// is close on its metrics.
func (s *Service) profileVerdict(ctx context.Context, job store.Job, d *profile.Diff) string {
	cr, rep, ok, err := s.lastRegression(ctx, job.Repo, job.PRNumber)
	if err != nil || !ok || cr.HeadSHA != job.HeadSHA {
		return ""
	}
	records := s.kbRecords(ctx, cr)
	if len(records) == 0 {
		return ""
	}
	sig := signatureOf(rep)
	fp := d.Fingerprint()
	sig.Profile = &fp
	v := kb.Judge(records, sig)
	if v.OK {
		return "🔎 **Knowledge base:** this regression " + kb.MatchLine(v.Match) + "\n"
	}
	// Say so when the metrics had pointed at a recorded cause: the check
	// run said the profile would decide.
	nearest := kb.Judge(records, kb.Signature{Metrics: sig.Metrics})
	if len(nearest.NeedsProfile) == 0 {
		return ""
	}
	return fmt.Sprintf("🔎 **Knowledge base:** the metrics moved like %s, but the profiles differ, so it is not that cause: %s.\n",
		kbRef(nearest.NeedsProfile[0].Record), closest(records, sig))
}

// closest words the best profile comparison against records: "profile
// similarity −0.08 to #21".
func closest(records []kb.Record, sig kb.Signature) string {
	best, bestSim := kb.Record{}, math.Inf(-1)
	for _, r := range records {
		if r.Signature.Profile == nil {
			continue
		}
		if sim := 1 - kb.Distance(kb.Signature{Profile: sig.Profile}, kb.Signature{Profile: r.Signature.Profile}); sim > bestSim {
			best, bestSim = r, sim
		}
	}
	if math.IsInf(bestSim, -1) {
		return "no recorded profile to compare"
	}
	return fmt.Sprintf("profile similarity %.2f to %s (a match needs %.2f)", bestSim, kbRef(best), kb.MinProfileSimilarity)
}

func kbRef(r kb.Record) string {
	switch {
	case r.Number > 0 && r.URL != "":
		return fmt.Sprintf("[#%d](%s)", r.Number, r.URL)
	case r.Number > 0:
		return fmt.Sprintf("#%d", r.Number)
	}
	return "`" + rev.Short(r.Commit) + "`"
}

// profileWords names a diff's top findings, or says none moved.
func profileWords(d profile.Diff) string {
	if len(d.Findings) == 0 {
		return "no scheduler change beyond ±20%"
	}
	var parts []string
	for i, c := range d.Findings {
		if i == 2 {
			break
		}
		parts = append(parts, c.Sentence)
	}
	return strings.Join(parts, "; ")
}

// regressionNotes are what a regression verdict's summary says beyond the
// gate — the knowledge base's match, and the profile queued for it — and
// the profiling pass the verdict's step queues (nil for none). f is what
// the load read for them (nil: findings are off, and there are none).
func (s *Service) regressionNotes(ctx context.Context, cr store.CheckRun, job store.Job, rep *gate.Report, f *regressionFacts) ([]string, *store.JobSpec) {
	if f == nil {
		return nil, nil
	}
	// The profile is decided first: the knowledge base waits for it.
	spec, profiling := s.profileOnRegression(ctx, cr, job, f)
	queued := spec != nil || (f.profile != nil && f.profile.Status != jobstate.Succeeded)
	var notes []string
	if line := kbMatch(f, rep, queued); line != "" {
		notes = append(notes, line)
	}
	if profiling != "" {
		notes = append(notes, profiling)
	}
	return notes, spec
}

// phenomenonOf words a regression's moved metrics, the ones that got
// worse first (largest first), then what got better: "tpot_p90 +18%,
// tpot_median +17%; better: ttft_median −37%".
func phenomenonOf(sig kb.Signature) string {
	var worse, better []kb.MetricChange
	for _, m := range sig.Metrics {
		if !m.Moved {
			continue
		}
		if w := m.Direction.Sign() * m.Change; w > 0 {
			worse = append(worse, m)
		} else if w < 0 {
			better = append(better, m)
		}
	}
	byMagnitude := func(ms []kb.MetricChange) {
		sort.SliceStable(ms, func(i, j int) bool { return math.Abs(ms[i].Change) > math.Abs(ms[j].Change) })
	}
	byMagnitude(worse)
	byMagnitude(better)
	words := func(ms []kb.MetricChange, n int) string {
		var parts []string
		for i, m := range ms {
			if i == n {
				break
			}
			parts = append(parts, fmt.Sprintf("%s %s", m.Metric, strings.Replace(fmt.Sprintf("%+.0f%%", 100*m.Change), "-", "−", 1)))
		}
		return strings.Join(parts, ", ")
	}
	switch {
	case len(worse) == 0:
		return sig.Phenomenon()
	case len(better) == 0:
		return words(worse, 3)
	}
	return words(worse, 3) + "; better: " + words(better, 2)
}
