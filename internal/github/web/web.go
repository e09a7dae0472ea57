// Package web is perfgate's dashboard, served by `perfgate serve`: the
// repositories, their benchmarks (tier × matrix cell) and each metric as
// a time series on the default branch with its baseline levels,
// regressions, change points and releases; a weekly view; a page per
// check run (what its "Details" link opens); and a read API in JSON and
// CSV. Pages are Go templates; the charts are uPlot, vendored into the
// binary with its licence (static/uplot), so nothing loads from a CDN.
//
// Who may look: a public repository's pages are open to anyone; a
// private one's open through a link the server signed with an expiry
// (see Signer), which every link perfgate posts on GitHub carries.
package web

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the dashboard reads.
type Store interface {
	ListRepos(ctx context.Context) ([]string, error)
	ListSeries(ctx context.Context, repo string) ([]store.SeriesInfo, error)
	SeriesPoints(ctx context.Context, repo, key, metric string, since time.Time) ([]store.SeriesPoint, error)
	RecentPoints(ctx context.Context, repo string, since time.Time) ([]store.TrendPoint, error)
	RepoCheckRuns(ctx context.Context, f store.CheckRunFilter) ([]store.CheckRun, error)
	AuditByAction(ctx context.Context, repo, action string) ([]store.AuditEntry, error)
	ListChangePoints(ctx context.Context, f store.ChangePointFilter) ([]store.ChangePointRecord, error)
	GetCheckRun(ctx context.Context, repo, headSHA, tier string) (store.CheckRun, error)
	GetJob(ctx context.Context, jobID int64) (store.Job, error)
	ListResults(ctx context.Context, jobID int64) ([]store.Result, error)
	ReadLog(ctx context.Context, jobID int64, attempt int) ([]byte, error)
	ListAppeals(ctx context.Context, repo string, pr int) ([]store.Appeal, error)
	ListAudit(ctx context.Context, repo string, pr int) ([]store.AuditEntry, error)
	BaselineHistory(ctx context.Context, repo, key string) ([]store.Baseline, error)
	Usage(ctx context.Context, f store.UsageFilter) ([]fleet.UsageRow, error)
	ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error)
	GetArtifact(ctx context.Context, id int64) (store.Artifact, error)
	ListArtifacts(ctx context.Context, jobID int64) ([]store.Artifact, error)
	// Sign-in sessions (sessions.go).
	store.Sessions
}

// Options configure the dashboard.
type Options struct {
	Store Store
	// Visibility says which repositories are public; nil makes every
	// repository private (signed links only).
	Visibility Visibility
	// Signer signs and checks links to private repositories; required.
	Signer *Signer
	// PublicURL is where people reach the server ("https://perfgate.example.com");
	// links posted to GitHub are absolute under it.
	PublicURL string
	// Artifacts serves the profile traces runners uploaded; nil: none.
	Artifacts ArtifactFiles
	// ArtifactKeep is how long the server keeps artifacts before its
	// retention sweep deletes them (artifacts.keep), said when a link
	// finds none; 0: kept forever.
	ArtifactKeep time.Duration
	// SignIn is the app's OAuth client, with which people sign in with
	// GitHub and see the private repositories GitHub lets them read; nil:
	// no sign-in, private pages open through signed links only.
	SignIn *SignIn
	Log    zerolog.Logger
	Now    func() time.Time
}

// Handler serves the dashboard and its API.
type Handler struct {
	st        Store
	vis       Visibility
	signer    *Signer
	publicURL string
	log       zerolog.Logger
	now       func() time.Time
	mux       *http.ServeMux
	pages     map[string]*template.Template
	levels    baselineCache
	artifacts ArtifactFiles
	artKeep   time.Duration
	signIn    *SignIn
	sessions  *sessions
}

