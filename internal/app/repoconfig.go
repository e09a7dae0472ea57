package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-github/v62/github"
	"github.com/perfgate/perfgate/internal/config"
)

// ConfigPath is where a repository keeps its perfgate configuration.
const ConfigPath = config.DefaultPath

// ContentsConfigLoader reads ConfigPath through the contents API and parses
// it with the gate's configuration (internal/config), so the handlers and
// the dispatcher read one file one way.
type ContentsConfigLoader struct{}

// Full returns the parsed config at ref. A missing file is
// ErrNotConfigured; an invalid one comes back as a *ConfigError quoting
// every problem with its line, which the handlers turn into a failing
// check.
func (ContentsConfigLoader) Full(ctx context.Context, client *github.Client, owner, repo, ref string) (*config.Config, error) {
	fc, _, resp, err := client.Repositories.GetContents(ctx, owner, repo, ConfigPath, &github.RepositoryContentGetOptions{Ref: ref})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil, ErrNotConfigured
	}
	if err != nil {
		return nil, fmt.Errorf("fetch %s at %s: %w", ConfigPath, ref, err)
	}
	if fc == nil {
		return nil, &ConfigError{Path: ConfigPath, Problems: []string{"is a directory, want a file"}}
	}
	body, err := fc.GetContent()
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", ConfigPath, err)
	}
	cfg, err := config.Parse(ConfigPath, []byte(body))
	var verr *config.ValidationError
	if errors.As(err, &verr) {
		problems := make([]string, len(verr.Errors))
		for i, fe := range verr.Errors {
			problems[i] = fe.String()
		}
		return nil, &ConfigError{Path: ConfigPath, Problems: problems}
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s at %s: %w", ConfigPath, ref, err)
	}
	return cfg, nil
}

// Load implements ConfigLoader.
func (c ContentsConfigLoader) Load(ctx context.Context, client *github.Client, owner, repo, ref string) (RepoConfig, error) {
	cfg, err := c.Full(ctx, client, owner, repo, ref)
	if err != nil {
		return RepoConfig{}, err
	}
	return RepoConfigOf(cfg), nil
}

// RepoConfigOf maps the gate configuration onto what the handlers need.
func RepoConfigOf(cfg *config.Config) RepoConfig {
	rc := RepoConfig{
		Paths:                cfg.Paths,
		Filter:               cfg.Filter(),
		NoCheckWhenUnmatched: cfg.Triggers.SkipCheckWhenNoMatch,
		Drafts:               DraftsSkip,
		Forks:                ForkPolicy(cfg.Triggers.Forks),
		MergeLabel:           cfg.Triggers.MergeLabel,
		MergeOnApproval:      cfg.Triggers.OnApproval,
	}
	if cfg.Triggers.Drafts == "run" {
		rc.Drafts = DraftsRun
	}
	if rc.Forks == "" {
		rc.Forks = ForksMaintainer
	}
	return rc
}

// gates reports whether a changed file (or its name before a rename) gates
// the PR.
func gates(cfg RepoConfig, f *github.CommitFile) bool {
	return cfg.Filter.Gates(f.GetFilename()) || (f.GetPreviousFilename() != "" && cfg.Filter.Gates(f.GetPreviousFilename()))
}

// MatchPath reports whether name matches one glob (doublestar syntax: "**"
// spans directories, "*", "?" and "[…]" work within one, "{a,b}" is
// either).
func MatchPath(glob, name string) bool { return config.MatchGlob(glob, name) }
