// Package store is perfgate's database: the durable job queue the runner
// agents claim from, and everything the GitHub app and the gate remember —
// agents, results and logs, baselines, check runs, appeals, webhook
// deliveries, the audit log and the nightly trend.
//
// One Store interface has two backends behind Open: embedded SQLite (the
// default: a file path, "sqlite://path" or "file:…") and PostgreSQL
// ("postgres://…" or "postgresql://…", for several server replicas). Both run
// their versioned schema migrations on Open.
//
// Fencing: every Claim hands out a fresh random lease ID. Heartbeat, Finish,
// PutResult and AppendLog must present the job's current lease ID and are
// refused with ErrLeaseLost otherwise, so an agent that lost its job (lease
// reaped, job re-claimed elsewhere, job cancelled) cannot write into it. A
// lease stays current until ReapExpired revokes it; the server runs the
// reaper on a timer (every lease/4 is a sound period).
//
// Time comes from the clock given by WithClock, never from the database, so
// tests can move it by 48 hours.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store/journal"
	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// Store is the whole database. Consumers declare their own smaller
// interfaces with the methods they use.
type Store interface {
	// Agents.
	RegisterAgent(ctx context.Context, reg AgentRegistration) (Agent, error)
	RevokeAgent(ctx context.Context, name string) (Agent, error)
	ExpireAgents(ctx context.Context, idleBefore time.Time) ([]string, error)
	AgentByTokenHash(ctx context.Context, tokenHash string) (Agent, error)
	ListAgents(ctx context.Context) ([]Agent, error)
	// SetAgentDrained drains a runner (it finishes its job and claims no
	// more) or puts it back to work.
	SetAgentDrained(ctx context.Context, name string, drained bool) (Agent, error)

	// Queue.
	Enqueue(ctx context.Context, spec JobSpec) (Job, error)
	Claim(ctx context.Context, req ClaimRequest) (Job, error)
	Heartbeat(ctx context.Context, jobID int64, leaseID string, extend time.Duration) (cancelRequested bool, err error)
	Finish(ctx context.Context, jobID int64, leaseID string, status jobstate.Status, reason string) (Job, error)
	ReapExpired(ctx context.Context) ([]Job, error)
	CancelSuperseded(ctx context.Context, repo string, pr int, newHeadSHA string) (Superseded, error)
	CancelPRJobs(ctx context.Context, repo string, pr int, reason string) (Superseded, error)
	CancelJob(ctx context.Context, jobID int64, reason string) (Job, error)
	GetJob(ctx context.Context, jobID int64) (Job, error)
	ListJobs(ctx context.Context, f JobFilter) ([]Job, error)
	Notify() <-chan struct{}

	// The fleet's GPU time (fleet.go): every attempt, and usage by
	// repository, tier and week.
	ListQueue(ctx context.Context) ([]QueueEntry, error)
	Arrivals(ctx context.Context, since, recent time.Time) ([]fleet.Arrived, error)
	RunningQueuedChecks(ctx context.Context) ([]int64, error)
	ListAttempts(ctx context.Context, f AttemptFilter) ([]Attempt, error)
	Usage(ctx context.Context, f UsageFilter) ([]fleet.UsageRow, error)

	// Judging: finished jobs wait until a worker has judged them.
	ClaimFinishedJobs(ctx context.Context, limit int, lease time.Duration) ([]JudgeClaim, error)
	JobJudged(ctx context.Context, jobID int64, leaseID string) error
	RetryJudge(ctx context.Context, jobID int64, leaseID string, at time.Time) error

	// Results and logs.
	PutResult(ctx context.Context, up ResultUpload) (res Result, created bool, err error)
	ListResults(ctx context.Context, jobID int64) ([]Result, error)
	CountMeasuredRuns(ctx context.Context, jobID int64) (int, error)
	AppendLog(ctx context.Context, jobID int64, leaseID string, offset int64, chunk []byte) (length int64, err error)
	ReadLog(ctx context.Context, jobID int64, attempt int) ([]byte, error)

	// Baselines.
	PutBaseline(ctx context.Context, b Baseline) (Baseline, error)
	GetBaseline(ctx context.Context, id int64) (Baseline, error)
	LatestBaseline(ctx context.Context, repo, key string) (Baseline, error)
	ListBaselines(ctx context.Context, repo string) ([]Baseline, error)
	BaselineHistory(ctx context.Context, repo, key string) ([]Baseline, error)

	// Check runs.
	PutCheckRun(ctx context.Context, c CheckRun) (CheckRun, error)
	GetCheckRun(ctx context.Context, repo, headSHA, tier string) (CheckRun, error)
	CheckRunByGitHubID(ctx context.Context, githubID int64) (CheckRun, error)
	ListCheckRuns(ctx context.Context, repo string, pr int) ([]CheckRun, error)
	TransitionCheckRun(ctx context.Context, id int64, from string, to CheckTransition) (bool, error)
	DueCheckRuns(ctx context.Context) ([]CheckRun, error)
	GetCheckRunByID(ctx context.Context, id int64) (CheckRun, error)
	ListOpenCheckRuns(ctx context.Context) ([]CheckRun, error)
	ApplyCheck(ctx context.Context, ch CheckChange) (CheckRun, bool, error)
	MarkCheckCreateAttempt(ctx context.Context, id int64, generation int) error
	CheckSynced(ctx context.Context, id int64, generation int, githubID int64, version int) (current bool, err error)

	// Outbox: GitHub writes until GitHub confirms them.
	PutEffect(ctx context.Context, e Effect) (created bool, err error)
	ClaimEffects(ctx context.Context, limit int, lease time.Duration) ([]Effect, error)
	CompleteEffect(ctx context.Context, id int64, leaseID string, version int) error
	RetryEffect(ctx context.Context, id int64, leaseID string, at time.Time, reason string) error
	FailEffect(ctx context.Context, id int64, leaseID string, version int, reason string) error
	ListEffects(ctx context.Context, f EffectFilter) ([]Effect, error)
	GetEffect(ctx context.Context, key string) (Effect, error)
	CountEffects(ctx context.Context) (map[EffectStatus]int, error)

	// Appeals.
	CreateAppeal(ctx context.Context, a Appeal) (Appeal, error)
	GetAppeal(ctx context.Context, id int64) (Appeal, error)
	DecideAppeal(ctx context.Context, id int64, status AppealStatus, decidedBy string) (Appeal, error)
	ListAppeals(ctx context.Context, repo string, pr int) ([]Appeal, error)

	// Approvals: which fork commits may run on the runners.
	ApproveCommit(ctx context.Context, a Approval) (Approval, bool, error)
	GetApproval(ctx context.Context, repo, sha string) (Approval, error)

	// Webhook inbox.
	AcceptDelivery(ctx context.Context, id, event string, payload []byte, order DeliveryOrder) (Accepted, error)
	ClaimDeliveries(ctx context.Context, limit int, lease time.Duration) ([]Delivery, error)
	PlaceDeliveries(ctx context.Context, limit int, place func(event string, payload []byte) DeliveryOrder) (int, error)
	// ReclaimLeases frees the inbox, outbox and judge leases this
	// instance (WithInstance) held before it restarted.
	ReclaimLeases(ctx context.Context) (Reclaimed, error)
	CompleteDelivery(ctx context.Context, id, leaseID string) error
	RetryDelivery(ctx context.Context, id, leaseID string, at time.Time, reason string) error
	FailDelivery(ctx context.Context, id, leaseID, reason string) error
	GetDelivery(ctx context.Context, id string) (Delivery, error)
	CountDeliveries(ctx context.Context) (map[DeliveryStatus]int, error)
	// FoldJournal stores the door's journal records (ackjournal.go) and
	// this instance's journal position in one transaction; JournalPos
	// reads the position back.
	FoldJournal(ctx context.Context, recs []journal.Record, next journal.Pos) (FoldCounts, error)
	JournalPos(ctx context.Context) (journal.Pos, error)

	// Audit log, nightly trend.
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	ListAudit(ctx context.Context, repo string, pr int) ([]AuditEntry, error)
	PutTrend(ctx context.Context, p TrendPoint) error
	ListTrend(ctx context.Context, repo, key, metric string, since time.Time) ([]TrendPoint, error)

	// The dashboard's reads and the change-point records (dashboard.go).
	Dashboard
	// The knowledge base of regressions (kb.go) and running bisects (bisects.go).
	KnowledgeBase
	Bisects
	// Profile artifacts runners upload (artifacts.go).
	Artifacts
	// Their bytes, when the database keeps them (artifact_blobs.go).
	ArtifactBlobs
	// Periodic jobs run once across replicas (singletons.go).
	Singletons
	// The dashboard's sign-in sessions (sessions.go).
	Sessions

	// Shared reports whether several processes (server replicas) may use
	// the database at once (PostgreSQL): what they must all see lives in
	// it, and the singletons' leases are taken in it.
	Shared() bool

	Close() error
}

