// Package drift watches the default branch: a pass, run nightly by the
// server, reads every stored series, has internal/analysis/drift find its
// change points and match them to the records of earlier passes, stores
// one record per change point (with the last good and first bad commit,
// which is where a bisect starts), and for each regression event (one
// step, however many series it moved) opens — or, when the numbers move,
// updates — one GitHub issue naming the commit range, the magnitudes and
// the dashboard links, and optionally posts to a Slack-compatible
// incoming webhook. This package is the pass's edges: the store, GitHub,
// Slack and the schedule; what to say and when is the analysis's. Every
// step is idempotent across restarts: a record is matched to an earlier
// one of the same series near the same day, and an issue is found by the
// marker in its body before a new one is opened.
package drift

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/changepoint"
	"github.com/perfgate/perfgate/internal/analysis/drift"
	"github.com/perfgate/perfgate/internal/store"
)

// Store is what the pass reads and writes.
type Store interface {
	ListAllSeries(ctx context.Context) ([]store.SeriesInfo, error)
	SeriesPoints(ctx context.Context, repo, key, metric string, since time.Time) ([]store.SeriesPoint, error)
	ListChangePoints(ctx context.Context, f store.ChangePointFilter) ([]store.ChangePointRecord, error)
	PutChangePoint(ctx context.Context, c store.ChangePointRecord) (store.ChangePointRecord, error)
	GetJob(ctx context.Context, jobID int64) (store.Job, error)
}

// Clients gives installation clients (githubapp.ClientCreator has it).
type Clients interface {
	NewInstallationClient(installationID int64) (*github.Client, error)
}

// Links makes dashboard links (web.Handler has them).
type Links interface {
	SeriesURL(repo, key, metric string) string
}

// Config is the server configuration of the pass (`changepoints:`).
type Config struct {
	// Cron runs the pass ("30 5 * * *"); empty: daily at 05:30 server time.
	Cron string `yaml:"cron"`
	// Disabled turns the pass off.
	Disabled bool `yaml:"disabled"`
	// Window, MaxPValue and MinMagnitude tune the detector (defaults 30,
	// 0.001, 3%).
	Window       int     `yaml:"window"`
	MaxPValue    float64 `yaml:"max_p_value"`
	MinMagnitude float64 `yaml:"min_magnitude"`
	// Issues opens a GitHub issue per regression change point (default on;
	// the app needs issues: write).
	Issues *bool `yaml:"issues"`
	// Slack maps an organisation ("acme") or a repository ("acme/llm") to a
	// Slack-compatible incoming-webhook URL; the repository's entry wins.
	Slack map[string]string `yaml:"slack"`
}

// Options build a Pass.
type Options struct {
	Store   Store
	Clients Clients
	Links   Links
	Config  Config
	// HTTP posts Slack messages (default: a client with a 10 s timeout).
	HTTP *http.Client
	// InstallationOf finds a repository's installation when its jobs do
	// not say (optional).
	InstallationOf func(ctx context.Context, repo string) (int64, error)
	// Regressed, when set, is called with every regression change point
	// the pass keeps, after its issue is opened or updated (the server
	// starts its bisect there, once); optional.
	Regressed func(ctx context.Context, rec store.ChangePointRecord) error
	// Turns, when set, lets one replica of several run each scheduled
	// pass (RunTurn); optional.
	Turns Turns
	Log   zerolog.Logger
	Now   func() time.Time
}

// Pass is the nightly change-point pass.
type Pass struct {
	o    Options
	opts changepoint.Options
}

// IssueLabel is the label on every change-point issue; the pass finds its
// own issues by it and the marker in their body.
const IssueLabel = "perfgate"

// New builds a Pass.
func New(o Options) *Pass {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	c := o.Config
	if c.MinMagnitude == 0 {
		c.MinMagnitude = 0.03
	}
	return &Pass{o: o, opts: changepoint.Options{Window: c.Window, MaxPValue: c.MaxPValue, MinMagnitude: c.MinMagnitude}}
}

// Summary is what one pass did.
type Summary struct {
	Series, Found, New, Updated, Gone, IssuesOpened, IssuesUpdated, SlackSent int
	// Events are the regressions alerted on (open issues), each grouping
	// the change points of one step across metrics and cells.
	Events int
	// Pending counts change points not yet confirmed by a second night.
	Pending int
	// Riding counts regression change points of noisy metrics that no
	// steady metric's change point leads: kept, shown, not alerted.
	Riding int
	// Retracted counts issues closed because their change points went.
	Retracted int
	Errors    []string
}

