// Package baseline promotes, reads and exports baselines: verified
// snapshots of a matrix entry's runs with the metadata needed to re-run
// them, bound to a commit and a release version.
//
// Two rules hold for every baseline Promote stores, whoever calls it:
//
//  1. A baseline only moves up. When (repo, key) already has baselines,
//     the new runs are compared with the median of the latest three
//     (gate.CompareRecent, with the session-to-session noise their means
//     show); any gated metric that got worse (see Worse) refuses the
//     promotion unless the caller passes AllowLower with a Reason, and
//     that lowering is written to the baseline row and the audit log with
//     who and why.
//  2. Every baseline is traceable: at least gate.MinRuns runs, all from one
//     environment, each carrying perfgate's section with the GPU, driver,
//     the engine's identity (an image pinned by digest, the image a build
//     made from the commit, or a command run in the commit's checkout with
//     its tree digest; or the sim marker), offered load and dataset hash,
//     and a commit. Snapshot.BenchArgs turns that back into the
//     `perfgate bench` command that reproduces the load.
package baseline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/analysis/promotion"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/config"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// Store is what this package needs from the database; store.Store has it.
type Store interface {
	Reader
	PutBaseline(ctx context.Context, b store.Baseline) (store.Baseline, error)
	AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
}

// Reader is what reading baselines needs (Latest, At, Find, History,
// Options): no writes.
type Reader interface {
	LatestBaseline(ctx context.Context, repo, key string) (store.Baseline, error)
	BaselineHistory(ctx context.Context, repo, key string) ([]store.Baseline, error)
}

// Audit actions Promote writes.
const (
	ActionPromoted = "baseline.promoted"
	ActionLowered  = "baseline.lowered"
)

// SimImage is what a baseline of the built-in simulated engine stores as
// its image digest (promotion.SimImage).
const SimImage = promotion.SimImage

// HistorySessions caps the baselines fed to the gate as its noise history
// (promotion.HistorySessions).
const HistorySessions = promotion.HistorySessions

// Meta is who promotes which runs as what.
type Meta struct {
	Repo    string // owner/name
	Key     string // matrix entry, e.g. "llama-8b-tp8"
	Version string // release version the baseline is bound to, e.g. "v0.26.0"
	// Commit the runs measured; when empty, the commit the runs record.
	Commit string
	By     string // GitHub login (or operator) promoting
	Reason string
	// AllowLower lets a baseline that is worse than the current one be
	// promoted; it needs a Reason.
	AllowLower bool
}

// ErrInvalidMeta is a Meta that misses a required field.
var ErrInvalidMeta = errors.New("baseline: invalid promotion")

func (m Meta) validate() error {
	var missing []string
	if m.Repo == "" || strings.Count(m.Repo, "/") != 1 {
		missing = append(missing, "repo (owner/name)")
	}
	if m.Key == "" {
		missing = append(missing, "key")
	}
	if m.Version == "" || strings.ContainsAny(m.Version, " \t\n/") {
		missing = append(missing, "version (a release such as v0.26.0, no spaces or slashes)")
	}
	if m.By == "" {
		missing = append(missing, "by (who promotes)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: need %s", ErrInvalidMeta, strings.Join(missing, ", "))
	}
	return nil
}

// The rules a RefusedError names.
const (
	RuleMovesUp   = "a baseline only moves up"
	RuleTraceable = "every baseline is traceable"
)