// Errors callers branch on.
var (
	// ErrNotFound: no row with that key.
	ErrNotFound = errors.New("store: not found")
	// ErrNameTaken: RegisterAgent under a name another live registration
	// holds, without its token.
	ErrNameTaken = errors.New("store: runner name in use")
	// ErrNoJob: Claim found no queued job this agent can run.
	ErrNoJob = errors.New("store: no job available")
	// ErrLeaseLost: the lease ID is not the job's current lease (reaped,
	// re-claimed, cancelled or finished). The agent API answers 409 and the
	// agent abandons the job.
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrConflict: a uniqueness rule or state precondition failed (a baseline
	// version already taken, an appeal already decided).
	ErrConflict = errors.New("store: conflict")
	// ErrRunStored: PutResult got a second result, under a new idempotency
	// key, for a run of the attempt that already has one. It wraps
	// ErrConflict.
	ErrRunStored = fmt.Errorf("%w: the run already has a result", ErrConflict)
)

// ErrOffsetMismatch is returned by AppendLog when the chunk's offset is not
// the stored log length; Have is that length, so the agent rewinds and
// resends from there (as GitLab's 416 does). Match it with
// `var om store.ErrOffsetMismatch; errors.As(err, &om)`.
type ErrOffsetMismatch struct {
	Have int64
}

func (e ErrOffsetMismatch) Error() string {
	return fmt.Sprintf("store: log offset mismatch: have %d bytes", e.Have)
}

// Option configures Open.
type Option func(*options)

type options struct {
	existing bool
	instance string
	now      func() time.Time
	maxConns int
	shares   fleet.Shares
}

// ErrNoDatabase is Open's answer, under Existing, for a SQLite file that
// is not there.
var ErrNoDatabase = errors.New("no perfgate database")

// Existing makes Open refuse a SQLite file that does not exist instead of
// creating an empty one: the operator commands read the server's store,
// and an empty one in the wrong place would answer "nothing here".
func Existing() Option {
	return func(o *options) { o.existing = true }
}

// WithInstance names this server process (a stable name: the host, or
// PERFGATE_INSTANCE). The leases it takes on deliveries, outbox writes
// and judgements carry the name, so after a crash the restarted process
// frees its own leases at once (ReclaimLeases) instead of waiting minutes
// for them to lapse. Two live processes must not share a name.
func WithInstance(id string) Option {
	return func(o *options) { o.instance = id }
}

// WithClock makes the store read time from now instead of time.Now. Every
// stored time (leases, deadlines, created/finished) comes from it.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithMaxConns caps the PostgreSQL connection pool (default 16). SQLite
// always writes through one connection.
func WithMaxConns(n int) Option {
	return func(o *options) { o.maxConns = n }
}

// WithFairShare sets who GPU time is charged to and each tenant's weight
// (default: every repository its own tenant, weight 1). Every replica
// should be given the same shares.
func WithFairShare(s fleet.Shares) Option {
	return func(o *options) { o.shares = s }
}

// Open connects to dsn, applies pending migrations and returns the store.
// dsn is a file path, "sqlite://path" or "file:path?…" for SQLite, or
// "postgres://…"/"postgresql://…" for PostgreSQL.
func Open(ctx context.Context, dsn string, opts ...Option) (Store, error) {
	o := options{now: time.Now, maxConns: 16}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn, o)
	case dsn == "":
		return nil, errors.New("open store: empty DSN: give a SQLite file path or a postgres:// URL")
	default:
		return openSQLite(ctx, dsn, o)
	}
}

