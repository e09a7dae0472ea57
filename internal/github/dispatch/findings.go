package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/profile"
	"github.com/perfgate/perfgate/internal/github/backoff"
	kbstore "github.com/perfgate/perfgate/internal/github/kb"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// findingsStore is what the findings room (findings.go, knowledge.go:
// profiles and the knowledge base) uses.
type findingsStore interface {
	kbstore.Store
	Enqueue(ctx context.Context, spec store.JobSpec) (store.Job, error)
	ListArtifacts(ctx context.Context, jobID int64) ([]store.Artifact, error)
	ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error)
	AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
	ListCheckRuns(ctx context.Context, repo string, pr int) ([]store.CheckRun, error)
}

// TraceFiles opens stored artifacts by their SHA-256 (artifact.Dir).
type TraceFiles interface {
	Open(sum string) (io.ReadCloser, error)
}

// FindingsOptions turn on profiling passes and the knowledge base.
type FindingsOptions struct {
	// Traces opens the artifacts runners uploaded.
	Traces TraceFiles
	// ArtifactURL links one artifact for people (its dashboard download,
	// signed); nil writes no links.
	ArtifactURL func(repo string, id int64, name string) string
}

// findings is the Service's part that takes a regression to its cause.
type findings struct {
	opts FindingsOptions
}

// EnableFindings routes finished profiling passes to the diff and turns
// on Profile and RootCause (app.Findings).
func (s *Service) EnableFindings(o FindingsOptions) {
	s.findings = &findings{opts: o}
	s.HandleKind(agentapi.KindProfile, s.profileDone)
}

// profileMeta rides in a profiling job's snapshot: who asked and why.
type profileMeta struct {
	Trigger string `json:"trigger"` // "/perf profile" or "regression"
	By      string `json:"by,omitempty"`
	Tier    string `json:"tier,omitempty"` // the check whose regression asked
}

// profileSnapshot is a profiling job's config: the agent's plan and,
// ignored by the agent, why it runs.
type profileSnapshot struct {
	agentapi.Plan
	ProfileOf *profileMeta `json:"profile_of,omitempty"`
}

// Profile implements app.Findings: it queues one job that profiles the
// PR's base and head on one card, one after the other.
func (s *Service) Profile(ctx context.Context, r request.Profile) (request.ProfileQueued, error) {
	if s.findings == nil {
		return request.ProfileQueued{}, backoff.Permanent(errors.New("profiling is not enabled on this server"))
	}
	cfg, err := s.configAt(ctx, r.Config, r.InstallationID, r.Owner, r.Repo, r.ConfigRef, r.BaseRef, r.BaseSHA)
	if err != nil {
		return request.ProfileQueued{}, err
	}
	return s.queueProfile(ctx, cfg, profileTarget{repo: r.Owner + "/" + r.Repo, installationID: r.InstallationID, pr: r.PR,
		head: r.HeadSHA, base: r.BaseSHA, tier: string(check.TierQuick)}, profileMeta{Trigger: r.Trigger, By: r.By}, false)
}

type profileTarget struct {
	repo           string
	installationID int64
	pr             int
	head, base     string
	tier           string // whose warm-up the pass sends
}

// queueProfile queues a profiling pass unless one of the same commits is
// queued or running — or, with anyEarlier, has ever run.
func (s *Service) queueProfile(ctx context.Context, cfg *config.Config, t profileTarget, meta profileMeta, anyEarlier bool) (request.ProfileQueued, error) {
	p := cfg.Profile
	if earlier, ok, err := s.profileJob(ctx, t.repo, t.head, t.base, anyEarlier); err != nil {
		return request.ProfileQueued{}, err
	} else if ok {
		return request.ProfileQueued{JobID: earlier.ID, Already: true, Requests: p.Requests}, nil
	}
	spec, err := profileSpec(cfg, t, meta)
	if err != nil {
		return request.ProfileQueued{}, err
	}
	job, err := s.finding().Enqueue(ctx, spec)
	if err != nil {
		return request.ProfileQueued{}, fmt.Errorf("queue profile of %s: %w", rev.Short(t.head), err)
	}
	zerolog.Ctx(ctx).Info().Int64("job_id", job.ID).Str("head", t.head).Str("base", t.base).Str("trigger", meta.Trigger).
		Msg("profiling pass queued")
	return request.ProfileQueued{JobID: job.ID, Requests: p.Requests}, nil
}

