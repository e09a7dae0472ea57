package app

import (
	"context"

	"github.com/google/go-github/v62/github"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/config"
)

// ContentsConfigLoader is the ConfigLoader the server uses: the file
// through the contents API (repoconfig.Loader), mapped onto what the
// handlers need.
type ContentsConfigLoader struct{}

// Load implements ConfigLoader.
func (ContentsConfigLoader) Load(ctx context.Context, client *github.Client, owner, repo, ref string) (RepoConfig, error) {
	cfg, err := repoconfig.Loader{}.Full(ctx, client, owner, repo, ref)
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
		Full:                 cfg,
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