// Reclaimed counts the leases ReclaimLeases freed.
type Reclaimed struct {
	Deliveries, Effects, Judgements int64
}

// HashToken is the one way an agent token is turned into what the store
// keeps: hex SHA-256. The token itself is never stored.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// AgentRegistration is what an agent presents when it registers.
type AgentRegistration struct {
	Name     string
	Labels   []string
	GPUUUIDs []string
	// Cards are the GPUs the agent reported (model, memory, driver).
	Cards     []fleet.Card
	TokenHash string // HashToken of the agent's new token
	// PreviousTokenHash is HashToken of the token the name holds now: a
	// second registration under a name in use must present it (the same
	// runner re-registering), else ErrNameTaken. A revoked or expired
	// registration frees its name.
	PreviousTokenHash string
}

// Agent is a registered runner.
type Agent struct {
	ID         int64
	Name       string
	Labels     []string
	GPUUUIDs   []string
	TokenHash  string
	CreatedAt  time.Time
	LastSeenAt time.Time
	Cards      []fleet.Card
	// Drained: the runner finishes the job it has and claims no more.
	Drained   bool
	DrainedAt time.Time
}

// DefaultMaxAttempts is used when a JobSpec leaves MaxAttempts at zero.
const DefaultMaxAttempts = 3

// JobSpec is what the app enqueues.
type JobSpec struct {
	Tier           string // "quick", "merge", "nightly"
	Kind           string // trigger: "pull_request", "merge_group", "retest", "nightly", …
	Repo           string // owner/name
	InstallationID int64
	PRNumber       int
	HeadSHA        string
	BaseSHA        string
	Config         []byte   // config snapshot the agent runs
	Labels         []string // required runner labels: all must be on the agent
	GPUUUID        string   // when set, only an agent with this GPU may claim
	MaxAttempts    int      // 0 → DefaultMaxAttempts
	CheckRunID     int64    // the check run row (CheckRun.ID) this job reports to, 0 if none; ApplyCheck sets it
}