// profileSpec is the job that profiles t's base and head under cfg: the
// agent's plan, with why it runs.
func profileSpec(cfg *config.Config, t profileTarget, meta profileMeta) (store.JobSpec, error) {
	p := cfg.Profile
	plan, err := agentapi.PlanAt(cfg, t.tier, agentapi.Commits{Repo: t.repo, Head: t.head})
	if err != nil {
		return store.JobSpec{}, backoff.Permanent(fmt.Errorf("plan profile: %w", err))
	}
	plan.BaseSHA = t.base
	plan.Profile = &agentapi.ProfilePlan{Requests: p.Requests, Command: append([]string(nil), p.Command...),
		Timeout: agentapi.Duration(p.Timeout.D()), MaxBytes: int64(p.MaxBytes)}
	if err := plan.Validate(); err != nil {
		return store.JobSpec{}, backoff.Permanent(fmt.Errorf("plan profile: %w", err))
	}
	meta.Tier = t.tier
	snap, err := jsonOf(profileSnapshot{Plan: plan, ProfileOf: &meta})
	if err != nil {
		return store.JobSpec{}, err
	}
	return store.JobSpec{Tier: agentapi.KindProfile, Kind: agentapi.KindProfile, Repo: t.repo,
		InstallationID: t.installationID, PRNumber: t.pr, HeadSHA: t.head, BaseSHA: t.base, Config: snap,
		Labels: cfg.Runner.Labels, GPUUUID: plan.GPUUUID}, nil
}

// profileJob finds a profiling pass of head against base that is queued or
// running (or, with finished, any that succeeded too), newest first.
func (s *Service) profileJob(ctx context.Context, repo, head, base string, finished bool) (store.Job, bool, error) {
	jobs, err := s.finding().ListJobs(ctx, store.JobFilter{Repo: repo, HeadSHA: head, Tier: agentapi.KindProfile, Newest: true})
	if err != nil {
		return store.Job{}, false, fmt.Errorf("list profiles of %s: %w", rev.Short(head), err)
	}
	for _, j := range jobs {
		if j.Kind != agentapi.KindProfile || j.BaseSHA != base {
			continue
		}
		switch j.Status {
		case jobstate.Queued, jobstate.Running:
			return j, true, nil
		case jobstate.Succeeded:
			if finished {
				return j, true, nil
			}
		}
	}
	return store.Job{}, false, nil
}

// profileOnRegression is the pass to queue for a check that just
// concluded regression, when its tier's config asks
// (profile.on_regression) and the load found none of the same commits
// (f: a regression re-judged after a retest is profiled once), and the
// note for its summary ("" for none). It reads nothing: the step queues
// the pass (step.profileJob).
func (s *Service) profileOnRegression(ctx context.Context, cr store.CheckRun, job store.Job, f *regressionFacts) (*store.JobSpec, string) {
	// A merge group's check has no PR to post the diff on.
	if f == nil || cr.PRNumber <= 0 || job.BaseSHA == "" || job.BaseSHA == cr.HeadSHA {
		return nil, ""
	}
	snap, err := snapshotOf(job)
	if err != nil || snap.Rules == nil || !snap.Rules.onRegression(cr.Tier) {
		return nil, ""
	}
	const posted = "where the time went will be posted on the pull request, the traces listed on this check's Details page."
	switch {
	case f.profileUnread:
		return nil, "" // the load could not tell whether one is queued (it logged why)
	case f.profile != nil:
		return nil, fmt.Sprintf("Profiling base `%s` and head `%s` (job %d): %s", rev.Short(job.BaseSHA), rev.Short(cr.HeadSHA), f.profile.ID, posted)
	}
	cfg := config.Default()
	cfg.Server, cfg.Workload, cfg.Runner = snap.Rules.Server, snap.Rules.Workload, snap.Rules.Runner
	cfg.Profile = snap.Rules.Profile
	if snap.Gate != nil {
		cfg.Tiers[cr.Tier] = snap.Gate.Tier
	}
	spec, err := profileSpec(cfg, profileTarget{repo: cr.Repo, installationID: cr.InstallationID, pr: cr.PRNumber,
		head: cr.HeadSHA, base: job.BaseSHA, tier: cr.Tier}, profileMeta{Trigger: "regression"})
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("queue profile on regression")
		return nil, ""
	}
	return &spec, fmt.Sprintf("Profiling base `%s` and head `%s` (a pass queued with this verdict): %s", rev.Short(job.BaseSHA), rev.Short(cr.HeadSHA), posted)
}

