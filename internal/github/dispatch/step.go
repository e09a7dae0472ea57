package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/judge"
	"github.com/perfgate/perfgate/internal/analysis/report"
	"github.com/perfgate/perfgate/internal/github/checkstate"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/request"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// step is one lifecycle event for a check run row and what the dispatcher
// knows beyond the state machine: the verdict to keep, the text to show,
// the jobs to queue.
type step struct {
	ev checkstate.Event
	// doc is the verdict document to store; nil keeps the stored one. The
	// lifecycle's held regression is written into it either way.
	doc *verdictDoc
	// docFor, when set, edits the stored document instead.
	docFor func(verdictDoc) verdictDoc
	// out is what the check shows in its new phase; with no title the
	// verdict is rendered from doc (gate verdicts, escalation, an accepted
	// appeal). outFor, when set, computes it per row.
	out    check.Output
	outFor func(store.CheckRun) check.Output
	// jobIDs, when not nil, replace the row's jobs; jobs are queued and
	// appended.
	jobIDs []int64
	jobs   []store.JobSpec
	// key records the request (a retried delivery asks once).
	key string
	// replaced is the title and summary for a GitHub run a new one
	// replaces.
	replaced [2]string
	// cancelReason is given to jobs the step cancels.
	cancelReason string
	// comment, when set, is posted on the PR with the step (through the
	// outbox, once per commentKey).
	comment, commentKey string
	// actor, action and detail make the step's own audit entry (besides
	// the lifecycle's).
	actor, action string
	detail        map[string]any
	// annotate sends the document's settings annotations with the
	// rendered output: set by a fresh verdict, since GitHub appends the
	// annotations of every update.
	annotate bool
	// baseJob is the base commit's job to queue for the row (not one of
	// its jobs; the store records its ID as the document's baseline_job).
	baseJob *store.JobSpec
	// profileJob is the profiling pass a regression verdict queues
	// (profile.on_regression), enqueued with the step, not one of the
	// row's jobs.
	profileJob *store.JobSpec
	// trends and baselines are a judgement's trend points and first
	// baselines, stored with the step.
	trends    []store.TrendPoint
	baselines []store.NewBaseline
}

// errIgnored: the event does not apply to the row as it now is.
var errIgnored = checkstate.ErrIgnored

// apply runs the lifecycle on cr for st and applies the new state and its
// effects atomically. applied is false when another writer changed the row
// first (the caller re-reads and tries again); errIgnored when the event
// does not apply.
func (s *Service) apply(ctx context.Context, cr store.CheckRun, st step) (store.CheckRun, bool, error) {
	prior := s.docOf(cr)
	from := checkstate.State{Phase: check.Phase(cr.State), Deadline: cr.Deadline, Held: check.Phase(prior.Held)}
	if st.ev.Now.IsZero() {
		st.ev.Now = s.now()
	}
	if st.ev.Tier == "" {
		st.ev.Tier = cr.Tier
	}
	next, effects, err := checkstate.Transition(from, st.ev)
	if err != nil {
		return cr, false, err
	}
	if pings(effects) && s.prClosed(ctx, cr) {
		// The PR closed while this row still thought it open (a stale
		// delivery reopened work after the close, or the close is not
		// processed yet): close instead of warning or escalating.
		return cr, false, s.closeStale(ctx, cr)
	}
	doc := st.docAfter(prior)
	doc.Held = string(next.Held)
	raw, scrubbed, err := encodeDoc(doc)
	if err != nil {
		return cr, false, fmt.Errorf("encode verdict of %s@%s %s: %w", cr.Repo, rev.Short(cr.HeadSHA), cr.Tier, err)
	}
	if scrubbed {
		s.log.Error().Int64("check_run", cr.ID).Str("repo", cr.Repo).Str("sha", cr.HeadSHA).
			Msg("the gate's report has non-finite numbers; stored as 0 (the check shows the report as computed)")
	}
	ch := store.CheckChange{
		ID: cr.ID, Repo: cr.Repo, HeadSHA: cr.HeadSHA, Tier: cr.Tier, PRNumber: cr.PRNumber, InstallationID: cr.InstallationID,
		From: cr.State, FromGeneration: cr.Generation, State: string(next.Phase), Deadline: next.Deadline, Verdict: raw,
		JobIDs: st.jobIDs, AddJobs: st.jobs, RequestKey: st.key, CancelReason: st.cancelReason,
		BaseJob: st.baseJob, ProfileJob: st.profileJob, Trends: st.trends, Baselines: st.baselines,
	}
	after := cr
	after.State, after.Deadline = string(next.Phase), next.Deadline
	view := s.view(after, doc)
	detail := map[string]any{"sha": cr.HeadSHA, "tier": cr.Tier}
	for k, v := range st.detail {
		detail[k] = v
	}
	for _, e := range effects {
		switch e.Kind {
		case checkstate.SyncCheck:
			out, err := checkOutput(cr, st, doc, view, st.annotate || newRun(effects))
			if err != nil {
				return cr, false, err
			}
			ch.Desired = s.desired(cr, next.Phase, out)
		case checkstate.NewCheck:
			if cr.ID != 0 {
				ch.NewGeneration = true
				ch.CancelOld = &store.CheckCancelBody{Name: check.CheckName(check.Tier(cr.Tier)), Title: st.replaced[0], Summary: st.replaced[1]}
			}
		case checkstate.CancelJobs:
			ch.CancelJobs = cr.JobIDs
		case checkstate.WarnAuthor, checkstate.AnnounceEscalation:
			if cr.PRNumber <= 0 {
				continue
			}
			eff, err := warnComment(e.Kind, cr, next, view)
			if err != nil {
				return cr, false, err
			}
			ch.Effects = append(ch.Effects, eff)
		case checkstate.Audit:
			d := detail
			if e.Action == "gate.regression" || e.Action == "regression.escalated" {
				d = withDeadline(detail, next.Deadline)
			}
			entry, err := auditEntry(st.actorName(), e.Action, cr.Repo, cr.PRNumber, d)
			if err != nil {
				return cr, false, err
			}
			ch.Audit = append(ch.Audit, entry)
		}
	}
	if err := st.addOwn(&ch, cr, detail); err != nil {
		return cr, false, err
	}
	row, applied, err := s.lifecycle().ApplyCheck(ctx, ch)
	if err != nil {
		return cr, false, err
	}
	if applied && (ch.Desired != nil || len(ch.Effects) > 0 || ch.NewGeneration) && s.written != nil {
		s.written()
	}
	return row, applied, nil
}