// Job is a queued, running or finished job.
type Job struct {
	ID int64
	JobSpec
	Status jobstate.Status
	// Attempts counts claims: 1 while the first attempt runs. Logs and
	// results are kept per attempt.
	Attempts        int
	FailureReason   string
	LeaseID         string
	LeaseExpiresAt  time.Time
	AgentID         int64
	CancelRequested bool
	CreatedAt       time.Time
	StartedAt       time.Time // start of the latest attempt
	FinishedAt      time.Time
	// JudgedAt is when a worker judged the finished job (zero: not yet).
	JudgedAt time.Time
	// Queue order (see fleet.go): the priority class, the tenant charged,
	// the fair-share start tag and its cost, and the queue sequence (the
	// id of the job whose place it holds).
	Priority int
	ShareKey string
	VTag     float64
	VCost    float64
	VWeight  float64
	Seq      int64
	// Pool names the runners it can go to (fleet.Pool of its labels and
	// card pin).
	Pool string
}

// JudgeClaim is a finished job leased to one judging worker.
type JudgeClaim struct {
	Job
	LeaseID string
	// Attempt counts the claims to judge this job, this one included.
	Attempt int
}

// ClaimRequest asks for the first queued job in claim order (priority
// class, then fair share, then queue order) the agent can run: the job's
// labels are a subset of Labels and its GPU pin, if any, is in GPUUUIDs.
// A drained agent (AgentID) gets none.
type ClaimRequest struct {
	AgentID  int64
	Labels   []string
	GPUUUIDs []string
	Lease    time.Duration
}

// JobFilter selects jobs for ListJobs; zero fields match everything.
type JobFilter struct {
	Repo     string
	PRNumber int
	HeadSHA  string
	Tier     string
	Status   jobstate.Status
	Limit    int  // 0 → no limit
	Newest   bool // by id, newest first (with Limit: the latest Limit jobs)
	// ClaimOrder lists in the order claims take jobs (priority class,
	// fair-share tag, queue sequence) instead of by id.
	ClaimOrder bool
}

// Superseded reports what CancelSuperseded did: queued jobs it cancelled and
// running jobs it asked to stop (their next heartbeat says cancel).
type Superseded struct {
	Cancelled []Job
	Signalled []Job
}

// ResultUpload is one run's result as the agent uploads it.
type ResultUpload struct {
	JobID          int64
	LeaseID        string
	IdempotencyKey string // a retry with the same key stores once
	RunIndex       int
	Kind           jobstate.ResultKind
	// Side is the commit an interleaved job's run measured, "base" or
	// "head"; "" in a job that measures one commit. Pair is the index of
	// the base/head pair the run belongs to.
	Side        string
	Pair        int
	GPUUUID     string          // the card the run used, for pinning queries
	Summary     json.RawMessage // result.Result JSON without per-request arrays
	Environment json.RawMessage // GPU/driver/engine metadata
	Samples     []byte          // per-request samples blob (e.g. the full result JSON)
}