// profileRules are what a measurement job's snapshot keeps of the config
// to queue a profile on its regression: the engine, workload and runner,
// and the profile section.
type profileRules struct {
	Server   config.Server   `json:"server"`
	Workload config.Workload `json:"workload"`
	Runner   config.Runner   `json:"runner"`
	Profile  config.Profile  `json:"profile"`
}

func (p *profileRules) onRegression(tier string) bool {
	for _, t := range p.Profile.OnRegression {
		if t == tier {
			return true
		}
	}
	return false
}

func rulesOf(cfg *config.Config) *profileRules {
	return &profileRules{Server: cfg.Server, Workload: cfg.Workload, Runner: cfg.Runner, Profile: cfg.Profile}
}

// profileDone diffs a finished pass's base and head traces and posts
// "where the time went" on the PR with links to both.
func (s *Service) profileDone(ctx context.Context, job store.Job) error {
	if s.findings == nil || job.PRNumber <= 0 {
		return nil
	}
	key := fmt.Sprintf("profile:%d:%d", job.ID, job.Attempts)
	if job.Status == jobstate.Cancelled {
		return nil // superseded by a push or the PR closed: nobody waits for it
	}
	if job.Status != jobstate.Succeeded {
		body := fmt.Sprintf("perfgate could not profile `%s` against `%s` (job %d %s: %s). `/perf profile` tries again.",
			rev.Short(job.HeadSHA), rev.Short(job.BaseSHA), job.ID, job.Status, orWhy(job.FailureReason))
		return s.postComment(ctx, key, job, body)
	}
	d, arts, err := s.profileDiff(ctx, job)
	if err != nil && !errors.Is(err, errNoTraces) {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### perfgate profile: `%s` (base) → `%s` (head)\n\n", rev.Short(job.BaseSHA), rev.Short(job.HeadSHA))
	if d != nil {
		b.WriteString(d.Markdown())
	} else {
		fmt.Fprintf(&b, "The runner's trace files are not scheduler traces perfgate can diff (%v); open them in their tool.\n", err)
	}
	if links := s.artifactLinks(job.Repo, arts); links != "" {
		b.WriteString("\nTraces (Chrome trace format: open in https://ui.perfetto.dev): " + links + "\n")
	}
	if d != nil {
		if kbText := s.profileVerdict(ctx, job, d); kbText != "" {
			b.WriteString("\n" + kbText)
		}
	}
	return s.postComment(ctx, key, job, b.String())
}

var errNoTraces = errors.New("no scheduler trace for base and head")

// profileDiff reads a pass's traces and diffs base against head.
func (s *Service) profileDiff(ctx context.Context, job store.Job) (*profile.Diff, []store.Artifact, error) {
	arts, err := s.finding().ListArtifacts(ctx, job.ID)
	if err != nil {
		return nil, nil, err
	}
	traces := map[string]*profile.Trace{}
	for _, a := range arts {
		if traces[a.Side] != nil || s.findings.opts.Traces == nil {
			continue
		}
		f, err := s.findings.opts.Traces.Open(a.SHA256)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Int64("artifact", a.ID).Msg("open trace")
			continue
		}
		t, err := profile.Parse(f)
		f.Close()
		if err == nil && len(t.Steps) > 0 {
			traces[a.Side] = t
		}
	}
	base, head := traces[agentapi.SideBase], traces[agentapi.SideHead]
	if base == nil || head == nil {
		return nil, arts, errNoTraces
	}
	d := profile.Compare(base, head)
	return &d, arts, nil
}

func (s *Service) artifactLinks(repo string, arts []store.Artifact) string {
	arts = append([]store.Artifact(nil), arts...)
	sort.SliceStable(arts, func(i, j int) bool { return arts[i].Side < arts[j].Side }) // base, then head
	var links []string
	for _, a := range arts {
		label := strings.TrimSpace(a.Side + " " + a.Name)
		if s.findings.opts.ArtifactURL != nil {
			links = append(links, fmt.Sprintf("[%s](%s) (%s)", label, s.findings.opts.ArtifactURL(repo, a.ID, a.Name), bytesText(a.Size)))
		} else {
			links = append(links, fmt.Sprintf("%s (%s)", label, bytesText(a.Size)))
		}
	}
	return strings.Join(links, " · ")
}

func (s *Service) postComment(ctx context.Context, key string, job store.Job, body string) error {
	e, err := commentEffect(key, job.InstallationID, job.Repo, job.PRNumber, body)
	if err != nil {
		return err
	}
	return s.putEffect(ctx, e)
}

func jsonOf(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

func orWhy(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