// RefusedError is a promotion one of the two rules refused.
type RefusedError struct {
	Rule string
	// Problems say what is missing or inconsistent (RuleTraceable).
	Problems []string
	// Worse lists the metrics that got worse (RuleMovesUp), Against the
	// latest baseline and Reference what they were compared with: that
	// baseline, or the median of the latest ones.
	Worse     []Worse
	Against   store.Baseline
	Reference string
	// NeedReason: AllowLower was given without a Reason.
	NeedReason bool
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "refused by the rule %q: ", e.Rule)
	switch e.Rule {
	case RuleMovesUp:
		ws := make([]string, len(e.Worse))
		for i, w := range e.Worse {
			ws[i] = w.String()
		}
		ref := e.Reference
		if ref == "" {
			ref = fmt.Sprintf("baseline #%d (commit %s)", e.Against.Version, rev.Log(e.Against.Commit))
		}
		fmt.Fprintf(&b, "worse than %s on %s", ref, strings.Join(ws, "; "))
		if e.NeedReason {
			b.WriteString("; --allow-lower needs a non-empty --reason \"…\" saying why")
		} else {
			b.WriteString("; to promote it anyway pass --allow-lower --reason \"…\" (recorded with who and why in the audit log)")
		}
	default:
		b.WriteString(strings.Join(e.Problems, "; "))
		b.WriteString("; there is no override: re-run with perfgate bench on a runner that records them")
	}
	return b.String()
}

// Worse is a gated metric on which the new runs are worse than the current
// baseline (the rule is promotion.WorseMetrics).
type Worse = promotion.Worse

// Snapshot is a stored baseline with its documents decoded.
type Snapshot struct {
	store.Baseline
	// Label is the release version (Meta.Version); Baseline.Version is the
	// sequence number the store gives each promotion of (Repo, Key).
	Label       string
	Load        result.Load
	DatasetHash string
	Warmup      int
	Runs        []*result.Result
}

// loadParams is what Baseline.LoadParams holds: the offered load as
// result.Load (so a reader decoding it as one gets exactly that), plus what
// else re-running needs and the release label, which the store has no
// column for.
type loadParams struct {
	result.Load
	DatasetHash string `json:"dataset_hash"`
	Warmup      int    `json:"warmup_requests,omitempty"`
	Label       string `json:"baseline_version"`
}

// Decode reads a stored baseline's documents.
func Decode(b store.Baseline) (Snapshot, error) {
	s := Snapshot{Baseline: b}
	var lp loadParams
	if len(b.LoadParams) > 0 {
		if err := json.Unmarshal(b.LoadParams, &lp); err != nil {
			return Snapshot{}, fmt.Errorf("decode baseline %s %s #%d: load params: %w", b.Repo, b.Key, b.Version, err)
		}
	}
	s.Load, s.DatasetHash, s.Warmup, s.Label = lp.Load, lp.DatasetHash, lp.Warmup, lp.Label
	if len(b.Runs) == 0 {
		return Snapshot{}, fmt.Errorf("decode baseline %s %s #%d: no runs stored", b.Repo, b.Key, b.Version)
	}
	runs, err := gate.ParseRuns(b.Runs)
	if err != nil {
		return Snapshot{}, fmt.Errorf("decode baseline %s %s #%d: runs: %w", b.Repo, b.Key, b.Version, err)
	}
	s.Runs = runs
	return s, nil
}

// Label is a stored baseline's release version, read without decoding its
// runs (for listings).
func Label(b store.Baseline) string {
	var lp struct {
		Label string `json:"baseline_version"`
	}
	_ = json.Unmarshal(b.LoadParams, &lp)
	return lp.Label
}

// Latest is the current baseline of (repo, key); store.ErrNotFound when
// none was promoted.
func Latest(ctx context.Context, st Reader, repo, key string) (Snapshot, error) {
	b, err := st.LatestBaseline(ctx, repo, key)
	if err != nil {
		return Snapshot{}, err
	}
	return Decode(b)
}

// At is version n of (repo, key), or the latest when n is 0.
func At(ctx context.Context, st Reader, repo, key string, n int) (Snapshot, error) {
	if n == 0 {
		return Latest(ctx, st, repo, key)
	}
	hist, err := st.BaselineHistory(ctx, repo, key)
	if err != nil {
		return Snapshot{}, err
	}
	for _, b := range hist {
		if b.Version == n {
			return Decode(b)
		}
	}
	return Snapshot{}, fmt.Errorf("baseline %s %s #%d: %w", repo, key, n, store.ErrNotFound)
}