// run is one pass's bookkeeping: which records it stored as moved or
// found gone, so an issue is edited only when what it says changed.
type run struct {
	sum     *Summary
	touched map[int64]bool
	repos   map[string]bool
}

// Run analyses every series once, then alerts per repository: one event
// per step, one issue and one Slack message for it. A failing series or
// GitHub call is logged and listed; the pass goes on with the others.
func (p *Pass) Run(ctx context.Context) (Summary, error) {
	var sum Summary
	all, err := p.o.Store.ListAllSeries(ctx)
	if err != nil {
		return sum, fmt.Errorf("change-point pass: %w", err)
	}
	r := &run{sum: &sum, touched: map[int64]bool{}, repos: map[string]bool{}}
	var repos []string
	for _, si := range all {
		sum.Series++
		if !r.repos[si.Repo] {
			r.repos[si.Repo] = true
			repos = append(repos, si.Repo)
		}
		if err := p.series(ctx, si, r); err != nil {
			msg := fmt.Sprintf("%s %s %s: %v", si.Repo, si.Key, si.Metric, err)
			sum.Errors = append(sum.Errors, msg)
			p.o.Log.Error().Err(err).Str("repo", si.Repo).Str("key", si.Key).Str("metric", si.Metric).Msg("change-point pass")
		}
	}
	for _, repo := range repos {
		if err := p.alerts(ctx, repo, r); err != nil {
			sum.Errors = append(sum.Errors, fmt.Sprintf("%s: %v", repo, err))
			p.o.Log.Error().Err(err).Str("repo", repo).Msg("change-point alerts")
		}
	}
	p.o.Log.Info().Int("series", sum.Series).Int("change_points", sum.Found).Int("new", sum.New).Int("pending", sum.Pending).
		Int("events", sum.Events).Int("riding", sum.Riding).Int("issues_opened", sum.IssuesOpened).Int("issues_updated", sum.IssuesUpdated).
		Int("retracted", sum.Retracted).Int("slack", sum.SlackSent).Int("errors", len(sum.Errors)).Msg("change-point pass done")
	return sum, nil
}

func (p *Pass) series(ctx context.Context, si store.SeriesInfo, r *run) error {
	pts, err := p.o.Store.SeriesPoints(ctx, si.Repo, si.Key, si.Metric, time.Time{})
	if err != nil {
		return err
	}
	existing, err := p.o.Store.ListChangePoints(ctx, store.ChangePointFilter{Repo: si.Repo, Key: si.Key, Metric: si.Metric})
	if err != nil {
		return err
	}
	nights := make([]drift.Night, len(pts))
	for i, pt := range pts {
		nights[i] = drift.Night{Date: pt.Date, Value: pt.Value, SHA: pt.HeadSHA, JobID: pt.JobID}
	}
	out := drift.Reconcile(drift.Series{Repo: si.Repo, Key: si.Key, Metric: si.Metric}, nights, changePoints(existing), p.opts)
	r.sum.Found += out.Found
	r.sum.New += out.New
	r.sum.Updated += out.Updated
	r.sum.Pending += out.Pending
	var errs []error
	for _, c := range out.Put {
		stored, err := p.o.Store.PutChangePoint(ctx, store.ChangePointRecord(c))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.touched[stored.ID] = true
	}
	for _, c := range out.Gone {
		if _, err := p.o.Store.PutChangePoint(ctx, store.ChangePointRecord(c)); err != nil {
			errs = append(errs, err)
			continue
		}
		r.touched[c.ID] = true
		r.sum.Gone++
	}
	return errors.Join(errs...)
}

// changePoints converts stored records for the analysis (the two types
// have the same fields; see drift.ChangePoint).
func changePoints(recs []store.ChangePointRecord) []drift.ChangePoint {
	out := make([]drift.ChangePoint, len(recs))
	for i, r := range recs {
		out[i] = drift.ChangePoint(r)
	}
	return out
}

// Effect is drift.Effect of a stored record: its change in units of its
// series' noise (the dashboard orders change points by it).
func Effect(c store.ChangePointRecord) float64 { return drift.Effect(drift.ChangePoint(c)) }

// Leads is drift.Leads of a stored record: whether it may open an issue
// on its own.
func Leads(c store.ChangePointRecord) bool { return drift.Leads(drift.ChangePoint(c)) }