// checkOutput is what the check run shows after the step: the step's own
// output, else the verdict document rendered from the view (a long run's
// too).
// annotate sends the verdict document's settings annotations with a
// rendered verdict (GitHub appends them: once per diff and run).
func checkOutput(cr store.CheckRun, st step, doc verdictDoc, view report.View, annotate bool) (check.Output, error) {
	out := st.out
	if st.outFor != nil {
		out = st.outFor(cr)
	}
	if out.Title == "" {
		c, err := report.RenderCheck(view)
		if err != nil {
			return out, fmt.Errorf("render check run: %w", err)
		}
		out = check.Output{Title: c.Title, Summary: c.Summary, Text: c.Text}
		if annotate {
			out.Annotations = report.Annotations(doc.Settings, doc.Report)
		}
	}
	return out, nil
}

// warnComment is the comment that warns the author or announces an
// escalation, posted while the pull request is open.
func warnComment(kind checkstate.EffectKind, cr store.CheckRun, next checkstate.State, view report.View) (store.Effect, error) {
	body, err := report.RenderComment(view)
	if err != nil {
		return store.Effect{}, fmt.Errorf("render comment: %w", err)
	}
	// Keyed by the row and its clock (or generation): a replica
	// racing on the same step, or a retried one, comments once.
	key := fmt.Sprintf("warn:%d:%d", cr.ID, next.Deadline.Unix())
	if kind == checkstate.AnnounceEscalation {
		key = fmt.Sprintf("escalate:%d:%d", cr.ID, cr.Generation)
	}
	eff, err := commentEffect(key, cr.InstallationID, cr.Repo, cr.PRNumber, body)
	if err != nil {
		return store.Effect{}, err
	}
	return ifOpen(eff)
}

// docAfter is the verdict document after the step: the step's own, or
// the prior one, as the step rewrites it.
func (st step) docAfter(prior verdictDoc) verdictDoc {
	doc := prior
	if st.doc != nil {
		doc = *st.doc
	}
	if st.docFor != nil {
		doc = st.docFor(doc)
	}
	return doc
}

// actorName is who caused the step, for the audit log (the maintainer
// who acknowledged, the user who closed the PR), or perfgate.
func (st step) actorName() string {
	if st.actor == "" {
		return "perfgate"
	}
	return st.actor
}

// addOwn adds the step's own comment and audit entry to ch, beside the
// lifecycle's effects.
func (st step) addOwn(ch *store.CheckChange, cr store.CheckRun, detail map[string]any) error {
	if st.comment != "" && cr.PRNumber > 0 {
		eff, err := commentEffect(st.commentKey, cr.InstallationID, cr.Repo, cr.PRNumber, st.comment)
		if err != nil {
			return err
		}
		if eff, err = ifOpen(eff); err != nil {
			return err
		}
		ch.Effects = append(ch.Effects, eff)
	}
	if st.action != "" {
		entry, err := auditEntry(st.actorName(), st.action, cr.Repo, cr.PRNumber, detail)
		if err != nil {
			return err
		}
		ch.Audit = append(ch.Audit, entry)
	}
	return nil
}

