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

// Full returns the parsed config at ref; a missing file is the defaults. An
// invalid file comes back as a *ConfigError quoting every problem with its
// line, which the handlers turn into a failing check.
func (ContentsConfigLoader) Full(ctx context.Context, client *github.Client, owner, repo, ref string) (*config.Config, error) {
	fc, _, resp, err := client.Repositories.GetContents(ctx, owner, repo, ConfigPath, &github.RepositoryContentGetOptions{Ref: ref})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return config.Default(), nil
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
// triggers.forks "never" waits like "maintainer": only a maintainer's
// /perf retest runs a fork's code.
func RepoConfigOf(cfg *config.Config) RepoConfig {
	rc := RepoConfig{
		Paths:                cfg.Paths,
		NoCheckWhenUnmatched: cfg.Triggers.SkipCheckWhenNoMatch,
		Drafts:               DraftsSkip,
		Forks:                ForksWait,
		MergeLabel:           cfg.Triggers.MergeLabel,
		MergeOnApproval:      cfg.Triggers.OnApproval,
	}
	if cfg.Triggers.Drafts == "run" {
		rc.Drafts = DraftsRun
	}
	if cfg.Triggers.Forks == "always" {
		rc.Forks = ForksRun
	}
	return rc
}

// MatchPath reports whether name matches glob, where "**" spans any number
// of path segments and "*", "?" and "[…]" work within one segment.
func MatchPath(glob, name string) bool { return config.MatchGlob(glob, name) }

// matchesAny reports whether any changed file (or its name before a rename)
// matches any glob.
func matchesAny(globs []string, files []*github.CommitFile) bool {
	for _, f := range files {
		for _, g := range globs {
			if MatchPath(g, f.GetFilename()) || (f.GetPreviousFilename() != "" && MatchPath(g, f.GetPreviousFilename())) {
				return true
			}
		}
	}
	return false
}
