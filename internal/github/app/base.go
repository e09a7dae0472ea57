package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/github/command"
	"github.com/perfgate/perfgate/internal/github/repoconfig"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// base is what every event handler shares.
type base struct {
	clients      githubapp.ClientCreator
	deps         Deps
	appSlug      string
	appID        int64
	unconfigured Unconfigured
}

// prTarget is a pull request as the handlers need it.
type prTarget struct {
	installationID int64
	owner, repo    string
	number         int
	headSHA        string
	baseSHA        string
	baseRef        string
	defaultBranch  string // the repository's; empty: ask GitHub
	author         string
	draft          bool
	fork           bool
}

func targetOf(installationID int64, repo *github.Repository, pr *github.PullRequest) prTarget {
	headRepo := pr.GetHead().GetRepo()
	return prTarget{
		installationID: installationID,
		owner:          repo.GetOwner().GetLogin(),
		repo:           repo.GetName(),
		number:         pr.GetNumber(),
		headSHA:        pr.GetHead().GetSHA(),
		baseSHA:        pr.GetBase().GetSHA(),
		baseRef:        pr.GetBase().GetRef(),
		defaultBranch:  repo.GetDefaultBranch(),
		author:         pr.GetUser().GetLogin(),
		draft:          pr.GetDraft(),
		// A deleted fork leaves head.repo null: treat it as a fork.
		fork: headRepo == nil || !strings.EqualFold(headRepo.GetFullName(), repo.GetFullName()),
	}
}

func (t prTarget) fullName() string { return t.owner + "/" + t.repo }

// parse decodes an event payload; a payload that does not parse never
// will, so retrying it is pointless.
func parse(event string, payload []byte, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return backoff.Permanent(fmt.Errorf("parse %s event: %w", event, err))
	}
	return nil
}

// configState is what loadConfig found.
type configState int

const (
	configOK      configState = iota
	configInvalid             // a failing check quotes the problems
	configMissing             // no .github/perfgate.yml: quiet, or a neutral check
)

// loadConfig reads the repo config from the default branch, or from the
// PR's base branch when that is protected (configRef), so a PR cannot
// relax its own gate and a branch a writer pushed cannot either. A broken
// file becomes a failing check quoting the problems; a missing one stays
// quiet or gets a neutral "not configured" check, as the server is set.
// Either way the caller stops.
func (b *base) loadConfig(ctx context.Context, client *github.Client, t prTarget, tier check.Tier, deliveryID string) (RepoConfig, configState, error) {
	ref, err := b.configRef(ctx, client, t)
	if err != nil {
		return RepoConfig{}, configInvalid, err
	}
	cfg, err := b.deps.Config.Load(ctx, client, t.owner, t.repo, ref)
	if err == nil {
		cfg.Ref = ref
		return cfg, configOK, nil
	}
	if errors.Is(err, repoconfig.ErrNotConfigured) {
		if b.unconfigured != UnconfiguredNeutral {
			zerolog.Ctx(ctx).Info().Str("ref", ref).Msg("no " + repoconfig.Path + ": perfgate stays quiet")
			return RepoConfig{}, configMissing, nil
		}
		return RepoConfig{}, configMissing, b.conclude(ctx, t, tier, check.NotConfigured, check.Output{
			Title: "perfgate is not configured",
			Summary: fmt.Sprintf("This repository has no `%s` on `%s`, so perfgate does not gate it. To gate pull requests, add the file (an empty one uses the defaults): see [the configuration reference](%s).",
				repoconfig.Path, ref, check.DocsURL),
		}, deliveryID)
	}
	v, invalid := asValidation(err)
	if !invalid {
		return RepoConfig{}, configInvalid, fmt.Errorf("load perfgate config for %s at %s: %w", t.fullName(), ref, err)
	}
	zerolog.Ctx(ctx).Warn().Strs("problems", v.ValidationErrors()).Msg("invalid perfgate config")
	var sb strings.Builder
	fmt.Fprintf(&sb, "perfgate could not read `%s` on `%s`, so it cannot gate this commit. Fix these problems on `%s`, then comment `/perf retest`:\n\n", repoconfig.Path, ref, ref)
	for _, p := range v.ValidationErrors() {
		fmt.Fprintf(&sb, "- %s\n", p)
	}
	return RepoConfig{}, configInvalid, b.conclude(ctx, t, tier, check.ConfigError, check.Output{Title: "Invalid " + repoconfig.Path, Summary: sb.String()}, deliveryID)
}

