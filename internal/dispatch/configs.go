package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-github/v62/github"

	"github.com/perfgate/perfgate/internal/app"
	"github.com/perfgate/perfgate/internal/config"
)

// Configs loads a repository's .github/perfgate.yml through the contents API
// and parses it with the full gate configuration. It serves the GitHub
// handlers (app.ConfigLoader) and the dispatcher alike, so both read the
// same file the same way.
type Configs struct{}

// Full returns the parsed config at ref; a missing file is the defaults. An
// invalid file comes back as an error with a ValidationErrors method, which
// the app turns into a failing check quoting every problem.
func (Configs) Full(ctx context.Context, client *github.Client, owner, repo, ref string) (*config.Config, error) {
	fc, _, resp, err := client.Repositories.GetContents(ctx, owner, repo, config.DefaultPath, &github.RepositoryContentGetOptions{Ref: ref})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return config.Default(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetch %s at %s: %w", config.DefaultPath, ref, err)
	}
	if fc == nil {
		return nil, &app.ConfigError{Path: config.DefaultPath, Problems: []string{"is a directory, want a file"}}
	}
	body, err := fc.GetContent()
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", config.DefaultPath, err)
	}
	cfg, err := config.Parse(config.DefaultPath, []byte(body))
	var verr *config.ValidationError
	if errors.As(err, &verr) {
		problems := make([]string, len(verr.Errors))
		for i, fe := range verr.Errors {
			problems[i] = fe.String()
		}
		return nil, &app.ConfigError{Path: config.DefaultPath, Problems: problems}
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s at %s: %w", config.DefaultPath, ref, err)
	}
	return cfg, nil
}

// Load implements app.ConfigLoader.
func (c Configs) Load(ctx context.Context, client *github.Client, owner, repo, ref string) (app.RepoConfig, error) {
	cfg, err := c.Full(ctx, client, owner, repo, ref)
	if err != nil {
		return app.RepoConfig{}, err
	}
	return RepoConfig(cfg), nil
}

// RepoConfig maps the gate configuration onto what the handlers need.
func RepoConfig(cfg *config.Config) app.RepoConfig {
	rc := app.RepoConfig{
		Paths:                cfg.Paths,
		NoCheckWhenUnmatched: cfg.Triggers.SkipCheckWhenNoMatch,
		Drafts:               app.DraftsSkip,
		Forks:                app.ForksWait,
		MergeLabel:           cfg.Triggers.MergeLabel,
		MergeOnApproval:      cfg.Triggers.OnApproval,
	}
	if cfg.Triggers.Drafts == "run" {
		rc.Drafts = app.DraftsRun
	}
	if cfg.Triggers.Forks == "always" {
		rc.Forks = app.ForksRun
	}
	return rc
}
