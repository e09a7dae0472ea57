package dispatch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"
	"github.com/robfig/cron/v3"

	"github.com/perfgate/perfgate/internal/app"
	"github.com/perfgate/perfgate/internal/config"
	"github.com/perfgate/perfgate/internal/gate"
	"github.com/perfgate/perfgate/internal/result"
	"github.com/perfgate/perfgate/internal/store"
)

// ScheduleNightly runs the nightly tier on each repository's default
// branch on the cron schedule. robfig/cron parses standard five-field
// expressions; writing a parser by hand would be the riskier choice.
func (s *Service) ScheduleNightly(ctx context.Context, spec string, repos []string, clients githubapp.ClientCreator) (stop func(), err error) {
	c := cron.New()
	if _, err := c.AddFunc(spec, func() {
		for _, r := range repos {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			if err := s.Nightly(rctx, clients, r); err != nil {
				s.log.Error().Err(err).Str("repo", r).Msg("nightly run")
			}
			cancel()
		}
	}); err != nil {
		return nil, fmt.Errorf("nightly schedule %q: %w", spec, err)
	}
	c.Start()
	return func() { <-c.Stop().Done() }, nil
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
	id, err := s.checks.Queue(ctx, client, owner, name, app.TierNightly, sha, 0, app.Output{Title: "Queued", Summary: "Nightly matrix queued."})
	if err != nil {
		return err
	}
	return s.RequestRun(ctx, app.RunRequest{
		InstallationID: inst.GetID(), Owner: owner, Repo: name, HeadSHA: sha, BaseSHA: sha, BaseRef: repo.GetDefaultBranch(),
		Tier: app.TierNightly, CheckRunID: id, Trigger: "nightly", RequestedBy: "perfgate",
	})
}

// recordTrend stores the nightly medians of the tier's gated metrics.
func (s *Service) recordTrend(ctx context.Context, cr store.CheckRun, jobID int64, runs []*result.Result, tier config.Tier) {
	day := s.now().UTC().Truncate(24 * time.Hour)
	for _, name := range append(tier.GatedMetrics(), tier.SecondaryMetrics()...) {
		v, ok := gate.MedianOf(runs, name)
		if !ok {
			continue
		}
		if err := s.st.PutTrend(ctx, store.TrendPoint{Repo: cr.Repo, Key: cr.Tier, Metric: name, Date: day, Value: v, JobID: jobID}); err != nil {
			s.log.Error().Err(err).Str("metric", name).Msg("store trend point")
		}
	}
}

// ReleasePublished implements app.Releases. A release does not move a
// baseline by itself: promotion needs verified runs at the released commit,
// under the baseline rules, and the attempt is audited either way.
func (s *Service) ReleasePublished(ctx context.Context, r app.Release) error {
	repo := r.Owner + "/" + r.Repo
	jobs, err := s.st.ListJobs(ctx, store.JobFilter{Repo: repo, HeadSHA: r.TargetCommit, Status: store.StatusSucceeded})
	if err != nil {
		return err
	}
	detail := map[string]any{"tag": r.Tag, "commit": r.TargetCommit}
	if len(jobs) == 0 {
		detail["promoted"] = false
		detail["why"] = "no verified runs at the released commit; promote with `perfgate baseline promote` after a nightly run"
	}
	s.audit(ctx, r.By, "release.published", repo, 0, detail)
	return nil
}