// conclude records a check run decided without a benchmark.
func (b *base) conclude(ctx context.Context, t prTarget, tier check.Tier, v check.Phase, out check.Output, deliveryID string) error {
	return b.deps.Dispatcher.Conclude(ctx, request.Conclude{
		InstallationID: t.installationID, Owner: t.owner, Repo: t.repo, PR: t.number, HeadSHA: t.headSHA,
		Tier: tier, Phase: v, Output: out, DeliveryID: deliveryID,
	})
}

// queueRun asks the dispatcher for the run: it records the check run and
// the jobs, and the outbox shows the queued check on GitHub.
func (b *base) queueRun(ctx context.Context, req request.Run) error {
	if err := b.deps.Dispatcher.RequestRun(ctx, req); err != nil {
		return fmt.Errorf("request %s run for %s@%s: %w", req.Tier, req.FullName(), rev.Short(req.HeadSHA), err)
	}
	zerolog.Ctx(ctx).Info().Str("tier", string(req.Tier)).Str("sha", req.HeadSHA).Str("trigger", req.Trigger).Msg("benchmark requested")
	return nil
}

func (b *base) runRequest(t prTarget, cfg RepoConfig, tier check.Tier, trigger, by, deliveryID string) request.Run {
	return request.Run{
		InstallationID: t.installationID, Owner: t.owner, Repo: t.repo, PR: t.number,
		HeadSHA: t.headSHA, BaseSHA: t.baseSHA, BaseRef: t.baseRef, ConfigRef: cfg.Ref, Tier: tier,
		Trigger: trigger, RequestedBy: by, Author: t.author, DeliveryID: deliveryID, Fork: t.fork, Config: cfg.Full,
	}
}

// fetchPR loads a PR for events that carry only its number.
func (b *base) fetchPR(ctx context.Context, client *github.Client, installationID int64, repo *github.Repository, number int) (prTarget, *github.PullRequest, error) {
	pr, _, err := client.PullRequests.Get(ctx, repo.GetOwner().GetLogin(), repo.GetName(), number)
	if err != nil {
		return prTarget{}, nil, fmt.Errorf("get PR %s#%d: %w", repo.GetFullName(), number, err)
	}
	return targetOf(installationID, repo, pr), pr, nil
}

// isBot reports whether login is a bot account or this app itself.
func (b *base) isBot(u hookUser) bool {
	login := strings.ToLower(u.Login)
	return strings.HasSuffix(login, "[bot]") || u.Type == "Bot" || login == strings.ToLower(b.appSlug)
}

// access is a collaborator's role, ordered.
type access int

const (
	accessNone access = iota
	accessRead
	accessTriage
	accessWrite
	accessMaintain
	accessAdmin
)

var accessNames = map[string]access{"none": accessNone, "read": accessRead, "triage": accessTriage,
	"write": accessWrite, "maintain": accessMaintain, "admin": accessAdmin}

// collaboratorAccess asks GitHub for user's role on the repo. It decodes the
// raw response because go-github v62's RepositoryPermissionLevel lacks
// role_name, and the legacy permission field reports maintain as write.
func (b *base) collaboratorAccess(ctx context.Context, client *github.Client, owner, repo, user string) (access, error) {
	req, err := client.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/collaborators/%s/permission", owner, repo, user), nil)
	if err != nil {
		return accessNone, err
	}
	var out struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	resp, err := client.Do(ctx, req, &out)
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return accessNone, nil // not a collaborator
	}
	if err != nil {
		return accessNone, fmt.Errorf("permission of %s on %s/%s: %w", user, owner, repo, err)
	}
	if a, ok := accessNames[out.RoleName]; ok {
		return a, nil
	}
	// Custom roles carry their own name; fall back to the base permission.
	return accessNames[out.Permission], nil
}

// allowed applies a command's permission rule.
func allowed(p command.Permission, a access, isAuthor bool) bool {
	switch p {
	case command.Anyone:
		return true
	case command.Write:
		return a >= accessWrite
	case command.Maintain:
		return a >= accessMaintain
	case command.AuthorOrWrite:
		return isAuthor || a >= accessWrite
	}
	return false
}

// comment posts a PR comment through the outbox; key (from the delivery)
// makes a retried delivery post it once.
func (b *base) comment(ctx context.Context, installationID int64, owner, repo string, number int, body, key string) error {
	if err := b.deps.Outbox.Comment(ctx, request.Comment{Key: key, InstallationID: installationID, Owner: owner, Repo: repo, Number: number, Body: check.Truncate(body, 65536)}); err != nil {
		return fmt.Errorf("comment on %s/%s#%d: %w", owner, repo, number, err)
	}
	return nil
}
