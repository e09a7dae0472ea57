// Package outbox carries perfgate's GitHub writes out of the store: check
// runs (created and brought to the state their row wants), cancelled check
// runs, comments and reactions. Every write is a store row until GitHub
// confirms it; a write GitHub answers with a 5xx, a rate limit or a lost
// connection is tried again later (minutes if need be), so a GitHub outage
// delays a check run but never strands it. Several senders — goroutines
// or server replicas — share the work through leased claims.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
)

// Store is what the sender needs of the store.
type Store interface {
	ClaimEffects(ctx context.Context, limit int, lease time.Duration) ([]store.Effect, error)
	CompleteEffect(ctx context.Context, id int64, leaseID string, version int) error
	RetryEffect(ctx context.Context, id int64, leaseID string, at time.Time, reason string) error
	FailEffect(ctx context.Context, id int64, leaseID string, version int, reason string) error
	GetCheckRunByID(ctx context.Context, id int64) (store.CheckRun, error)
	MarkCheckCreateAttempt(ctx context.Context, id int64, generation int) error
	CheckSynced(ctx context.Context, id int64, generation int, githubID int64, version int) (bool, error)
}

// Clients gives installation-scoped GitHub clients.
type Clients interface {
	NewInstallationClient(installationID int64) (*github.Client, error)
}

// Options configure a Sender.
type Options struct {
	Store   Store
	Clients Clients
	// Policy spaces the attempts of a failing write (backoff.Default()
	// when zero). Transient failures are retried without limit.
	Policy backoff.Policy
	// Lease bounds one send (default 2 minutes); a sender that dies
	// mid-send loses its claim after it.
	Lease time.Duration
	// Workers sends in parallel (default 8); Poll is how often an idle
	// sender looks for due writes (default 1 s; Wake is immediate).
	Workers int
	Poll    time.Duration
	// CallTimeout bounds one GitHub call (default 30 s).
	CallTimeout time.Duration
	// NoteReserve is the part of an installation's GitHub budget queue
	// notes leave to the other writes (DefaultNoteReserve when 0).
	NoteReserve int
	Now         func() time.Time
	Log         zerolog.Logger
}

// Sender sends outbox rows to GitHub.
type Sender struct {
	o       Options
	wake    chan struct{}
	budgets budgets
}

