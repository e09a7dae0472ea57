package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/robfig/cron/v3"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/github/baseline"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// ScheduleNightly runs the nightly tier on each repository's default
// branch on the cron schedule. robfig/cron parses standard five-field
// expressions; writing a parser by hand would be the riskier choice. A
// repository whose nightly could not be queued (GitHub down at 3 am) is
// tried again every NightlyRetryEvery until it is, or the next night's run
// takes over: the nightly is queued once per night whatever the weather
// (its delivery key is the date).
func (s *Service) ScheduleNightly(ctx context.Context, spec string, repos []string, clients githubapp.ClientCreator) (stop func(), err error) {
	n := &nightlyRuns{s: s, clients: clients}
	c := cron.New()
	if _, err := c.AddFunc(spec, func() {
		if _, err := s.nightlyTurn(ctx, n, s.now(), repos); err != nil {
			s.log.Error().Err(err).Msg("nightly turn")
		}
	}); err != nil {
		return nil, fmt.Errorf("nightly schedule %q: %w", spec, err)
	}
	if _, err := c.AddFunc(fmt.Sprintf("@every %s", NightlyRetryEvery), func() { n.retry(ctx) }); err != nil {
		return nil, fmt.Errorf("nightly retry: %w", err)
	}
	c.Start()
	return func() { <-c.Stop().Done() }, nil
}

// NightlyRetryEvery is how often a nightly that failed to queue is tried
// again.
const NightlyRetryEvery = 5 * time.Minute

// nightlyRuns queues the nightlies and remembers which failed, for the
// retry tick.
type nightlyRuns struct {
	s       *Service
	clients githubapp.ClientCreator
	mu      sync.Mutex
	failed  []string
}

// run queues the nightly of every repository; the ones that fail are
// retried at the next retry tick.
func (n *nightlyRuns) run(ctx context.Context, repos []string) {
	var failed []string
	for _, r := range repos {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := n.s.Nightly(rctx, n.clients, r)
		var cerr *repoconfig.Error
		switch {
		case err == nil:
		case errors.As(err, &cerr) || errors.Is(err, repoconfig.ErrNotConfigured):
			// The repository's config, not GitHub's weather: its check
			// says so, and retrying cannot help tonight.
			n.s.log.Error().Err(err).Str("repo", r).Msg("nightly run")
		default:
			n.s.log.Error().Err(err).Str("repo", r).Dur("retry_in", NightlyRetryEvery).Msg("nightly run could not be queued; retrying")
			failed = append(failed, r)
		}
		cancel()
	}
	n.mu.Lock()
	n.failed = failed
	n.mu.Unlock()
}

// retry runs the failed repositories again.
func (n *nightlyRuns) retry(ctx context.Context) {
	n.mu.Lock()
	repos := n.failed
	n.mu.Unlock()
	if len(repos) > 0 {
		n.run(ctx, repos)
	}
}

