// Package tarball fetches a commit's source tarball from GitHub with the
// app's installation token, for the agent API to stream to runners (who
// hold no GitHub credential).
package tarball

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// Installations makes a GitHub client authenticated as an installation
// (go-githubapp's ClientCreator is one).
type Installations interface {
	NewInstallationClient(installationID int64) (*github.Client, error)
}

// GitHub fetches commit tarballs with the app's installation token: the
// API answers GET /repos/{owner}/{repo}/tarball/{sha} with a redirect to
// a short-lived download URL that carries its own token, so the download
// itself goes out without the installation's.
type GitHub struct {
	clients  Installations
	download *http.Client
}

// NewGitHub returns a fetcher over the app's installation clients.
func NewGitHub(clients Installations) *GitHub {
	return &GitHub{clients: clients, download: &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			ResponseHeaderTimeout: time.Minute,
			IdleConnTimeout:       90 * time.Second,
		},
	}}
}

// Tarball streams the gzip tarball of repo ("owner/name") at sha. The
// caller closes it. A commit GitHub does not have is ErrNotFound.
func (g *GitHub) Tarball(ctx context.Context, installationID int64, repo, sha string) (io.ReadCloser, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" {
		return nil, fmt.Errorf("tarball: repository %q is not owner/name", repo)
	}
	client, err := g.clients.NewInstallationClient(installationID)
	if err != nil {
		return nil, fmt.Errorf("tarball %s@%s: installation client %d: %w", repo, sha, installationID, err)
	}
	link, resp, err := client.Repositories.GetArchiveLink(ctx, owner, name, github.Tarball, &github.RepositoryContentGetOptions{Ref: sha}, 0)
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusUnprocessableEntity) {
			return nil, fmt.Errorf("tarball %s@%s: %w (GitHub answered %d)", repo, sha, ErrNotFound, resp.StatusCode)
		}
		return nil, fmt.Errorf("tarball %s@%s: %w", repo, sha, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("tarball %s@%s: %w", repo, sha, err)
	}
	dl, err := g.download.Do(req)
	if err != nil {
		return nil, fmt.Errorf("tarball %s@%s: download: %w", repo, sha, err)
	}
	if dl.StatusCode != http.StatusOK {
		dl.Body.Close()
		err := fmt.Errorf("download answered %s", dl.Status)
		if dl.StatusCode == http.StatusNotFound {
			err = errors.Join(ErrNotFound, err)
		}
		return nil, fmt.Errorf("tarball %s@%s: %w", repo, sha, err)
	}
	return dl.Body, nil
}

// ErrNotFound: GitHub does not have the commit (the agent API answers 404).
var ErrNotFound = errors.New("commit not found")