// Result is a stored run result. JSON fields come back semantically equal
// to what was put; PostgreSQL (jsonb) may change whitespace and key order.
type Result struct {
	ID             int64
	JobID          int64
	Attempt        int
	IdempotencyKey string
	RunIndex       int
	Kind           jobstate.ResultKind
	Side           string // "base", "head" or "" (see ResultUpload)
	Pair           int
	GPUUUID        string
	Summary        json.RawMessage
	Environment    json.RawMessage
	Samples        []byte
	CreatedAt      time.Time
}

// Baseline is one promoted baseline version for (Repo, Key).
type Baseline struct {
	ID          int64
	Repo        string
	Key         string // matrix entry, e.g. "llama-8b-tp8"
	Version     int    // 0 on Put → next version for (Repo, Key)
	Commit      string
	ImageDigest string
	GPU         string // card model name
	GPUUUID     string // the card it was measured on, for pinning
	Driver      string
	LoadParams  json.RawMessage
	Runs        json.RawMessage
	PromotedBy  string
	Reason      string
	AllowLower  bool
	CreatedAt   time.Time
}

// Check run states the app moves through.
const (
	CheckQueued       = "queued"
	CheckInProgress   = "in_progress"
	CheckPassed       = "passed"
	CheckWarned       = "warned"
	CheckEscalated    = "escalated"
	CheckInconclusive = "inconclusive"
	// CheckNeedsAck: inconclusive on a tier that holds it (action
	// required) until a maintainer acknowledges it or more runs decide.
	CheckNeedsAck = "needs_ack"
	CheckAccepted = "accepted"
	CheckSkipped  = "skipped"
	CheckErrored  = "errored"
	// CheckSuperseded: a newer push replaced the commit before it was judged.
	CheckSuperseded = "superseded"
	// CheckClosed: the pull request was closed before the check ended.
	CheckClosed = "closed"
	// CheckWaiting: a fork's commit waits for an approval.
	CheckWaiting = "waiting"
	// CheckConfigError: .github/perfgate.yml is broken.
	CheckConfigError = "config_error"
	// CheckNotConfigured: the repository has no .github/perfgate.yml.
	CheckNotConfigured = "not_configured"
)

// CheckRun links one tier's GitHub check run on one head SHA to its jobs and
// verdict. A new push has a new SHA and so its own row and deadline.
type CheckRun struct {
	ID             int64
	Repo           string
	HeadSHA        string
	Tier           string
	PRNumber       int
	InstallationID int64
	GitHubID       int64 // GitHub's check run ID
	JobIDs         []int64
	State          string
	Verdict        json.RawMessage
	Deadline       time.Time // escalation deadline; zero = none
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// Generation counts the GitHub check runs this row reported to; a
	// retest starts a new one (GitHubID back to 0 until it is created).
	Generation int
	// Desired is what GitHub should show; the outbox sends it until
	// SyncedVersion reaches DesiredVersion.
	Desired         *CheckOutput
	DesiredVersion  int
	SyncedVersion   int
	CreateAttempted bool
	// RequestKey is the delivery (or other request) that last asked for a
	// run of this row, so a retried webhook does not ask twice.
	RequestKey string
}

// CheckOutput is the state a GitHub check run should be in.
type CheckOutput struct {
	Name       string        `json:"name"`
	Status     string        `json:"status"` // queued, in_progress, completed
	Conclusion string        `json:"conclusion,omitempty"`
	Title      string        `json:"title,omitempty"`
	Summary    string        `json:"summary,omitempty"`
	Text       string        `json:"text,omitempty"`
	Actions    []CheckAction `json:"actions,omitempty"`
	DetailsURL string        `json:"details_url,omitempty"`
	// Annotations are sent with this output only (GitHub appends them).
	Annotations []check.Annotation `json:"annotations,omitempty"`
}

// CheckAction is a button on a check run.
type CheckAction struct {
	Label       string `json:"label"`
	Description string `json:"description"`
	Identifier  string `json:"identifier"`
}