// New builds a Sender.
func New(o Options) *Sender {
	if o.Policy.Base <= 0 {
		o.Policy = backoff.Default()
	}
	if o.Lease <= 0 {
		o.Lease = 2 * time.Minute
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NoteReserve <= 0 {
		o.NoteReserve = DefaultNoteReserve
	}
	return &Sender{o: o, wake: make(chan struct{}, 1)}
}

// Wake makes an idle sender look for work now (a row was just written).
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run sends until ctx ends.
func (s *Sender) Run(ctx context.Context) {
	t := time.NewTicker(s.o.Poll)
	defer t.Stop()
	for {
		for {
			n, err := s.Pass(ctx)
			if err != nil && ctx.Err() == nil {
				s.o.Log.Error().Err(err).Msg("outbox pass")
			}
			if n == 0 || err != nil || ctx.Err() != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
	}
}

// Pass claims one batch of due writes, sends them, and returns how many it
// handled (sent, rescheduled or given up on).
func (s *Sender) Pass(ctx context.Context) (int, error) {
	effects, err := s.o.Store.ClaimEffects(ctx, s.o.Workers*4, s.o.Lease)
	if err != nil {
		return 0, err
	}
	var (
		wg  sync.WaitGroup
		sem = make(chan struct{}, s.o.Workers)
	)
	for _, e := range effects {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.handle(ctx, e)
		}()
	}
	wg.Wait()
	return len(effects), nil
}

// handle sends one write and records the outcome.
func (s *Sender) handle(ctx context.Context, e store.Effect) {
	log := s.o.Log.With().Str("effect", e.Key).Str("kind", string(e.Kind)).Str("repo", e.Repo).Int("attempt", e.Attempts).Logger()
	// A queue note does not spend the last of the installation's budget:
	// verdicts and comments need it more. It waits for the reset.
	if e.Priority == store.EffectPriorityNote {
		if until, low := s.budgets.low(e.InstallationID, s.o.NoteReserve, s.o.Now()); low {
			log.Debug().Time("retry_at", until).Msg("queue note deferred: GitHub budget low")
			if rerr := s.o.Store.RetryEffect(ctx, e.ID, e.LeaseID, until, "queue note deferred until the GitHub rate limit resets"); rerr != nil {
				log.Warn().Err(rerr).Msg("reschedule a GitHub write")
			}
			return
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.o.Lease)
	err := s.send(log.WithContext(cctx), e)
	cancel()
	s.budgets.noteErr(e.InstallationID, err, s.o.Now())
	if ctx.Err() != nil {
		return // shutting down: the lease lapses and another sender retries
	}
	if err == nil {
		if cerr := s.o.Store.CompleteEffect(ctx, e.ID, e.LeaseID, e.Version); cerr != nil {
			log.Warn().Err(cerr).Msg("record a sent GitHub write")
		}
		return
	}
	d := s.o.Policy.Next(s.o.Now(), e.Attempts, err)
	if d.GiveUp {
		log.Error().Err(err).Msg("GitHub refused a write for good; not retrying")
		if ferr := s.o.Store.FailEffect(ctx, e.ID, e.LeaseID, e.Version, err.Error()); ferr != nil {
			log.Warn().Err(ferr).Msg("record a refused GitHub write")
		}
		return
	}
	lvl := log.Info()
	if e.Attempts >= 3 {
		lvl = log.Warn() // a few failures are GitHub's weather; more is news
	}
	lvl.Err(err).Time("retry_at", d.At).Msg("GitHub write failed; will retry")
	if rerr := s.o.Store.RetryEffect(ctx, e.ID, e.LeaseID, d.At, err.Error()); rerr != nil {
		log.Warn().Err(rerr).Msg("reschedule a GitHub write")
	}
}

func (s *Sender) send(ctx context.Context, e store.Effect) error {
	client, err := s.o.Clients.NewInstallationClient(e.InstallationID)
	if err != nil {
		return fmt.Errorf("installation client %d: %w", e.InstallationID, err)
	}
	owner, repo, ok := strings.Cut(e.Repo, "/")
	if !ok {
		return backoff.Permanent(fmt.Errorf("effect %s: repository %q is not owner/name", e.Key, e.Repo))
	}
	call, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	switch e.Kind {
	case store.EffectCheckSync:
		var b store.CheckSyncBody
		if err := decode(e, &b); err != nil {
			return err
		}
		return s.syncCheck(call, client, owner, repo, b.CheckRunID)
	case store.EffectCheckCancel:
		var b store.CheckCancelBody
		if err := decode(e, &b); err != nil {
			return err
		}
		return cancelCheck(call, client, owner, repo, b)
	case store.EffectComment:
		var b store.CommentBody
		if err := decode(e, &b); err != nil {
			return err
		}
		return postComment(call, client, owner, repo, e, b)
	case store.EffectReaction:
		var b store.ReactionBody
		if err := decode(e, &b); err != nil {
			return err
		}
		// GitHub keeps one reaction per user and content and answers 200
		// when it exists, so a reaction whose first answer was lost is
		// adopted by sending it again.
		if _, _, err := client.Reactions.CreateIssueCommentReaction(call, owner, repo, b.CommentID, b.Content); err != nil {
			return fmt.Errorf("react %s to comment %d: %w", b.Content, b.CommentID, err)
		}
		return nil
	}
	return backoff.Permanent(fmt.Errorf("effect %s: unknown kind %q", e.Key, e.Kind))
}

func decode(e store.Effect, v any) error {
	if err := json.Unmarshal(e.Body, v); err != nil {
		return backoff.Permanent(fmt.Errorf("effect %s: decode body: %w", e.Key, err))
	}
	return nil
}

// syncCheck brings the GitHub check run of a row to the row's desired
// state: created when the row's generation has none yet (after looking for
// one whose creation answer was lost), updated otherwise.
func (s *Sender) syncCheck(ctx context.Context, client *github.Client, owner, repo string, rowID int64) error {
	cr, err := s.o.Store.GetCheckRunByID(ctx, rowID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	want := cr.Desired
	if want == nil || (cr.GitHubID != 0 && cr.SyncedVersion >= cr.DesiredVersion) {
		return nil
	}
	id := cr.GitHubID
	extID := store.ExternalID(cr.PRNumber, cr.ID, cr.Generation)
	if id == 0 && cr.CreateAttempted {
		if id, err = findCheck(ctx, client, owner, repo, cr.HeadSHA, want.Name, extID); err != nil {
			return err
		}
	}
	if id == 0 {
		if err := s.o.Store.MarkCheckCreateAttempt(ctx, cr.ID, cr.Generation); err != nil {
			return err
		}
		opts := github.CreateCheckRunOptions{
			Name: want.Name, HeadSHA: cr.HeadSHA, Status: github.String(want.Status), ExternalID: github.String(extID),
			Output: output(want), Actions: actions(want),
		}
		if want.Conclusion != "" {
			opts.Conclusion = github.String(want.Conclusion)
		}
		if want.DetailsURL != "" {
			opts.DetailsURL = github.String(want.DetailsURL)
		}
		run, resp, err := client.Checks.CreateCheckRun(ctx, owner, repo, opts)
		s.noteRate(cr.InstallationID, resp)
		if err != nil {
			return fmt.Errorf("create %s check run on %s/%s@%.7s: %w", want.Name, owner, repo, cr.HeadSHA, err)
		}
		zerolog.Ctx(ctx).Info().Int64("check_run_id", run.GetID()).Str("status", want.Status).Str("conclusion", want.Conclusion).Msg("check run created")
		_, err = s.o.Store.CheckSynced(ctx, cr.ID, cr.Generation, run.GetID(), cr.DesiredVersion)
		return err
	}
	opts := github.UpdateCheckRunOptions{
		Name:   want.Name, // go-github v62 sends name even when empty: always set it
		Status: github.String(want.Status), Output: output(want), Actions: actions(want),
	}
	if want.Conclusion != "" {
		opts.Conclusion = github.String(want.Conclusion)
	}
	if want.DetailsURL != "" {
		opts.DetailsURL = github.String(want.DetailsURL)
	}
	_, resp, err := client.Checks.UpdateCheckRun(ctx, owner, repo, id, opts)
	s.noteRate(cr.InstallationID, resp)
	if err != nil {
		return fmt.Errorf("update check run %d to %s %s: %w", id, want.Status, want.Conclusion, err)
	}
	zerolog.Ctx(ctx).Debug().Int64("check_run_id", id).Str("status", want.Status).Str("conclusion", want.Conclusion).Msg("check run updated")
	_, err = s.o.Store.CheckSynced(ctx, cr.ID, cr.Generation, id, cr.DesiredVersion)
	return err
}

// noteRate records the budget a GitHub answer reported.
func (s *Sender) noteRate(installation int64, resp *github.Response) {
	if resp != nil {
		s.budgets.noteRate(installation, resp.Rate)
	}
}

// findCheck looks for perfgate's check run on sha whose external ID is
// extID: one created by an attempt whose answer never arrived.
func findCheck(ctx context.Context, client *github.Client, owner, repo, sha, name, extID string) (int64, error) {
	opts := &github.ListCheckRunsOptions{CheckName: github.String(name), Filter: github.String("all"), ListOptions: github.ListOptions{PerPage: 100}}
	for {
		res, resp, err := client.Checks.ListCheckRunsForRef(ctx, owner, repo, sha, opts)
		if err != nil {
			return 0, fmt.Errorf("look for check run %s on %s/%s@%.7s: %w", extID, owner, repo, sha, err)
		}
		for _, r := range res.CheckRuns {
			if r.GetExternalID() == extID {
				return r.GetID(), nil
			}
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opts.Page = resp.NextPage
	}
}

// cancelCheck concludes a check run no row reports to any more.
func cancelCheck(ctx context.Context, client *github.Client, owner, repo string, b store.CheckCancelBody) error {
	id := b.GitHubID
	if id == 0 {
		var err error
		if id, err = findCheck(ctx, client, owner, repo, b.HeadSHA, b.Name, b.ExternalID); err != nil || id == 0 {
			return err // not found: never created, nothing to conclude
		}
	}
	opts := github.UpdateCheckRunOptions{
		Name: b.Name, Status: github.String("completed"), Conclusion: github.String("cancelled"),
		Output: &github.CheckRunOutput{Title: github.String(b.Title), Summary: github.String(truncate(b.Summary, maxOutput))},
	}
	if _, _, err := client.Checks.UpdateCheckRun(ctx, owner, repo, id, opts); err != nil {
		return fmt.Errorf("cancel replaced check run %d: %w", id, err)
	}
	return nil
}

// postComment posts an outbox comment carrying a hidden marker with the
// outbox row's ID. A row claimed before (Attempts > 1) may have been posted
// by an attempt whose answer was lost — GitHub applied it, then a 502, a
// timeout or a SIGKILL — so the PR's comments are searched for the marker
// first and a comment found is adopted instead of posted twice.
func postComment(ctx context.Context, client *github.Client, owner, repo string, e store.Effect, b store.CommentBody) error {
	mark := Marker(e.ID)
	if b.IfOpen {
		// A warning or an escalation pings the author: not on a PR that
		// closed since it was queued.
		pr, resp, err := client.PullRequests.Get(ctx, owner, repo, b.Number)
		if err != nil && (resp == nil || resp.StatusCode != http.StatusNotFound) {
			return fmt.Errorf("check that %s/%s#%d is open before commenting: %w", owner, repo, b.Number, err)
		}
		// Not found: an issue rather than a PR, or no access to pulls —
		// the comment itself says whether GitHub takes it.
		if err == nil && pr.GetState() == "closed" {
			zerolog.Ctx(ctx).Info().Int("pr", b.Number).Msg("the PR closed before its comment was sent: not posting it")
			return nil
		}
	}
	if e.Attempts > 1 {
		id, err := findComment(ctx, client, owner, repo, b.Number, e.CreatedAt, mark)
		if err != nil {
			return err
		}
		if id != 0 {
			zerolog.Ctx(ctx).Info().Int64("comment_id", id).Msg("comment already posted by an attempt whose answer was lost: adopted")
			return nil
		}
	}
	body := truncate(b.Body, maxComment-len([]rune(mark))-1) + "\n" + mark
	if _, _, err := client.Issues.CreateComment(ctx, owner, repo, b.Number, &github.IssueComment{Body: github.String(body)}); err != nil {
		return fmt.Errorf("comment on %s/%s#%d: %w", owner, repo, b.Number, err)
	}
	return nil
}

// Marker is the hidden HTML comment that ties a posted comment to its
// outbox row.
func Marker(effectID int64) string {
	return fmt.Sprintf("<!-- perfgate-outbox:%d -->", effectID)
}

// findComment looks for a bot comment on the PR carrying mark, among those
// updated since the row was written (a minute's slack for clock skew).
func findComment(ctx context.Context, client *github.Client, owner, repo string, number int, since time.Time, mark string) (int64, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	if !since.IsZero() {
		s := since.Add(-time.Minute)
		opts.Since = &s
	}
	for {
		cs, resp, err := client.Issues.ListComments(ctx, owner, repo, number, opts)
		if err != nil {
			return 0, fmt.Errorf("look for an earlier attempt's comment on %s/%s#%d: %w", owner, repo, number, err)
		}
		for _, c := range cs {
			if c.GetUser().GetType() == "Bot" && strings.HasSuffix(strings.TrimSpace(c.GetBody()), mark) {
				return c.GetID(), nil
			}
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opts.Page = resp.NextPage
	}
}

// GitHub's limits on a check run's output fields and a comment, in
// characters.
const (
	maxOutput  = 65535
	maxComment = 65536
)

func output(c *store.CheckOutput) *github.CheckRunOutput {
	if c.Title == "" && c.Summary == "" {
		return nil
	}
	out := &github.CheckRunOutput{Title: github.String(c.Title), Summary: github.String(truncate(c.Summary, maxOutput))}
	if c.Text != "" {
		out.Text = github.String(truncate(c.Text, maxOutput))
	}
	for i, a := range c.Annotations {
		if i == check.MaxAnnotations {
			break
		}
		out.Annotations = append(out.Annotations, &github.CheckRunAnnotation{
			Path: github.String(a.Path), StartLine: github.Int(a.Line), EndLine: github.Int(a.Line),
			AnnotationLevel: github.String(a.Level), Message: github.String(truncate(a.Message, maxAnnotationMessage)), Title: github.String(a.Title),
		})
	}
	return out
}

// maxAnnotationMessage is GitHub's limit on an annotation's message.
const maxAnnotationMessage = 64 << 10

func actions(c *store.CheckOutput) []*github.CheckRunAction {
	var out []*github.CheckRunAction
	for _, a := range c.Actions {
		out = append(out, &github.CheckRunAction{Label: a.Label, Description: a.Description, Identifier: a.Identifier})
	}
	return out
}

// truncate keeps s within max characters, saying so at the end.
func truncate(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	const note = "\n\n… (truncated)"
	return string(r[:max-len([]rune(note))]) + note
}