// New builds the dashboard.
func New(o Options) (*Handler, error) {
	if o.Store == nil || o.Signer == nil {
		return nil, fmt.Errorf("web: a store and a link signer are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	vis := o.Visibility
	if vis == nil {
		vis = StaticVisibility{}
	}
	h := &Handler{
		st: o.Store, signer: o.Signer, publicURL: strings.TrimSuffix(o.PublicURL, "/"), log: o.Log, now: o.Now,
		vis:       &cachedVisibility{next: vis, ttl: 5 * time.Minute, now: o.Now, m: map[string]visEntry{}},
		levels:    baselineCache{m: map[int64]map[string]float64{}},
		artifacts: o.Artifacts, artKeep: o.ArtifactKeep,
		signIn: o.SignIn,
	}
	if s := o.SignIn; s != nil && (s.ClientID == "" || s.ClientSecret == "" || s.WebURL == "" || s.APIURL == "") {
		return nil, fmt.Errorf("web: sign-in needs the OAuth client's id and secret and GitHub's web and API addresses")
	}
	if o.SignIn != nil {
		ss, err := newSessions(o.Store, o.Signer.key, o.Log)
		if err != nil {
			return nil, err
		}
		h.sessions = ss
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("web: static files: %w", err)
	}
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", cacheFor(http.FileServerFS(static), time.Hour)))
	m.HandleFunc("GET /{$}", h.index)
	if o.SignIn != nil {
		m.HandleFunc("GET /login", h.login)
		m.HandleFunc("GET /oauth/callback", h.callback)
		m.HandleFunc("POST /logout", h.logout)
	}
	m.HandleFunc("GET /r/{owner}/{name}", h.repo(h.repoPage))
	m.HandleFunc("GET /r/{owner}/{name}/series", h.repo(h.seriesPage))
	m.HandleFunc("GET /r/{owner}/{name}/checks/{sha}/{tier}", h.repo(h.checkRunPage))
	m.HandleFunc("GET /r/{owner}/{name}/jobs/{id}/log", h.repo(h.jobLog))
	m.HandleFunc("GET /r/{owner}/{name}/artifacts/{id}/{file}", h.repo(h.artifact))
	m.HandleFunc("GET /api/data/repos", h.apiRepos)
	m.HandleFunc("GET /api/data/repos/{owner}/{name}/series", h.repo(h.apiSeriesList))
	m.HandleFunc("GET /api/data/repos/{owner}/{name}/series/points", h.repo(h.apiSeriesPoints))
	m.HandleFunc("GET /api/data/repos/{owner}/{name}/checks", h.repo(h.apiCheckRuns))
	m.HandleFunc("GET /api/data/repos/{owner}/{name}/checks/{sha}/{tier}", h.repo(h.apiCheckRun))
	m.HandleFunc("GET /api/data/repos/{owner}/{name}/jobs/{id}/runs", h.repo(h.apiRuns))
	m.HandleFunc("GET /api/data/repos/{owner}/{name}/changepoints", h.repo(h.apiChangePoints))
	m.HandleFunc("GET /api/data/repos/{owner}/{name}/usage", h.repo(h.apiUsage))
	h.mux = m
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	noReferrer(w)
	h.mux.ServeHTTP(w, h.withSession(w, r))
}

// CheckRunURL is the absolute, signed link to a check run's page: the
// check run's "Details" link.
func (h *Handler) CheckRunURL(repo, sha, tier string) string {
	return h.signer.Sign(repo, h.publicURL+checkRunPath(repo, sha, tier))
}

// SeriesURL is the absolute, signed link to one series.
func (h *Handler) SeriesURL(repo, key, metric string) string {
	return h.signer.Sign(repo, h.publicURL+seriesPath(repo, key, metric, ""))
}

// RepoURL is the absolute, signed link to a repository's dashboard.
func (h *Handler) RepoURL(repo string) string {
	return h.signer.Sign(repo, h.publicURL+"/r/"+repo)
}

func checkRunPath(repo, sha, tier string) string {
	return "/r/" + repo + "/checks/" + url.PathEscape(sha) + "/" + url.PathEscape(tier)
}

func seriesPath(repo, key, metric, view string) string {
	q := url.Values{"key": {key}, "metric": {metric}}
	if view != "" {
		q.Set("view", view)
	}
	return "/r/" + repo + "/series?" + q.Encode()
}

// repoHandler serves one repository's page once access is checked.
type repoHandler func(w http.ResponseWriter, r *http.Request, repo string)

func (h *Handler) repo(next repoHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		repo := r.PathValue("owner") + "/" + r.PathValue("name")
		if !h.allowed(w, r, repo) {
			// The same answer as for a repository that does not exist, so
			// a private repository's name is not confirmed to strangers.
			msg := fmt.Sprintf("No dashboard for %s, or it is private. Open it through a link perfgate posted (a check run's Details link, a change-point issue), which carries a signed grant", repo)
			if h.signIn != nil {
				msg += ", or sign in with GitHub as someone who may read the repository"
			}
			h.fail(w, r, http.StatusNotFound, msg+".")
			return
		}
		next(w, r, repo)
	}
}

func cacheFor(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(d.Seconds())))
		next.ServeHTTP(w, r)
	})
}

// fail answers an error as a page or, under /api/, as JSON.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	w.WriteHeader(code)
	h.render(w, r, "error", map[string]any{"Title": http.StatusText(code), "Message": msg})
}

// internal logs err and answers 500 with what to do.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error().Err(err).Str("path", r.URL.Path).Msg("dashboard")
	h.fail(w, r, http.StatusInternalServerError, "perfgate could not read its store: "+err.Error()+". Check the server's log and its database connection, then reload.")
}

// baselineCache keeps each baseline version's medians per metric:
// baselines never change once stored, and decoding their runs is the
// costly part of a series page.
type baselineCache struct {
	mu sync.Mutex
	m  map[int64]map[string]float64
}