// Find is the baseline a user names: "" for the latest, a sequence
// number ("3" or "#3"), or a release version ("v0.26.0").
func Find(ctx context.Context, st Reader, repo, key, ref string) (Snapshot, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Latest(ctx, st, repo, key)
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(ref, "#")); err == nil && n > 0 {
		return At(ctx, st, repo, key, n)
	}
	hist, err := st.BaselineHistory(ctx, repo, key)
	if err != nil {
		return Snapshot{}, err
	}
	for _, b := range hist {
		if Label(b) == ref {
			return Decode(b)
		}
	}
	return Snapshot{}, fmt.Errorf("baseline %s %s %s: %w", repo, key, ref, store.ErrNotFound)
}

// Promote checks runs against both rules and stores them as the next
// baseline of (meta.Repo, meta.Key). The report is the comparison with the
// previous baseline (nil for the first); it comes back with a refusal too,
// so the caller can show it. A refusal is a *RefusedError.
func Promote(ctx context.Context, st Store, runs []*result.Result, meta Meta, tier config.Tier) (store.Baseline, *gate.Report, error) {
	prov, err := traceable(runs, meta, tier)
	if err != nil {
		return store.Baseline{}, nil, err
	}
	hist, err := st.BaselineHistory(ctx, meta.Repo, meta.Key)
	if err != nil {
		return store.Baseline{}, nil, fmt.Errorf("promote %s %s: %w", meta.Repo, meta.Key, err)
	}
	p, err := plan(runs, meta, tier, prov, hist)
	if err != nil {
		return store.Baseline{}, p.Report, err
	}
	saved, err := st.PutBaseline(ctx, p.Row)
	if errors.Is(err, store.ErrConflict) {
		return store.Baseline{}, p.Report, fmt.Errorf("promote %s %s: another baseline was promoted meanwhile; promote again to compare with it: %w", meta.Repo, meta.Key, err)
	}
	if err != nil {
		return store.Baseline{}, p.Report, fmt.Errorf("promote %s %s: %w", meta.Repo, meta.Key, err)
	}
	entries, err := p.Audit(saved)
	if err == nil {
		for _, e := range entries {
			if _, err = st.AppendAudit(ctx, e); err != nil {
				err = fmt.Errorf("audit: %w", err)
				break
			}
		}
	}
	if err != nil {
		return saved, p.Report, fmt.Errorf("promote %s %s: baseline #%d stored but %w", meta.Repo, meta.Key, saved.Version, err)
	}
	return saved, p.Report, nil
}

// Plan is a promotion both rules allowed, not yet stored: the row to
// store, numbered next after the history it was checked against (so a
// promotion that landed since is a conflict, not a silent new latest),
// and the comparison with the previous baseline (nil for the first).
type Plan struct {
	Row    store.Baseline
	Report *gate.Report
	meta   Meta
	prev   store.Baseline
	worse  []Worse
}

// Prepare is Promote without the store: it checks runs against both rules
// given hist, the stored baselines of (meta.Repo, meta.Key) newest first,
// and returns the row to store and, through Plan.Audit, the audit entries
// that record it. The caller stores both (PutBaseline and AppendAudit, or
// one transaction). A refusal is a *RefusedError, with the report.
func Prepare(runs []*result.Result, meta Meta, tier config.Tier, hist []store.Baseline) (Plan, error) {
	prov, err := traceable(runs, meta, tier)
	if err != nil {
		return Plan{}, err
	}
	return plan(runs, meta, tier, prov, hist)
}

// traceable checks meta and the rule that every baseline is traceable.
func traceable(runs []*result.Result, meta Meta, tier config.Tier) (promotion.Provenance, error) {
	if err := meta.validate(); err != nil {
		return promotion.Provenance{}, err
	}
	prov, problems, err := promotion.Check(runs, meta.Commit, tier)
	if err != nil {
		return promotion.Provenance{}, fmt.Errorf("promote %s %s: %w", meta.Repo, meta.Key, err)
	}
	if len(problems) > 0 {
		return promotion.Provenance{}, &RefusedError{Rule: RuleTraceable, Problems: problems}
	}
	return prov, nil
}

