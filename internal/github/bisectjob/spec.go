package bisectjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// QuickTier builds a bisect's jobs (a SpecFunc): the quick tier of the
// repository's config on its default branch as it was when the bisect
// started (bisect.Config.ConfigSHA), measuring the requested commit
// interleaved with its reference (ABBA, the requested pairs): the bisect
// never compares runs of different jobs. The first job goes to any runner the config's labels
// allow; every later one is pinned to the card the job before it ran on,
// so the whole bisect is measured on one GPU.
type QuickTier struct {
	Store   Store
	Clients Clients
	Configs ConfigFunc
}

// Spec implements SpecFunc. A config that no longer gives the tier is a
// permanent error (the bisect stops, saying why); GitHub's failures are
// not.
func (q QuickTier) Spec(ctx context.Context, rec store.BisectRecord, req bisect.Request) (store.JobSpec, error) {
	owner, name, ok := strings.Cut(rec.Repo, "/")
	if !ok {
		return store.JobSpec{}, backoff.Permanent(fmt.Errorf("repository %q is not owner/name", rec.Repo))
	}
	client, err := q.Clients.NewInstallationClient(rec.InstallationID)
	if err != nil {
		return store.JobSpec{}, fmt.Errorf("installation client %d: %w", rec.InstallationID, err)
	}
	def, err := configRef(ctx, client, owner, name, rec)
	if err != nil {
		return store.JobSpec{}, err
	}
	cfg, err := q.Configs(ctx, client, owner, name, def)
	var invalid interface{ ValidationErrors() []string }
	if errors.Is(err, repoconfig.ErrNotConfigured) || errors.As(err, &invalid) {
		return store.JobSpec{}, backoff.Permanent(fmt.Errorf("the config on %s: %w", def, err))
	}
	if err != nil {
		return store.JobSpec{}, fmt.Errorf("config of %s at %s: %w", rec.Repo, def, err)
	}
	plan, err := agentapi.PlanAt(cfg, Tier, agentapi.Commits{Repo: rec.Repo, Head: req.SHA, Base: req.RefSHA,
		Interleave: &agentapi.Interleave{Pairs: min(req.Pairs, agentapi.MaxPairs), Order: agentapi.OrderABBA}})
	if err != nil {
		return store.JobSpec{}, backoff.Permanent(fmt.Errorf("plan the %s tier: %w", Tier, err))
	}
	card, err := q.card(ctx, rec)
	if err != nil {
		return store.JobSpec{}, err
	}
	if card != "" {
		plan.GPUUUID = card
	}
	snap, err := json.Marshal(plan)
	if err != nil {
		return store.JobSpec{}, fmt.Errorf("encode plan: %w", err)
	}
	// No PR number: a bisect's jobs belong to no pull request, so a push
	// to the PR it was asked on does not cancel them.
	return store.JobSpec{Tier: Tier, Config: snap, Labels: cfg.Runner.Labels, GPUUUID: plan.GPUUUID, BaseSHA: req.RefSHA}, nil
}

// configRef is where the bisect's jobs read the config: the commit the
// bisect pinned when it started, else the default branch.
func configRef(ctx context.Context, client *github.Client, owner, name string, rec store.BisectRecord) (string, error) {
	if s, err := bisect.Load(rec.State); err == nil && s.Config.ConfigSHA != "" {
		return s.Config.ConfigSHA, nil
	}
	gr, _, err := client.Repositories.Get(ctx, owner, name)
	if err != nil {
		return "", fmt.Errorf("default branch of %s: %w", rec.Repo, err)
	}
	return gr.GetDefaultBranch(), nil
}

// card is the GPU the bisect's previous job ran on: its pin, or the card
// its measured runs report; "" before the first job.
func (q QuickTier) card(ctx context.Context, rec store.BisectRecord) (string, error) {
	if rec.JobID == 0 {
		return "", nil
	}
	job, err := q.Store.GetJob(ctx, rec.JobID)
	if err != nil {
		return "", fmt.Errorf("bisect %d's previous job: %w", rec.ID, err)
	}
	if job.GPUUUID != "" {
		return job.GPUUUID, nil
	}
	res, err := q.Store.ListResults(ctx, job.ID)
	if err != nil {
		return "", fmt.Errorf("bisect %d's previous job's results: %w", rec.ID, err)
	}
	for _, r := range res {
		if r.Kind == jobstate.KindMeasured && r.GPUUUID != "" {
			return r.GPUUUID, nil
		}
	}
	return "", nil
}
