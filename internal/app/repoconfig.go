package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/google/go-github/v62/github"
	"gopkg.in/yaml.v3"

	"github.com/perfgate/perfgate/internal/config"
)

// ConfigPath is where a repository keeps its perfgate configuration.
const ConfigPath = ".github/perfgate.yml"

// ContentsConfigLoader reads ConfigPath through the contents API and parses
// only the keys the GitHub handlers use. It is a stand-in: the server wires
// the full gate configuration (internal/config) behind ConfigLoader.
type ContentsConfigLoader struct{}

// repoFile is the subset of perfgate.yml read here. Other keys are ignored
// so the full config format can grow without breaking this loader.
type repoFile struct {
	Paths    []string `yaml:"paths"`
	Triggers struct {
		Drafts          string `yaml:"drafts"`
		Forks           string `yaml:"forks"`
		MergeLabel      string `yaml:"merge_label"`
		MergeOnApproval *bool  `yaml:"merge_on_approval"`
		SkippedCheck    *bool  `yaml:"skipped_check"`
	} `yaml:"triggers"`
}

// Load implements ConfigLoader. A missing file means the defaults.
func (ContentsConfigLoader) Load(ctx context.Context, client *github.Client, owner, repo, ref string) (RepoConfig, error) {
	fc, _, resp, err := client.Repositories.GetContents(ctx, owner, repo, ConfigPath, &github.RepositoryContentGetOptions{Ref: ref})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return DefaultRepoConfig(), nil
	}
	if err != nil {
		return RepoConfig{}, fmt.Errorf("fetch %s at %s: %w", ConfigPath, ref, err)
	}
	if fc == nil {
		return RepoConfig{}, &ConfigError{Path: ConfigPath, Problems: []string{"is a directory, want a file"}}
	}
	body, err := fc.GetContent()
	if err != nil {
		return RepoConfig{}, fmt.Errorf("decode %s: %w", ConfigPath, err)
	}
	return ParseRepoConfig([]byte(body))
}

// ParseRepoConfig parses and validates the handler-facing keys.
func ParseRepoConfig(b []byte) (RepoConfig, error) {
	var f repoFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return RepoConfig{}, &ConfigError{Path: ConfigPath, Problems: []string{err.Error()}}
	}
	cfg := DefaultRepoConfig()
	var problems []string
	if f.Paths != nil {
		cfg.Paths = f.Paths
	}
	if len(cfg.Paths) == 0 {
		problems = append(problems, "paths: list at least one glob, e.g. \"model/**\"")
	}
	for _, p := range cfg.Paths {
		if err := validGlob(p); err != nil {
			problems = append(problems, fmt.Sprintf("paths: %q: %v", p, err))
		}
	}
	switch DraftPolicy(f.Triggers.Drafts) {
	case "":
	case DraftsSkip, DraftsRun:
		cfg.Drafts = DraftPolicy(f.Triggers.Drafts)
	default:
		problems = append(problems, fmt.Sprintf("triggers.drafts: %q: want skip or run", f.Triggers.Drafts))
	}
	switch ForkPolicy(f.Triggers.Forks) {
	case "":
	case ForksWait, ForksRun:
		cfg.Forks = ForkPolicy(f.Triggers.Forks)
	default:
		problems = append(problems, fmt.Sprintf("triggers.forks: %q: want wait or run", f.Triggers.Forks))
	}
	cfg.MergeLabel = f.Triggers.MergeLabel
	if f.Triggers.MergeOnApproval != nil {
		cfg.MergeOnApproval = *f.Triggers.MergeOnApproval
	}
	if f.Triggers.SkippedCheck != nil {
		cfg.NoCheckWhenUnmatched = !*f.Triggers.SkippedCheck
	}
	if len(problems) > 0 {
		return RepoConfig{}, &ConfigError{Path: ConfigPath, Problems: problems}
	}
	return cfg, nil
}

// MatchPath reports whether name matches glob, where "**" spans any number
// of path segments and "*", "?" and "[…]" work within one segment.
func MatchPath(glob, name string) bool { return config.MatchGlob(glob, name) }

func validGlob(glob string) error {
	if glob == "" {
		return errors.New("empty glob")
	}
	for _, seg := range strings.Split(glob, "/") {
		if seg == "**" {
			continue
		}
		if strings.Contains(seg, "**") {
			return errors.New("** must be a whole path segment")
		}
		if _, err := path.Match(seg, ""); err != nil {
			return err
		}
	}
	return nil
}

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