// plan checks the traceable runs against the rule that a baseline only
// moves up, given the stored history, and builds the row.
func plan(runs []*result.Result, meta Meta, tier config.Tier, prov promotion.Provenance, hist []store.Baseline) (Plan, error) {
	for _, b := range hist {
		if Label(b) == meta.Version {
			return Plan{}, fmt.Errorf("%w: version %s of %s %s is already baseline #%d; promote under a new version", ErrInvalidMeta, meta.Version, meta.Repo, meta.Key, b.Version)
		}
	}
	p := Plan{meta: meta}
	if len(hist) > 0 {
		p.prev = hist[0]
		sessions, ref, err := recentSessions(hist, prov)
		if err != nil {
			return Plan{}, fmt.Errorf("promote %s %s: %w", meta.Repo, meta.Key, err)
		}
		p.Report, err = gate.CompareRecent(runs, tier, gate.Options{Looks: gate.SingleLook(), History: gate.History{Sessions: sessions}})
		if err != nil {
			return Plan{}, fmt.Errorf("promote %s %s: compare with %s: %w", meta.Repo, meta.Key, ref, err)
		}
		p.worse = promotion.WorseMetrics(p.Report)
		if len(p.worse) > 0 && (!meta.AllowLower || strings.TrimSpace(meta.Reason) == "") {
			return Plan{Report: p.Report}, &RefusedError{Rule: RuleMovesUp, Worse: p.worse, Against: p.prev, Reference: ref, NeedReason: meta.AllowLower}
		}
	}
	lp, err := json.Marshal(loadParams{Load: prov.Load, DatasetHash: prov.DatasetHash, Warmup: prov.Warmup, Label: meta.Version})
	if err != nil {
		return Plan{Report: p.Report}, fmt.Errorf("promote %s %s: encode load: %w", meta.Repo, meta.Key, err)
	}
	rs, err := json.Marshal(runs)
	if err != nil {
		return Plan{Report: p.Report}, fmt.Errorf("promote %s %s: encode runs: %w", meta.Repo, meta.Key, err)
	}
	p.Row = store.Baseline{
		Repo: meta.Repo, Key: meta.Key,
		// The next number explicitly, not 0: if another promotion landed
		// since the comparison above, the store's conflict stops this one
		// from becoming latest without being compared with it.
		Version: p.prev.Version + 1,
		Commit:  prov.Commit, ImageDigest: prov.Image, GPU: prov.GPU, GPUUUID: prov.GPUUUID, Driver: prov.Driver,
		LoadParams: lp, Runs: rs,
		PromotedBy: meta.By, Reason: meta.Reason, AllowLower: len(p.worse) > 0,
	}
	return p, nil
}

// recentSessions is the stored baselines (newest first) measured like the
// new runs (same card model and load) as sessions for the ratchet, and
// what the comparison is with, in words. When none matches, the latest
// alone is the reference (the gate then names the fields that differ).
func recentSessions(hist []store.Baseline, p promotion.Provenance) ([]gate.Session, string, error) {
	sessions := sessionsLike(hist, p.GPU, p.Load, 0)
	if len(sessions) == 0 {
		s, err := Decode(hist[0])
		if err != nil {
			return nil, "", err
		}
		sessions = []gate.Session{{Label: sessionLabel(hist[0]), Runs: s.Runs}}
	}
	k := min(gate.DefaultRecent, len(sessions))
	if k == 1 {
		return sessions, sessions[0].Label, nil
	}
	labels := make([]string, k)
	for i := range labels {
		labels[i] = sessions[i].Label
	}
	return sessions, fmt.Sprintf("the median of the latest %d baselines (%s)", k, strings.Join(labels, ", ")), nil
}

