// Package dispatch is the server's domain core: it turns the GitHub
// handlers' requests into durable jobs, judges finished jobs with the gate,
// reports the verdict on the check run, and walks a regression from warning
// to escalation. It knows nothing about HTTP; the app and agent API call it.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/app"
	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/store"
)

// Clients gives installation-scoped GitHub clients (githubapp.ClientCreator
// satisfies it).
type Clients interface {
	NewInstallationClient(installationID int64) (*github.Client, error)
}

// Service implements app.Dispatcher, app.Appeals and app.Releases, and is
// the agent API's job-done hook.
type Service struct {
	st      store.Store
	clients Clients
	checks  app.Checks
	configs app.ContentsConfigLoader
	now     func() time.Time
	log     zerolog.Logger
}

// Options configure a Service.
type Options struct {
	Store   store.Store
	Clients Clients
	Checks  app.Checks
	// Now is the clock for deadlines; it must agree with the store's.
	Now func() time.Time
	Log zerolog.Logger
}

// New builds a Service.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{st: o.Store, clients: o.Clients, checks: o.Checks, now: o.Now, log: o.Log}
}

// Job kinds beyond the triggers the app names.
const (
	kindBaseline = "baseline"  // measures the base commit when no baseline exists
	kindExtend   = "extension" // more runs for an inconclusive comparison
)

// RequestRun implements app.Dispatcher: it snapshots the base branch's
// config into a plan, enqueues the job and links it to the check run, all
// before returning, so a crash after the webhook's 2xx loses nothing.
func (s *Service) RequestRun(ctx context.Context, req app.RunRequest) error {
	client, err := s.clients.NewInstallationClient(req.InstallationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", req.InstallationID, err)
	}
	ref := req.BaseRef
	if ref == "" {
		ref = req.BaseSHA
	}
	cfg, err := s.configs.Full(ctx, client, req.Owner, req.Repo, ref)
	if err != nil {
		return err
	}
	plan, err := agentapi.PlanFromConfig(cfg, string(req.Tier))
	if err != nil {
		return fmt.Errorf("plan %s tier: %w", req.Tier, err)
	}
	plan.Repo, plan.HeadSHA = req.FullName(), req.HeadSHA

	prev, err := s.st.GetCheckRun(ctx, req.FullName(), req.HeadSHA, string(req.Tier))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	found := err == nil
	var jobIDs []int64
	var deadline time.Time
	var carried json.RawMessage
	if found {
		// The escalation clock belongs to the commit, not to one run of
		// it: re-running the same SHA (a retest, a reopened PR, a second
		// approval) keeps its deadline, and an escalated or accepted
		// regression stays so unless the new runs pass.
		deadline, carried = prev.Deadline, carryVerdict(prev)
	}
	if found && req.Confirm {
		// A retest after a suspected regression re-measures three times on
		// the same card, and the new runs join the evidence: pressing
		// retest must not be a way to draw a fresh sample until green.
		jobIDs = prev.JobIDs
		plan.Repeats = 3
		if uuid := s.cardOf(ctx, prev.JobIDs); uuid != "" {
			plan.GPUUUID = uuid
		}
	}
	tier, err := cfg.Tier(string(req.Tier))
	if err != nil {
		return err
	}
	plans, cells := matrixPlans(plan, tier)
	var newIDs []int64
	for i, p := range plans {
		job, err := s.enqueue(ctx, req, cfg, p, cells[i], req.Trigger)
		if err != nil {
			return err
		}
		newIDs = append(newIDs, job.ID)
	}
	if _, err := s.st.PutCheckRun(ctx, store.CheckRun{
		Repo: req.FullName(), HeadSHA: req.HeadSHA, Tier: string(req.Tier), PRNumber: req.PR,
		InstallationID: req.InstallationID, GitHubID: req.CheckRunID, JobIDs: append(jobIDs, newIDs...),
		State: store.CheckQueued, Deadline: deadline, Verdict: carried,
	}); err != nil {
		return err
	}
	if found && prev.GitHubID != 0 && prev.GitHubID != req.CheckRunID && open(prev.State) {
		// The row now reports to the new check run; the old one would
		// otherwise stay queued on GitHub forever.
		s.cancelCheck(ctx, prev, "Replaced by a newer run",
			fmt.Sprintf("A newer run of `%s` (%s) replaced this one before it finished; see the latest `%s` check.", short(req.HeadSHA), req.Trigger, app.CheckName(req.Tier)))
	}
	s.audit(ctx, req.RequestedBy, "run.requested", req.FullName(), req.PR, map[string]any{
		"tier": req.Tier, "sha": req.HeadSHA, "job_ids": newIDs, "trigger": req.Trigger, "delivery": req.DeliveryID,
	})
	return nil
}

