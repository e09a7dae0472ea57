package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/command"
)

// base is what every event handler shares.
type base struct {
	clients githubapp.ClientCreator
	deps    Deps
	checks  Checks
	appSlug string
	appID   int64
}

// prTarget is a pull request as the handlers need it.
type prTarget struct {
	installationID int64
	owner, repo    string
	number         int
	headSHA        string
	baseSHA        string
	baseRef        string
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
		author:         pr.GetUser().GetLogin(),
		draft:          pr.GetDraft(),
		// A deleted fork leaves head.repo null: treat it as a fork.
		fork: headRepo == nil || !strings.EqualFold(headRepo.GetFullName(), repo.GetFullName()),
	}
}

func (t prTarget) fullName() string { return t.owner + "/" + t.repo }

// loadConfig reads the repo config from the PR's base ref, so a PR cannot
// relax its own gate. A broken file becomes a failing check quoting the
// problems, and ok=false tells the caller to stop.
func (b *base) loadConfig(ctx context.Context, client *github.Client, t prTarget, tier Tier, ref string) (RepoConfig, bool, error) {
	cfg, err := b.deps.Config.Load(ctx, client, t.owner, t.repo, ref)
	if err == nil {
		return cfg, true, nil
	}
	v, invalid := asValidation(err)
	if !invalid {
		return RepoConfig{}, false, fmt.Errorf("load perfgate config for %s at %s: %w", t.fullName(), ref, err)
	}
	zerolog.Ctx(ctx).Warn().Strs("problems", v.ValidationErrors()).Msg("invalid perfgate config")
	var sb strings.Builder
	fmt.Fprintf(&sb, "perfgate could not read `%s` on `%s`, so it cannot gate this commit. Fix these problems on the base branch, then comment `/perf retest`:\n\n", ConfigPath, ref)
	for _, p := range v.ValidationErrors() {
		fmt.Fprintf(&sb, "- %s\n", p)
	}
	_, cerr := b.checks.Conclude(ctx, client, t.owner, t.repo, tier, t.headSHA, t.number, VerdictConfigError,
		Output{Title: "Invalid " + ConfigPath, Summary: sb.String()})
	return RepoConfig{}, false, cerr
}

// queueRun creates the queued check run and records the job. If recording
// fails the check is concluded as a failure so the PR is not left waiting
// on a run that will never start.
func (b *base) queueRun(ctx context.Context, client *github.Client, req RunRequest) error {
	id, err := b.checks.Queue(ctx, client, req.Owner, req.Repo, req.Tier, req.HeadSHA, req.PR,
		Output{Title: "Queued", Summary: fmt.Sprintf("Waiting for a runner to benchmark `%s` (%s tier).", short(req.HeadSHA), req.Tier)})
	if err != nil {
		return err
	}
	req.CheckRunID = id
	if err := b.deps.Dispatcher.RequestRun(ctx, req); err != nil {
		out := Output{Title: "Could not queue the benchmark", Summary: "perfgate failed to record this run; comment `/perf retest` to try again."}
		if cerr := b.checks.Complete(ctx, client, req.Owner, req.Repo, id, req.Tier, VerdictError, out); cerr != nil {
			zerolog.Ctx(ctx).Error().Err(cerr).Int64("check_run_id", id).Msg("conclude unqueued check run")
		}
		return fmt.Errorf("request %s run for %s@%s: %w", req.Tier, req.FullName(), short(req.HeadSHA), err)
	}
	zerolog.Ctx(ctx).Info().Str("tier", string(req.Tier)).Str("sha", req.HeadSHA).Int64("check_run_id", id).Str("trigger", req.Trigger).Msg("benchmark requested")
	return nil
}

func (b *base) runRequest(t prTarget, tier Tier, trigger, by, deliveryID string) RunRequest {
	return RunRequest{
		InstallationID: t.installationID, Owner: t.owner, Repo: t.repo, PR: t.number,
		HeadSHA: t.headSHA, BaseSHA: t.baseSHA, BaseRef: t.baseRef, Tier: tier,
		Trigger: trigger, RequestedBy: by, DeliveryID: deliveryID, Fork: t.fork,
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
func (b *base) isBot(u *github.User) bool {
	login := strings.ToLower(u.GetLogin())
	return strings.HasSuffix(login, "[bot]") || u.GetType() == "Bot" || login == strings.ToLower(b.appSlug)
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

func (b *base) comment(ctx context.Context, client *github.Client, owner, repo string, number int, body string) error {
	body = truncate(body, 65536)
	if _, _, err := client.Issues.CreateComment(ctx, owner, repo, number, &github.IssueComment{Body: github.String(body)}); err != nil {
		return fmt.Errorf("comment on %s/%s#%d: %w", owner, repo, number, err)
	}
	return nil
}
