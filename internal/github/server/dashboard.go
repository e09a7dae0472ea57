package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/palantir/go-githubapp/githubapp"

	"github.com/perfgate/perfgate/internal/github/drift"
	"github.com/perfgate/perfgate/internal/github/web"
	"github.com/perfgate/perfgate/internal/vocab/check"
)

// DashboardConfig is the `dashboard:` section of the server config.
type DashboardConfig struct {
	// SigningKey signs the links that open a private repository's pages
	// (PERFGATE_DASHBOARD_SIGNING_KEY). Empty: derived from the webhook
	// secret, so links stay valid across restarts without another secret.
	SigningKey string `yaml:"signing_key"`
	// LinkTTL is how long a signed link opens its repository (default 90 days).
	LinkTTL time.Duration `yaml:"link_ttl"`
}

// dashboardParts builds the dashboard and the change-point pass.
func (s *Server) dashboardParts(cfg Config, clients githubapp.ClientCreator, arts web.ArtifactFiles) (*web.Handler, *drift.Pass, error) {
	key := []byte(cfg.Dashboard.SigningKey)
	if len(key) == 0 {
		m := hmac.New(sha256.New, []byte(cfg.GitHub.App.WebhookSecret))
		m.Write([]byte("perfgate dashboard link signing key"))
		key = m.Sum(nil)
	}
	ttl := cfg.Dashboard.LinkTTL
	if ttl <= 0 {
		ttl = 90 * 24 * time.Hour
	}
	vis := githubVisibility{clients: clients}
	var signIn *web.SignIn
	if o := cfg.GitHub.OAuth; o.ClientID != "" && o.ClientSecret != "" {
		signIn = &web.SignIn{ClientID: o.ClientID, ClientSecret: o.ClientSecret, WebURL: cfg.GitHub.WebURL, APIURL: cfg.GitHub.V3APIURL}
	}
	h, err := web.New(web.Options{Store: s.st, Visibility: vis, Signer: web.NewSigner(key, ttl, s.now), PublicURL: cfg.PublicURL, Artifacts: arts, ArtifactKeep: cfg.Artifacts.Keep.Duration(), SignIn: signIn, Log: s.log, Now: s.now})
	if err != nil {
		return nil, nil, err
	}
	pass := drift.New(drift.Options{Store: s.st, Clients: clients, Links: h, Config: cfg.ChangePoints, Log: s.log, Now: s.now,
		InstallationOf: vis.installation, Regressed: s.bisects.fromChangePoint, Turns: s.st})
	return h, pass, nil
}

// detailsLink is each check run's "Details" link: its dashboard page,
// signed so it opens for a private repository too.
func (s *Server) detailsLink(repo, sha string, tier check.Tier) string {
	return s.web.CheckRunURL(repo, sha, string(tier))
}

// githubVisibility asks GitHub whether a repository is private, through
// the app's installation on it.
type githubVisibility struct{ clients githubapp.ClientCreator }

func (v githubVisibility) installation(ctx context.Context, repo string) (int64, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok {
		return 0, fmt.Errorf("repository %q: want owner/name", repo)
	}
	ac, err := v.clients.NewAppClient()
	if err != nil {
		return 0, err
	}
	inst, _, err := ac.Apps.FindRepositoryInstallation(ctx, owner, name)
	if err != nil {
		return 0, fmt.Errorf("find the app's installation on %s: %w", repo, err)
	}
	return inst.GetID(), nil
}

func (v githubVisibility) Public(ctx context.Context, repo string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	id, err := v.installation(ctx, repo)
	if err != nil {
		return false, err
	}
	c, err := v.clients.NewInstallationClient(id)
	if err != nil {
		return false, err
	}
	owner, name, _ := strings.Cut(repo, "/")
	r, _, err := c.Repositories.Get(ctx, owner, name)
	if err != nil {
		return false, fmt.Errorf("get %s: %w", repo, err)
	}
	return !r.GetPrivate(), nil
}
