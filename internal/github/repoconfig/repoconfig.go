// Package repoconfig reads a repository's .github/perfgate.yml through
// GitHub's contents API and parses it with internal/vocab/config, so the GitHub
// handlers, the dispatcher and the bisect read one file one way.
package repoconfig

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// Path is where a repository keeps its perfgate configuration.
const Path = config.DefaultPath

// Loader reads Path through the contents API and parses
// it with the gate's configuration (internal/vocab/config), so the handlers and
// the dispatcher read one file one way.
type Loader struct{}

// Full returns the parsed config at ref. A missing file is
// ErrNotConfigured; an invalid one comes back as a *Error quoting
// every problem with its line, which the handlers turn into a failing
// check.
func (Loader) Full(ctx context.Context, client *github.Client, owner, repo, ref string) (*config.Config, error) {
	fc, _, resp, err := client.Repositories.GetContents(ctx, owner, repo, Path, &github.RepositoryContentGetOptions{Ref: ref})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil, ErrNotConfigured
	}
	if err != nil {
		return nil, fmt.Errorf("fetch %s at %s: %w", Path, ref, err)
	}
	if fc == nil {
		return nil, &Error{Path: Path, Problems: []string{"is a directory, want a file"}}
	}
	body, err := fc.GetContent()
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", Path, err)
	}
	cfg, err := config.Parse(Path, []byte(body))
	var verr *config.ValidationError
	if errors.As(err, &verr) {
		problems := make([]string, len(verr.Errors))
		for i, fe := range verr.Errors {
			problems[i] = fe.String()
		}
		return nil, &Error{Path: Path, Problems: problems}
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s at %s: %w", Path, ref, err)
	}
	return cfg, nil
}

// ErrNotConfigured is what a Loader returns for a repository without
// .github/perfgate.yml: perfgate stays quiet there (or posts a neutral
// "not configured" check, as the server is set), never a failure.
var ErrNotConfigured = errors.New("the repository has no " + config.DefaultPath)

// Error is an invalid configuration file. Loaders may return any error
// with a ValidationErrors method instead; the app looks for that method.
type Error struct {
	Path     string
	Problems []string
}

func (e *Error) Error() string {
	return e.Path + " is invalid: " + strings.Join(e.Problems, "; ")
}

// ValidationErrors lists the problems, one per entry.
func (e *Error) ValidationErrors() []string { return e.Problems }
