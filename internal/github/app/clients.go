package app

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
)

// clients is perfgate's GitHub client factory. Installation clients are
// cached per installation, and each holds its installation token through
// ghinstallation, which renews a token only when the local clock says it
// is near expiry. A token GitHub has revoked (the app was reinstalled, its
// key rotated, the clock is off) would then fail every call with 401 for up
// to an hour: so a 401 drops the token and the call is retried once with a
// new one. The app-level clients (JWT) come from go-githubapp.
type clients struct {
	githubapp.ClientCreator // app clients, token clients
	apps                    *ghinstallation.AppsTransport
	v3                      string
	wrap                    func(http.RoundTripper) http.RoundTripper // retries 5xx, rate limits
	timeout                 time.Duration

	mu     sync.Mutex
	cached map[int64]*github.Client
}

// NewClientCreator is the client factory the app uses: installation
// clients that renew a revoked token, wrapped in the retry policy.
func NewClientCreator(cfg githubapp.Config, timeout time.Duration, retry RetryPolicy) (githubapp.ClientCreator, error) {
	if retry.MaxAttempts == 0 {
		retry = DefaultRetryPolicy()
	}
	return newClients(cfg, timeout, RetryMiddleware(retry), nil)
}

// newClients builds the factory: wrap wraps each installation client's
// transport (retries, middleware); tokens, when set, wraps the transport
// that fetches installation tokens, so the middleware sees those POSTs too.
func newClients(cfg githubapp.Config, timeout time.Duration, wrap, tokens func(http.RoundTripper) http.RoundTripper) (*clients, error) {
	base := githubapp.NewClientCreator(cfg.V3APIURL, cfg.V4APIURL, cfg.App.IntegrationID, []byte(cfg.App.PrivateKey),
		githubapp.WithClientUserAgent("perfgate"),
		githubapp.WithClientTimeout(timeout),
		githubapp.WithClientMiddleware(wrap),
	)
	tokenTransport := http.DefaultTransport
	if tokens != nil {
		tokenTransport = tokens(tokenTransport)
	}
	apps, err := ghinstallation.NewAppsTransport(tokenTransport, cfg.App.IntegrationID, []byte(cfg.App.PrivateKey))
	if err != nil {
		return nil, fmt.Errorf("github app key: %w", err)
	}
	v3 := strings.TrimSuffix(cfg.V3APIURL, "/")
	apps.BaseURL = v3
	return &clients{ClientCreator: base, apps: apps, v3: v3 + "/", wrap: wrap, timeout: timeout, cached: map[int64]*github.Client{}}, nil
}

// NewInstallationClient returns the installation's cached client.
func (c *clients) NewInstallationClient(installationID int64) (*github.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.cached[installationID]; ok {
		return cl, nil
	}
	rt := &tokenTransport{newToken: func() http.RoundTripper {
		itr := ghinstallation.NewFromAppsTransport(c.apps, installationID)
		itr.BaseURL = strings.TrimSuffix(c.v3, "/")
		return itr
	}}
	rt.current = rt.newToken()
	cl := github.NewClient(&http.Client{Transport: c.wrap(rt), Timeout: c.timeout})
	u, err := url.Parse(c.v3)
	if err != nil {
		return nil, fmt.Errorf("github v3 URL %q: %w", c.v3, err)
	}
	cl.BaseURL = u
	cl.UserAgent = fmt.Sprintf("perfgate (installation: %d)", installationID)
	c.cached[installationID] = cl
	return cl, nil
}

// tokenTransport authenticates with an installation token and, when GitHub
// answers 401, replaces the token source and tries the request once more.
type tokenTransport struct {
	newToken func() http.RoundTripper

	mu      sync.Mutex
	current http.RoundTripper
}

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	used := t.current
	t.mu.Unlock()
	// Keep the body for the second try (go-github bodies are in memory).
	var body []byte
	replayable := true
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			replayable = false
		} else {
			rc, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			body, err = io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	resp, err := used.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !replayable {
		return resp, err
	}
	drain(resp)
	t.mu.Lock()
	if t.current == used { // another request may have renewed it already
		t.current = t.newToken()
	}
	fresh := t.current
	t.mu.Unlock()
	retry := req.Clone(req.Context())
	if body != nil {
		retry.Body = io.NopCloser(bytes.NewReader(body))
	}
	return fresh.RoundTrip(retry)
}