func (s *Service) enqueue(ctx context.Context, req app.RunRequest, cfg *config.Config, plan agentapi.Plan, cell, kind string) (store.Job, error) {
	snap, err := newSnapshot(cfg, plan)
	if err != nil {
		return store.Job{}, err
	}
	snap.Cell = cell
	snapshot, err := snap.encode()
	if err != nil {
		return store.Job{}, err
	}
	job, err := s.st.Enqueue(ctx, store.JobSpec{
		Tier: plan.Tier, Kind: kind, Repo: req.FullName(), InstallationID: req.InstallationID,
		PRNumber: req.PR, HeadSHA: plan.HeadSHA, BaseSHA: req.BaseSHA, Config: snapshot,
		Labels: cfg.Runner.Labels, GPUUUID: plan.GPUUUID, CheckRunID: req.CheckRunID,
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("enqueue %s job: %w", plan.Tier, err)
	}
	return job, nil
}

// Supersede implements app.Dispatcher: a new push cancels the PR's older
// queued jobs, asks running ones to stop, and clears the escalation clocks
// of older commits (the new SHA gets its own).
func (s *Service) Supersede(ctx context.Context, repo string, pr int, newHeadSHA string) error {
	sup, err := s.st.CancelSuperseded(ctx, repo, pr, newHeadSHA)
	if err != nil {
		return err
	}
	runs, err := s.st.ListCheckRuns(ctx, repo, pr)
	if err != nil {
		return err
	}
	for _, cr := range runs {
		if cr.HeadSHA == newHeadSHA {
			continue
		}
		if open(cr.State) {
			// Its jobs are cancelled above; conclude the check too, or
			// GitHub shows the old commit queued forever. The transition
			// is conditional, so of several replicas one updates GitHub.
			won, err := s.st.TransitionCheckRun(ctx, cr.ID, cr.State, store.CheckTransition{State: checkSuperseded})
			if err != nil {
				return err
			}
			if won {
				s.cancelCheck(ctx, cr, "Superseded by a newer push",
					fmt.Sprintf("The pull request moved on to `%s`; perfgate measures that commit instead of `%s`.", short(newHeadSHA), short(cr.HeadSHA)))
			}
			continue
		}
		if cr.Deadline.IsZero() {
			continue
		}
		if _, err := s.st.TransitionCheckRun(ctx, cr.ID, cr.State, store.CheckTransition{State: cr.State}); err != nil {
			return err
		}
	}
	if n := len(sup.Cancelled) + len(sup.Signalled); n > 0 {
		s.audit(ctx, "perfgate", "run.superseded", repo, pr, map[string]any{"new_sha": newHeadSHA, "cancelled": len(sup.Cancelled), "signalled": len(sup.Signalled)})
	}
	return nil
}

// checkSuperseded is the state of a check run whose commit a newer push
// replaced before it was judged; results that still arrive are dropped.
const checkSuperseded = "superseded"

// open reports whether a check run state is still waiting for its jobs.
func open(state string) bool {
	return state == store.CheckQueued || state == store.CheckInProgress
}

// carryVerdict is the verdict a re-run of the same commit starts from: the
// previous one, remembering whether its regression was escalated or
// accepted, so the re-run's regression is judged as such rather than as a
// fresh warning.
func carryVerdict(prev store.CheckRun) json.RawMessage {
	var doc verdictDoc
	if len(prev.Verdict) > 0 {
		_ = json.Unmarshal(prev.Verdict, &doc) // an unreadable verdict carries nothing
	}
	held := doc.Held // a re-run of a re-run keeps what the first one carried
	if !open(prev.State) {
		held = ""
	}
	if prev.State == store.CheckEscalated || prev.State == store.CheckAccepted {
		held = prev.State
	}
	if held == "" {
		return nil
	}
	raw, _ := json.Marshal(verdictDoc{Held: held, Notes: doc.Notes})
	return raw
}

// cancelCheck concludes an open GitHub check run as cancelled. app.Checks
// has no cancelled verdict (it is not a judgement of the commit), so this
// updates the run through go-github directly. Failures are logged, not
// returned: the caller's real work (queueing the new run) must go on.
func (s *Service) cancelCheck(ctx context.Context, cr store.CheckRun, title, summary string) {
	client, err := s.clients.NewInstallationClient(cr.InstallationID)
	if err == nil {
		owner, repo, _ := strings.Cut(cr.Repo, "/")
		_, _, err = client.Checks.UpdateCheckRun(ctx, owner, repo, cr.GitHubID, github.UpdateCheckRunOptions{
			Name:       app.CheckName(app.Tier(cr.Tier)), // go-github v62 sends name even when empty: always set it
			Status:     github.String("completed"),
			Conclusion: github.String("cancelled"),
			Output:     &github.CheckRunOutput{Title: github.String(title), Summary: github.String(summary)},
		})
	}
	if err != nil {
		s.log.Error().Err(err).Str("repo", cr.Repo).Int64("check_run_id", cr.GitHubID).Str("sha", cr.HeadSHA).Msg("conclude replaced check run as cancelled")
	}
}

// cardOf returns the GPU the jobs' measured runs used, for pinning a retest.
func (s *Service) cardOf(ctx context.Context, jobIDs []int64) string {
	for i := len(jobIDs) - 1; i >= 0; i-- {
		res, err := s.st.ListResults(ctx, jobIDs[i])
		if err != nil {
			continue
		}
		for _, r := range res {
			if r.Kind == store.KindMeasured && r.GPUUUID != "" {
				return r.GPUUUID
			}
		}
	}
	return ""
}

func (s *Service) audit(ctx context.Context, actor, action, repo string, pr int, detail map[string]any) {
	raw, _ := json.Marshal(detail)
	if actor == "" {
		actor = "perfgate"
	}
	if _, err := s.st.AppendAudit(ctx, store.AuditEntry{Actor: actor, Action: action, Repo: repo, PRNumber: pr, Detail: raw}); err != nil {
		s.log.Error().Err(err).Str("action", action).Msg("audit log write failed")
	}
}