// Nightly queues the nightly tier on the head of repo's default branch. Its
// results go to the trend; with no nightly baseline yet, the first night's
// runs become one.
func (s *Service) Nightly(ctx context.Context, clients githubapp.ClientCreator, fullName string) error {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok {
		return fmt.Errorf("nightly repo %q: want owner/name", fullName)
	}
	appClient, err := clients.NewAppClient()
	if err != nil {
		return err
	}
	inst, _, err := appClient.Apps.FindRepositoryInstallation(ctx, owner, name)
	if err != nil {
		return fmt.Errorf("find installation of %s: %w", fullName, err)
	}
	client, err := clients.NewInstallationClient(inst.GetID())
	if err != nil {
		return err
	}
	repo, _, err := client.Repositories.Get(ctx, owner, name)
	if err != nil {
		return fmt.Errorf("get %s: %w", fullName, err)
	}
	branch, _, err := client.Repositories.GetBranch(ctx, owner, name, repo.GetDefaultBranch(), 1)
	if err != nil {
		return fmt.Errorf("get %s default branch: %w", fullName, err)
	}
	sha := branch.GetCommit().GetSHA()
	err = s.RequestRun(ctx, request.Run{
		InstallationID: inst.GetID(), Owner: owner, Repo: name, HeadSHA: sha, BaseSHA: sha, BaseRef: repo.GetDefaultBranch(),
		Tier: check.TierNightly, Trigger: "nightly", RequestedBy: "perfgate", DeliveryID: "nightly-" + s.now().UTC().Format("2006-01-02"),
	})
	if err != nil {
		// Nothing will run tonight: say so on a concluded check, quoting
		// a broken config's problems, rather than stay silent.
		c := request.Conclude{InstallationID: inst.GetID(), Owner: owner, Repo: name, HeadSHA: sha, Tier: check.TierNightly,
			Phase: check.Errored, Output: check.Output{Title: "Could not queue the nightly", Summary: "perfgate failed to record tonight's run: " + err.Error()}}
		var cerr *repoconfig.Error
		switch {
		case errors.As(err, &cerr):
			c.Phase = check.ConfigError
			c.Output = check.Output{Title: "Invalid " + cerr.Path, Summary: fmt.Sprintf("perfgate could not read `%s` on `%s`:\n\n- %s\n", cerr.Path, repo.GetDefaultBranch(), strings.Join(cerr.Problems, "\n- "))}
		case errors.Is(err, repoconfig.ErrNotConfigured):
			c.Phase = check.NotConfigured
			c.Output = check.Output{Title: "perfgate is not configured", Summary: fmt.Sprintf("The nightly is scheduled for %s, but it has no `%s` on `%s`: %s", fullName, repoconfig.Path, repo.GetDefaultBranch(), check.DocsURL)}
		}
		if xerr := s.Conclude(ctx, c); xerr != nil {
			err = errors.Join(err, xerr)
		}
		return fmt.Errorf("nightly %s@%s: %w", fullName, rev.Short(sha), err)
	}
	return s.nightlyLongRuns(ctx, inst.GetID(), owner, name, repo.GetDefaultBranch(), sha)
}

// nightlyLongRuns queues the long-run tiers the config marks nightly: a
// sweep of the branch head alone to its knee, a soak of it.
func (s *Service) nightlyLongRuns(ctx context.Context, installationID int64, owner, name, branch, sha string) error {
	cfg, err := s.configAt(ctx, nil, installationID, owner, name, "", branch, sha)
	if err != nil {
		return fmt.Errorf("nightly long runs of %s/%s: %w", owner, name, err)
	}
	var errs []error
	for _, lr := range []struct {
		tier check.Tier
		on   bool
	}{{check.TierCapacity, cfg.Capacity.On && cfg.Capacity.Nightly}, {check.TierSoak, cfg.Soak.On && cfg.Soak.Nightly}} {
		if !lr.on {
			continue
		}
		err := s.RequestRun(ctx, request.Run{
			InstallationID: installationID, Owner: owner, Repo: name, HeadSHA: sha, BaseSHA: sha, BaseRef: branch, Config: cfg,
			Tier: lr.tier, Trigger: "nightly", RequestedBy: "perfgate", DeliveryID: "nightly-" + s.now().UTC().Format("2006-01-02"),
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("nightly %s of %s/%s@%s: %w", lr.tier, owner, name, rev.Short(sha), err))
		}
	}
	return errors.Join(errs...)
}

// trendPoints are the nightly medians of the tier's gated and secondary
// metrics under key (the tier, or the tier and matrix cell), dated today:
// the trend points a judgement's step stores.
func (s *Service) trendPoints(cr store.CheckRun, key string, jobID int64, runs []*result.Result, tier config.Tier) []store.TrendPoint {
	day := s.now().UTC().Truncate(24 * time.Hour)
	var out []store.TrendPoint
	for _, name := range append(tier.GatedMetrics(), tier.SecondaryMetrics()...) {
		v, ok := gate.MedianOf(runs, name)
		if !ok {
			continue
		}
		out = append(out, store.TrendPoint{Repo: cr.Repo, Key: key, Metric: name, Date: day, Value: v, JobID: jobID})
	}
	return out
}