// CheckChange is one step of a check run row, applied atomically by
// ApplyCheck.
type CheckChange struct {
	// ID is the row to change; 0 creates the row for (Repo, HeadSHA, Tier).
	ID                  int64
	Repo, HeadSHA, Tier string
	// PRNumber and InstallationID, when not zero, are written too.
	PRNumber       int
	InstallationID int64
	// From and FromGeneration are what the row must still be (with ID set).
	From           string
	FromGeneration int
	// State and Deadline are the new values (a zero Deadline clears it).
	State    string
	Deadline time.Time
	Verdict  json.RawMessage // nil keeps the stored one
	// JobIDs, when not nil, replaces the row's jobs; AddJobs are enqueued
	// and appended.
	JobIDs  []int64
	AddJobs []JobSpec
	// CancelJobs are cancelled (queued) or asked to stop (running).
	CancelJobs   []int64
	CancelReason string
	// NewGeneration makes the row report to a new GitHub check run; the
	// old one, if open on GitHub, is concluded as CancelOld says.
	NewGeneration bool
	CancelOld     *CheckCancelBody
	// Desired, when set, is the new state for GitHub (synced by the outbox).
	Desired *CheckOutput
	// Effects are further GitHub writes (comments); Audit, log entries.
	Effects []Effect
	Audit   []AuditEntry
	// RequestKey, when set, is recorded (see CheckRun.RequestKey).
	RequestKey string
	// BaseJob, when set, is the base commit's job measured for the row
	// because no baseline was stored: enqueued with the row's ID as its
	// CheckRunID but not one of the row's jobs, and its ID written into
	// the verdict document as "baseline_job" (what the dispatcher's
	// document and reused_baseline read it as).
	BaseJob *JobSpec
	// ProfileJob, when set, is a profiling pass a regression verdict
	// queues (profile.on_regression): enqueued as given, in the same
	// transaction, and not one of the row's jobs (the row does not wait
	// for it; its end goes to the findings).
	ProfileJob *JobSpec
	// Baselines are promoted with the step, under PutBaseline's rule with
	// an explicit Version: a version already taken means another
	// promotion landed since the caller read the history it checked the
	// runs against, so nothing is written and applied is false (the
	// caller re-reads and decides again).
	Baselines []NewBaseline
	// Trends are trend points stored with the step (PutTrend's rule: the
	// same day's value is replaced).
	Trends []TrendPoint
}

// NewBaseline is a baseline a check's step promotes (CheckChange.Baselines)
// and the audit entries that record it.
type NewBaseline struct {
	Baseline Baseline
	// Audit, when set, makes the entries from the row as stored (its ID
	// and time); they are written in the same transaction.
	Audit func(stored Baseline) ([]AuditEntry, error)
}

// CheckTransition is the new state TransitionCheckRun writes. A nil Verdict
// keeps the stored one; a zero Deadline clears it.
type CheckTransition struct {
	State    string
	Verdict  json.RawMessage
	Deadline time.Time
}

// AppealStatus is an appeal's state.
type AppealStatus string

// Appeal states.
const (
	AppealOpen     AppealStatus = "open"
	AppealAccepted AppealStatus = "accepted"
	AppealRejected AppealStatus = "rejected"
)

// Appeal is a `/perf appeal` against a regression verdict.
type Appeal struct {
	ID        int64
	Repo      string
	PRNumber  int
	HeadSHA   string
	Author    string
	Reason    string
	Status    AppealStatus
	DecidedBy string
	CreatedAt time.Time
	DecidedAt time.Time
}

// Approval is someone's approval to run one commit of a fork's pull
// request on the runners.
type Approval struct {
	Repo      string
	HeadSHA   string // the full SHA approved; a new push needs a new approval
	PRNumber  int
	By        string // GitHub login
	Role      string // the approver's role when approving (write, maintain, admin)
	Via       string // how: "/perf approve", the Approve button, an approving review, a label
	CreatedAt time.Time
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	ID        int64
	Actor     string // GitHub login, agent name, or "perfgate"
	Action    string // e.g. "job.requeued", "appeal.accepted"
	Repo      string
	PRNumber  int
	Detail    json.RawMessage
	CreatedAt time.Time
}

// TrendPoint is one nightly measurement: one metric of one matrix entry on
// one day. Putting the same (Repo, Key, Metric, Date) again replaces it.
type TrendPoint struct {
	Repo   string
	Key    string
	Metric string // e.g. "output_throughput"
	Date   time.Time
	Value  float64
	JobID  int64
}