// retryCAS runs fn until it applies its step: a lost compare-and-set means
// another writer moved the row, so fn re-reads and decides again.
func (s *Service) retryCAS(ctx context.Context, fn func() (bool, error)) error {
	for range 8 {
		applied, err := fn()
		if err != nil || applied {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return fmt.Errorf("check run changed by others 8 times in a row: %w", store.ErrConflict)
}

// newRun says whether the step starts a new GitHub check run, which
// carries none of the old one's annotations.
func newRun(effects []checkstate.Effect) bool {
	for _, e := range effects {
		if e.Kind == checkstate.NewCheck {
			return true
		}
	}
	return false
}

// desired is what GitHub should show for a check run row in phase p.
func (s *Service) desired(cr store.CheckRun, p check.Phase, out check.Output) *store.CheckOutput {
	status, conclusion := p.Check()
	c := &store.CheckOutput{
		Name: check.CheckName(check.Tier(cr.Tier)), Status: status, Conclusion: conclusion,
		Title: out.Title, Summary: check.Truncate(out.Summary, check.MaxOutput), Text: check.Truncate(out.Text, check.MaxOutput),
		DetailsURL: s.detailsURL, Annotations: out.Annotations,
	}
	if s.details != nil {
		c.DetailsURL = s.details(cr.Repo, cr.HeadSHA, check.Tier(cr.Tier))
	}
	if status == "completed" {
		for _, b := range check.Buttons(p) {
			c.Actions = append(c.Actions, store.CheckAction{Label: b.Label, Description: b.Description, Identifier: b.Identifier})
		}
	}
	return c
}

// docOf decodes a row's verdict document; an unreadable one is logged and
// holds nothing.
func (s *Service) docOf(cr store.CheckRun) verdictDoc {
	var doc verdictDoc
	if len(cr.Verdict) > 0 {
		if err := json.Unmarshal(cr.Verdict, &doc); err != nil {
			s.log.Error().Err(err).Int64("check_run", cr.ID).Msg("stored verdict unreadable; treating it as empty")
			return verdictDoc{}
		}
	}
	return doc
}

// view builds the report for a check run row's state.
func (s *Service) view(cr store.CheckRun, doc verdictDoc) report.View {
	v := report.View{SHA: cr.HeadSHA, Author: doc.Author, Deadline: cr.Deadline, EscalateAfter: doc.After, Notes: doc.Notes, Cost: doc.Cost}
	if doc.Report != nil {
		v = report.FromGate(v, doc.Report, doc.Env)
		v = report.WithSettings(v, doc.Settings)
		v.Verdict = report.VerdictOf(doc.Report.Verdict)
	}
	if doc.LongRun != nil {
		v.Detail = doc.LongRun.Markdown // a capacity check's sweeps
	}
	v.Tier = cr.Tier
	switch check.Phase(cr.State) {
	case check.Escalated:
		v.Verdict = report.Escalated
	case check.Accepted:
		v.Verdict = report.Accepted
	case check.NeedsAck:
		v.Verdict, v.NeedsAck = report.Inconclusive, true
	}
	return v
}

func commentEffect(key string, installationID int64, repo string, pr int, body string) (store.Effect, error) {
	raw, err := json.Marshal(store.CommentBody{Number: pr, Body: body})
	if err != nil {
		return store.Effect{}, fmt.Errorf("encode comment: %w", err)
	}
	return store.Effect{Key: key, Kind: store.EffectComment, InstallationID: installationID, Repo: repo, Body: raw}, nil
}

func auditEntry(actor, action, repo string, pr int, detail map[string]any) (store.AuditEntry, error) {
	raw, err := json.Marshal(detail)
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("encode audit detail of %s: %w", action, err)
	}
	return store.AuditEntry{Actor: actor, Action: action, Repo: repo, PRNumber: pr, Detail: raw}, nil
}

func withDeadline(detail map[string]any, deadline time.Time) map[string]any {
	out := map[string]any{"deadline": deadline}
	for k, v := range detail {
		out[k] = v
	}
	return out
}

// Comment implements app.Outbox: a PR comment, posted by the outbox.
func (s *Service) Comment(ctx context.Context, c request.Comment) error {
	eff, err := commentEffect(c.Key, c.InstallationID, c.Owner+"/"+c.Repo, c.Number, c.Body)
	if err != nil {
		return err
	}
	return s.putEffect(ctx, eff)
}

// React implements app.Outbox: a reaction to a comment.
func (s *Service) React(ctx context.Context, r request.Reaction) error {
	raw, err := json.Marshal(store.ReactionBody{CommentID: r.CommentID, Content: r.Content})
	if err != nil {
		return fmt.Errorf("encode reaction: %w", err)
	}
	return s.putEffect(ctx, store.Effect{Key: r.Key, Kind: store.EffectReaction, InstallationID: r.InstallationID, Repo: r.Owner + "/" + r.Repo, Body: raw})
}

func (s *Service) putEffect(ctx context.Context, e store.Effect) error {
	if e.Key == "" {
		return errors.New("GitHub write without a key: it could be posted twice")
	}
	if _, err := s.lifecycle().PutEffect(ctx, e); err != nil {
		return err
	}
	if s.written != nil {
		s.written()
	}
	return nil
}

// isAgentLost reports whether a failure reason is the runner's (the
// store's reaper writes "agent lost: …").
func isAgentLost(reason string) bool { return judge.IsAgentLost(reason) }
