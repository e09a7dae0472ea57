package bisectjob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/analysis/bisect"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/request"
)

// Tier is the tier a bisect measures every commit with.
const Tier = "quick"

// DefaultMetric is what `/perf bisect` bisects: the time per output
// token, the decode latency a slower engine shows first, as each run's
// median, which one stalled stretch of a run does not move the way it
// moves a p90.
const DefaultMetric = "tpot_median"

// DefaultMaxCommits caps the range `/perf bisect` takes: with the default
// job budget (4·⌈log2 N⌉ + 8) that is at most 48 GPU jobs.
const DefaultMaxCommits = 1000

// ConfigFunc reads a repository's perfgate config at a ref: app's
// ContentsConfigLoader.Full (repoconfig.ErrNotConfigured for a repository
// without one, an error with ValidationErrors for a broken one).
type ConfigFunc func(ctx context.Context, client *github.Client, owner, repo, ref string) (*config.Config, error)

// Asker starts the bisects people ask for (app.Bisects): it resolves the
// two commits through GitHub, checks the repository's config on its
// default branch, lists the commits between with the compare API and
// starts the bisect on the Runner. Whatever the asker can fix is an
// *request.BisectRefusal saying how.
type Asker struct {
	Runner  *Runner
	Store   Store
	Clients Clients
	Configs ConfigFunc
	// MaxCommits caps the range (DefaultMaxCommits when 0); Metric is what
	// is bisected (DefaultMetric when empty).
	MaxCommits int
	Metric     string
}

// StartBisect implements app.Bisects.
func (a *Asker) StartBisect(ctx context.Context, r request.Bisect) (request.BisectStarted, error) {
	full := r.Owner + "/" + r.Repo
	client, err := a.Clients.NewInstallationClient(r.InstallationID)
	if err != nil {
		return request.BisectStarted{}, fmt.Errorf("installation client %d: %w", r.InstallationID, err)
	}
	// Every job is planned from the config at the default branch's head.
	def, cfgSHA, err := defaultHead(ctx, client, r.Owner, r.Repo)
	if err != nil {
		return request.BisectStarted{}, err
	}
	cfg, err := a.Configs(ctx, client, r.Owner, r.Repo, cfgSHA)
	var invalid interface{ ValidationErrors() []string }
	switch {
	case errors.Is(err, repoconfig.ErrNotConfigured):
		return request.BisectStarted{}, refuse("this repository has no `%s` on `%s`, so perfgate has no benchmark to measure the commits with. Add the file (an empty one uses the defaults) and ask again.", config.DefaultPath, def)
	case errors.As(err, &invalid):
		return request.BisectStarted{}, refuse("`%s` on `%s` is invalid (%v): fix it, then ask again.", config.DefaultPath, def, err)
	case err != nil:
		return request.BisectStarted{}, fmt.Errorf("config of %s at %s: %w", full, def, err)
	}
	if _, err := agentapi.PlanFromConfig(cfg, Tier); err != nil {
		return request.BisectStarted{}, refuse("`%s` on `%s` gives no %s tier to measure with (%v).", config.DefaultPath, def, Tier, err)
	}
	metric := a.Metric
	if metric == "" {
		metric = DefaultMetric
	}
	good, err := resolve(ctx, client, r.Owner, r.Repo, r.Good, "good")
	if err != nil {
		return request.BisectStarted{}, err
	}
	bad, err := resolve(ctx, client, r.Owner, r.Repo, r.Bad, "bad")
	if err != nil {
		return request.BisectStarted{}, err
	}
	if good == bad {
		return request.BisectStarted{}, refuse("`%s` and `%s` are the same commit `%.7s`: give a good commit before the bad one.", r.Good, r.Bad, good)
	}
	commits, err := bisect.GitHubLister{Client: client}.ListCommits(ctx, full, good, bad)
	if errors.Is(err, bisect.ErrRange) {
		return request.BisectStarted{}, &request.BisectRefusal{Reason: strings.TrimSuffix(err.Error(), ": "+bisect.ErrRange.Error()) + "."}
	}
	if err != nil {
		return request.BisectStarted{}, err
	}
	limit := a.MaxCommits
	if limit <= 0 {
		limit = DefaultMaxCommits
	}
	if n := len(commits) - 1; n > limit {
		return request.BisectStarted{}, refuse("there are %d commits after `%.7s` up to `%.7s`, more than the %d a bisect takes: narrow the range (a nightly or release known to be good nearer the bad commit) and ask again.", n, good, bad, limit)
	}
	unit := ""
	if m, ok := config.LookupMetric(metric); ok {
		unit = m.Unit
	}
	rec := store.BisectRecord{Repo: full, Metric: metric, RequestedBy: r.By, Number: r.Number, InstallationID: r.InstallationID}
	started, err := a.Runner.Start(ctx, rec, commits, bisect.Config{Metric: metric, Unit: unit, ConfigSHA: cfgSHA})
	if errors.Is(err, store.ErrConflict) {
		return a.running(ctx, rec, good, bad)
	}
	if errors.Is(err, ErrStopped) {
		// Its first job could not be planned: asking again would stop
		// again.
		return request.BisectStarted{}, refuse("the bisect stopped before its first job: %v.", err)
	}
	if err != nil {
		return request.BisectStarted{}, err
	}
	return startedOf(started)
}