// sessionsLike is the stored baselines that are the noise history of
// runs measured on gpu under load, leaving out version except (0: none),
// by the rule of promotion.Sessions.
func sessionsLike(hist []store.Baseline, gpu string, load result.Load, except int) []gate.Session {
	rows := make([]promotion.Row, len(hist))
	for i, b := range hist {
		rows[i] = promotion.Row{Version: b.Version, GPU: b.GPU, Decode: func() (promotion.Stored, error) {
			s, err := Decode(b)
			return promotion.Stored{Label: sessionLabel(b), Load: s.Load, Runs: s.Runs}, err
		}}
	}
	return promotion.Sessions(rows, gpu, load, except)
}

func sessionLabel(b store.Baseline) string {
	return promotion.SessionLabel(b.Version, b.Commit, Label(b))
}

// History is the noise history of (repo, key) as the gate takes it: its
// stored baselines, newest first, each one session of unchanged code —
// only those measured like the latest (same GPU model and offered load),
// at most HistorySessions, leaving out version except (the baseline being
// compared against; 0 for none). No baseline is an empty history.
func History(ctx context.Context, st Reader, repo, key string, except int) (gate.History, error) {
	hist, err := st.BaselineHistory(ctx, repo, key)
	if err != nil {
		return gate.History{}, fmt.Errorf("noise history of %s %s: %w", repo, key, err)
	}
	if len(hist) == 0 {
		return gate.History{}, nil
	}
	latest, err := Decode(hist[0])
	if err != nil {
		return gate.History{}, fmt.Errorf("noise history of %s %s: %w", repo, key, err)
	}
	return gate.History{Sessions: sessionsLike(hist, hist[0].GPU, latest.Load, except)}, nil
}

// Options is what production judges a check of (repo, key) with: the
// noise history of its baselines other than version against (the one
// compared with; 0 for an interleaved job, which compares with none), and
// the check's look budget as the check row stored it (zero for the first
// look). Pass the result to gate.Compare or gate.ComparePaired and store
// the returned report's Looks back on the check row.
func Options(ctx context.Context, st Reader, repo, key string, against int, looks gate.Looks) (gate.Options, error) {
	h, err := History(ctx, st, repo, key, against)
	if err != nil {
		return gate.Options{}, err
	}
	return gate.Options{History: h, Looks: looks}, nil
}

// Audit is the audit entries that record the plan's row as stored (saved,
// with its ID and time): the promotion, and a lowering with who and why.
func (p Plan) Audit(saved store.Baseline) ([]store.AuditEntry, error) {
	b, meta, prev, worse := saved, p.meta, p.prev, p.worse
	detail, err := json.Marshal(map[string]any{
		"key": b.Key, "version": b.Version, "label": meta.Version, "commit": b.Commit,
		"image_digest": b.ImageDigest, "gpu": b.GPU, "gpu_uuid": b.GPUUUID, "driver": b.Driver,
		"previous_version": prev.Version, "lowered": len(worse) > 0, "reason": meta.Reason,
		"baseline_id": b.ID, "created_at": b.CreatedAt.Format(time.RFC3339Nano),
	})
	if err != nil {
		return nil, fmt.Errorf("audit: encode promotion: %w", err)
	}
	out := []store.AuditEntry{{Actor: meta.By, Action: ActionPromoted, Repo: b.Repo, Detail: detail}}
	if len(worse) == 0 {
		return out, nil
	}
	detail, err = json.Marshal(map[string]any{
		"key": b.Key, "version": b.Version, "label": meta.Version, "previous_version": prev.Version,
		"previous_commit": prev.Commit, "reason": meta.Reason, "worse": worse,
	})
	if err != nil {
		return nil, fmt.Errorf("audit: encode lowering: %w", err)
	}
	return append(out, store.AuditEntry{Actor: meta.By, Action: ActionLowered, Repo: b.Repo, Detail: detail}), nil
}