// ReleasePublished implements app.Releases: a release may promote the
// verified runs measured at its commit (the nightly or merge tier's) as the
// baseline version named by the tag — under the baseline rules, so a
// release that is slower than the current baseline is refused and audited,
// never promoted silently.
func (s *Service) ReleasePublished(ctx context.Context, r request.Release) error {
	repo := r.Owner + "/" + r.Repo
	measured, err := s.measuredForRelease(ctx, repo)
	if err != nil {
		return err
	}
	if !measured {
		// Nothing here could be promoted (a repository without
		// .github/perfgate.yml, say): no need to ask GitHub which commit
		// the release names, a question that can only fail the delivery.
		s.audit(ctx, r.By, "release.published", repo, 0, map[string]any{"tag": r.Tag, "target": r.TargetCommit, "promoted": false,
			"why": "perfgate has no verified nightly or merge runs in this repository"})
		return nil
	}
	if !isSHA(r.TargetCommit) {
		// target_commitish is usually a branch: the release is its head.
		client, err := s.clients.NewInstallationClient(r.InstallationID)
		if err != nil {
			return err
		}
		sha, _, err := client.Repositories.GetCommitSHA1(ctx, r.Owner, r.Repo, r.TargetCommit, "")
		if err != nil {
			return fmt.Errorf("resolve release target %q: %w", r.TargetCommit, err)
		}
		r.TargetCommit = sha
	}
	jobs, err := s.timing().ListJobs(ctx, store.JobFilter{Repo: repo, HeadSHA: r.TargetCommit, Status: jobstate.Succeeded})
	if err != nil {
		return err
	}
	// One baseline per key the gate judges by: a nightly matrix's cells
	// measure different loads and are promoted cell by cell, never pooled.
	byKey := map[string][]int64{}
	for _, j := range jobs {
		if j.Tier != string(check.TierNightly) && j.Tier != string(check.TierMerge) {
			continue
		}
		key := j.Tier
		if snap, err := snapshotOf(j); err == nil {
			key = cellKey(j.Tier, snap.Cell)
		}
		byKey[key] = append(byKey[key], j.ID)
	}
	if len(byKey) == 0 {
		s.audit(ctx, r.By, "release.published", repo, 0, map[string]any{"tag": r.Tag, "commit": r.TargetCommit, "promoted": false,
			"why": "no verified nightly or merge runs at the released commit; run the nightly tier there, then `perfgate baseline promote`"})
		return nil
	}
	for key, ids := range byKey {
		ev, err := s.runsOf(ctx, ids)
		if err != nil {
			return err
		}
		runs := ev.runs
		job, err := s.timing().GetJob(ctx, ids[len(ids)-1])
		if err != nil {
			return err
		}
		tier, err := tierOf(job)
		if err != nil {
			return err
		}
		meta := baseline.Meta{Repo: repo, Key: key, Version: r.Tag, Commit: r.TargetCommit, By: r.By, Reason: "release " + r.Tag}
		detail := map[string]any{"tag": r.Tag, "commit": r.TargetCommit, "tier": job.Tier, "key": key, "runs": len(runs), "promoted": true}
		if _, _, err := baseline.Promote(ctx, s.timing(), runs, meta, tier); err != nil {
			detail["promoted"], detail["why"] = false, err.Error()
		}
		s.audit(ctx, r.By, "release.published", repo, 0, detail)
	}
	return nil
}

// measuredForRelease reports whether repo has any verified run a release
// could promote (the nightly or merge tier's).
func (s *Service) measuredForRelease(ctx context.Context, repo string) (bool, error) {
	for _, tier := range []check.Tier{check.TierNightly, check.TierMerge} {
		jobs, err := s.timing().ListJobs(ctx, store.JobFilter{Repo: repo, Tier: string(tier), Status: jobstate.Succeeded, Limit: 1})
		if err != nil {
			return false, fmt.Errorf("verified %s runs of %s: %w", tier, repo, err)
		}
		if len(jobs) > 0 {
			return true, nil
		}
	}
	return false, nil
}

func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}