// running answers a request for a range a bisect already runs: the same
// request again (a retried delivery) is that bisect; anyone else's is
// refused, saying where its result goes.
func (a *Asker) running(ctx context.Context, rec store.BisectRecord, good, bad string) (request.BisectStarted, error) {
	recs, err := a.Store.ListBisects(ctx, store.BisectFilter{Repo: rec.Repo, Status: store.BisectRunning})
	if err != nil {
		return request.BisectStarted{}, err
	}
	for _, b := range recs {
		if b.GoodSHA != good || b.BadSHA != bad || b.Metric != rec.Metric {
			continue
		}
		if b.RequestedBy == rec.RequestedBy && b.Number == rec.Number {
			return startedOf(b)
		}
		where := "its result stays in perfgate's store"
		if b.Number != 0 {
			where = fmt.Sprintf("its result will be posted on #%d", b.Number)
		}
		return request.BisectStarted{}, refuse("a bisect of `%.7s`..`%.7s` on `%s` is already running (bisect %d, asked by %s): %s.", good, bad, rec.Metric, b.ID, b.RequestedBy, where)
	}
	return request.BisectStarted{}, fmt.Errorf("bisect %.7s..%.7s of %s: conflict, but no running bisect of that range", good, bad, rec.Repo)
}

func startedOf(rec store.BisectRecord) (request.BisectStarted, error) {
	s, err := bisect.Load(rec.State)
	if err != nil {
		return request.BisectStarted{}, err
	}
	n := len(s.Commits) - 1
	return request.BisectStarted{ID: rec.ID, Good: rec.GoodSHA, Bad: rec.BadSHA, Metric: rec.Metric, Tier: Tier,
		Commits: n, Steps: bisect.Steps(n), MaxJobs: s.Config.MaxJobs}, nil
}

// defaultHead is the repository's default branch and the commit at its
// head: where a bisect's jobs read the config.
func defaultHead(ctx context.Context, client *github.Client, owner, repo string) (string, string, error) {
	gr, _, err := client.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return "", "", fmt.Errorf("default branch of %s/%s: %w", owner, repo, err)
	}
	def := gr.GetDefaultBranch()
	sha, _, err := client.Repositories.GetCommitSHA1(ctx, owner, repo, def, "")
	if err != nil {
		return "", "", fmt.Errorf("head of %s in %s/%s: %w", def, owner, repo, err)
	}
	return def, sha, nil
}

// resolve is the SHA GitHub says ref names; a ref it does not know is a
// refusal.
func resolve(ctx context.Context, client *github.Client, owner, repo, ref, end string) (string, error) {
	sha, resp, err := client.Repositories.GetCommitSHA1(ctx, owner, repo, ref, "")
	if resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusUnprocessableEntity) {
		return "", refuse("GitHub knows no commit, branch or tag `%s` (the %s end) in %s/%s: check the name and that it is pushed.", ref, end, owner, repo)
	}
	if err != nil {
		return "", fmt.Errorf("resolve %s in %s/%s: %w", ref, owner, repo, err)
	}
	return sha, nil
}

func refuse(format string, args ...any) error {
	return &request.BisectRefusal{Reason: fmt.Sprintf(format, args...)}
}

// StartFromChangePoint starts the bisect of a regression change point the
// nightly pass found on the default branch (its last good and first bad
// commit), once per range: a range any bisect has covered, whoever asked,
// is not bisected again. It reports to the change point's issue. It
// returns whether it started one.
func (a *Asker) StartFromChangePoint(ctx context.Context, cp store.ChangePointRecord) (bool, error) {
	if !cp.Regression || cp.GoodSHA == "" || cp.BadSHA == "" || cp.GoodSHA == cp.BadSHA {
		return false, nil
	}
	prev, err := a.Store.ListBisects(ctx, store.BisectFilter{Repo: cp.Repo})
	if err != nil {
		return false, err
	}
	for _, b := range prev {
		if b.ChangePointID == cp.ID || (b.GoodSHA == cp.GoodSHA && b.BadSHA == cp.BadSHA) {
			return false, nil
		}
	}
	var inst int64
	for _, id := range []int64{cp.BadJobID, cp.GoodJobID} {
		if id == 0 {
			continue
		}
		if j, err := a.Store.GetJob(ctx, id); err == nil && j.InstallationID != 0 {
			inst = j.InstallationID
			break
		}
	}
	if inst == 0 {
		return false, fmt.Errorf("bisect change point %d: no installation of the app on %s is known from its jobs", cp.ID, cp.Repo)
	}
	client, err := a.Clients.NewInstallationClient(inst)
	if err != nil {
		return false, fmt.Errorf("installation client %d: %w", inst, err)
	}
	commits, err := bisect.GitHubLister{Client: client}.ListCommits(ctx, cp.Repo, cp.GoodSHA, cp.BadSHA)
	if err != nil {
		return false, fmt.Errorf("bisect change point %d: %w", cp.ID, err)
	}
	owner, name, _ := strings.Cut(cp.Repo, "/")
	_, cfgSHA, err := defaultHead(ctx, client, owner, name)
	if err != nil {
		return false, err
	}
	limit := a.MaxCommits
	if limit <= 0 {
		limit = DefaultMaxCommits
	}
	if n := len(commits) - 1; n > limit {
		return false, fmt.Errorf("bisect change point %d: %d commits between its nights, more than %d: %w", cp.ID, n, limit, bisect.ErrRange)
	}
	metric := quickMetric(cp.Metric)
	unit := ""
	if m, ok := config.LookupMetric(metric); ok {
		unit = m.Unit
	}
	rec := store.BisectRecord{Repo: cp.Repo, Metric: metric, RequestedBy: "changepoint", Number: cp.IssueNumber, ChangePointID: cp.ID, InstallationID: inst}
	_, err = a.Runner.Start(ctx, rec, commits, bisect.Config{Metric: metric, Unit: unit, ConfigSHA: cfgSHA})
	if errors.Is(err, store.ErrConflict) {
		return false, nil // someone bisects the range already
	}
	return err == nil, err
}

// quickMetric is what a bisect on the quick tier measures for a change in
// metric: the metric itself, except a tail percentile above p90, which 100
// requests a run cannot carry, becomes the same series' median.
func quickMetric(metric string) string {
	m, ok := config.LookupMetric(metric)
	if !ok || m.Series == "" || m.Percentile <= 90 {
		return metric
	}
	return m.Series + "_median"
}
