package agentserver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// repoll is how often a waiting claim asks the store again even without
// a wake-up: Notify only hears enqueues on this replica.
const repoll = time.Second

// Body limits: a result carries every request's timings (a few MB for
// thousands of prompts); everything else is small.
const (
	maxSmallBody  = 64 << 10
	maxLogChunk   = 1 << 20
	maxResultBody = 64 << 20
)

// Queue is the part of the store the agent API uses.
type Queue interface {
	RegisterAgent(ctx context.Context, reg store.AgentRegistration) (store.Agent, error)
	AgentByTokenHash(ctx context.Context, tokenHash string) (store.Agent, error)
	Claim(ctx context.Context, req store.ClaimRequest) (store.Job, error)
	Heartbeat(ctx context.Context, jobID int64, leaseID string, extend time.Duration) (bool, error)
	Finish(ctx context.Context, jobID int64, leaseID string, status jobstate.Status, reason string) (store.Job, error)
	GetJob(ctx context.Context, jobID int64) (store.Job, error)
	Notify() <-chan struct{}
	PutResult(ctx context.Context, up store.ResultUpload) (store.Result, bool, error)
	AppendLog(ctx context.Context, jobID int64, leaseID string, offset int64, chunk []byte) (int64, error)
	CountMeasuredRuns(ctx context.Context, jobID int64) (int, error)
}

// SourceFetcher streams a commit's tree as GitHub serves it: a gzip tar
// whose one top directory holds the tree. The server holds the GitHub
// credentials; agents never do. tarball.GitHub is one; an error wrapping
// tarball.ErrNotFound is answered 404.
type SourceFetcher interface {
	Tarball(ctx context.Context, installationID int64, repo, sha string) (io.ReadCloser, error)
}

// Options configures the server.
type Options struct {
	// RegistrationToken is the shared secret agents exchange for their own
	// token; "" turns registration off.
	RegistrationToken string
	Lease             time.Duration // agentapi.DefaultLease when 0
	LongPoll          time.Duration // agentapi.DefaultLongPoll when 0
	// OnJobDone is called after a job is finished (not on a repeated
	// finish): the gate evaluates its results. It runs in the request.
	OnJobDone func(ctx context.Context, job store.Job)
	// Source serves the commits jobs measure (GET /api/v1/jobs/{id}/source);
	// nil answers 501, and agents fail jobs that need a checkout.
	Source SourceFetcher
	// ArtifactFiles and ArtifactRows keep what runners upload
	// (POST /api/v1/jobs/{id}/artifacts); nil answers 501.
	ArtifactFiles ArtifactFiles
	ArtifactRows  ArtifactRows
	Log           zerolog.Logger
	// Now is the clock for lease expiry answers; time.Now when nil.
	Now func() time.Time
	// ResultBudget bounds the result bytes decoded at once
	// (DefaultResultBudget when 0); ArtifactJobBytes bounds one job's
	// artifacts together (twice the per-file cap when 0).
	ResultBudget     int64
	ArtifactJobBytes int64
	// ResultWait is how long an upload waits for room in the budget
	// before it is answered 503 (10 s when 0).
	ResultWait time.Duration
}

type server struct {
	q       Queue
	opts    Options
	mux     *http.ServeMux
	results *resultBudget
}

// NewServer returns the agent API handler. Mount it at the root (its
// routes start with /api/v1/).
func NewServer(q Queue, opts Options) http.Handler {
	if opts.Lease <= 0 {
		opts.Lease = agentapi.DefaultLease
	}
	if opts.LongPoll <= 0 {
		opts.LongPoll = agentapi.DefaultLongPoll
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &server{q: q, opts: opts, mux: http.NewServeMux(), results: newResultBudget(opts.ResultBudget, opts.ResultWait)}
	s.mux.HandleFunc("POST /api/v1/agents/register", s.register)
	s.mux.HandleFunc("POST /api/v1/jobs/claim", s.agent(s.claim))
	s.mux.HandleFunc("POST /api/v1/jobs/{id}/heartbeat", s.agent(s.heartbeat))
	s.mux.HandleFunc("POST /api/v1/jobs/{id}/logs", s.agent(s.logs))
	s.mux.HandleFunc("POST /api/v1/jobs/{id}/results", s.agent(s.putResult))
	s.mux.HandleFunc("POST /api/v1/jobs/{id}/finish", s.agent(s.finish))
	s.mux.HandleFunc("GET /api/v1/jobs/{id}/source", s.agent(s.source))
	s.mux.HandleFunc("POST /api/v1/jobs/{id}/artifacts", s.agent(s.artifacts))
	s.mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no agent API route %s %s: see the agent API reference (POST /api/v1/jobs/claim, …)", r.Method, r.URL.Path))
	})
	return s.mux
}

func (s *server) register(w http.ResponseWriter, r *http.Request) {
	if s.opts.RegistrationToken == "" {
		writeError(w, http.StatusForbidden, "agent registration is disabled on this server: start the server with a registration token, or give the agent an existing --token")
		return
	}
	tok, ok := bearer(r)
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.RegistrationToken)) != 1 {
		writeError(w, http.StatusUnauthorized, "registration needs the server's registration token as 'Authorization: Bearer <token>'")
		return
	}
	var req agentapi.RegisterRequest
	if !decode(w, r, maxSmallBody, &req) {
		return
	}
	if strings.TrimSpace(req.Name) == "" {
		writeError(w, http.StatusBadRequest, "register: name is empty: give the agent a --name")
		return
	}
	if msg := checkCards(req); msg != "" {
		writeError(w, http.StatusBadRequest, "register: "+msg)
		return
	}
	// A proposed token makes a retried registration the same one (see
	// RegisterRequest.Token); the store lets a name move to the token it
	// already holds.
	token := req.Token
	switch {
	case token == "":
		t, err := agentapi.NewToken()
		if err != nil {
			s.internal(w, r, "register agent", err)
			return
		}
		token = t
	case !agentapi.WellFormedToken(token):
		writeError(w, http.StatusBadRequest, "register: the proposed token is not "+agentapi.AgentTokenPrefix+" and 64 lower-case hex digits: propose one from crypto/rand or none")
		return
	}
	reg := store.AgentRegistration{
		Name: req.Name, Labels: withCardLabels(req.Labels, req.Cards), GPUUUIDs: req.GPUUUIDs, Cards: req.Cards,
		TokenHash: store.HashToken(token),
	}
	if req.PreviousToken != "" {
		reg.PreviousTokenHash = store.HashToken(req.PreviousToken)
	}
	a, err := s.q.RegisterAgent(r.Context(), reg)
	if errors.Is(err, store.ErrNameTaken) {
		s.opts.Log.Warn().Str("agent", req.Name).Str("remote", r.RemoteAddr).Msg("registration under a runner name in use refused")
		writeError(w, http.StatusConflict, fmt.Sprintf("register: the runner name %q is in use by a live registration: give this runner another --name, "+
			"or, if it is the same machine and its token is lost, run `perfgate runners revoke %s` on the server first", req.Name, req.Name))
		return
	}
	if err != nil {
		s.internal(w, r, "register agent", err)
		return
	}
	s.opts.Log.Info().Int64("agent_id", a.ID).Str("agent", a.Name).Strs("labels", a.Labels).
		Strs("gpus", a.GPUUUIDs).Msg("agent registered")
	writeJSON(w, http.StatusOK, agentapi.RegisterResponse{AgentID: a.ID, Token: token})
}

type agentHandler func(w http.ResponseWriter, r *http.Request, a store.Agent)

// agent authenticates the per-agent token of every call but register.
func (s *server) agent(h agentHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok {
			writeError(w, http.StatusUnauthorized, "missing 'Authorization: Bearer <agent token>': register the agent with the registration token first")
			return
		}
		a, err := s.q.AgentByTokenHash(r.Context(), store.HashToken(tok))
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusUnauthorized, "unknown agent token: register the agent again")
			return
		}
		if err != nil {
			s.internal(w, r, "authenticate agent", err)
			return
		}
		h(w, r, a)
	}
}

func (s *server) claim(w http.ResponseWriter, r *http.Request, a store.Agent) {
	wait := s.opts.LongPoll
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			// Seconds, finite: converting 1e308 s or NaN to a Duration
			// is undefined, so the number is bounded first (the wait
			// is the long poll's at most anyway).
			if secs, err2 := strconv.ParseFloat(v, 64); err2 == nil && !math.IsNaN(secs) && !math.IsInf(secs, 0) {
				d, err = time.Duration(min(secs, s.opts.LongPoll.Seconds())*float64(time.Second)), nil
			}
		}
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("claim: wait=%q is not a duration such as 10s", v))
			return
		}
		wait = min(d, s.opts.LongPoll)
	}
	ctx := r.Context()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	req := store.ClaimRequest{AgentID: a.ID, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Lease: s.opts.Lease}
	for {
		// Take the wake-up channel before asking, so an enqueue between the
		// ask and the wait is not missed.
		woken := s.q.Notify()
		j, err := s.q.Claim(ctx, req)
		if err == nil {
			s.opts.Log.Info().Int64("job_id", j.ID).Int64("agent_id", a.ID).Str("agent", a.Name).
				Int("attempt", j.Attempts).Str("tier", j.Tier).Msg("job claimed")
			writeJSON(w, http.StatusOK, agentapi.ClaimResponse{
				JobID: j.ID, LeaseID: j.LeaseID, LeaseExpiresAt: j.LeaseExpiresAt,
				LeaseSeconds: s.opts.Lease.Seconds(), Attempt: j.Attempts, Tier: j.Tier,
				Repo: j.Repo, HeadSHA: j.HeadSHA, GPUUUID: j.GPUUUID, Plan: planJSON(j.Config),
			})
			return
		}
		if !errors.Is(err, store.ErrNoJob) {
			if ctx.Err() != nil {
				return
			}
			s.internal(w, r, "claim", err)
			return
		}
		// Jitter spreads many waiting agents' re-polls apart.
		tick := time.NewTimer(repoll/2 + rand.N(repoll))
		select {
		case <-woken:
		case <-tick.C:
		case <-deadline.C:
			tick.Stop()
			w.WriteHeader(http.StatusNoContent)
			return
		case <-ctx.Done():
			tick.Stop()
			return
		}
		tick.Stop()
	}
}

// planJSON keeps the stored snapshot as it is when it is JSON, so a plan
// from a newer server reaches the agent unchanged.
func planJSON(cfg []byte) json.RawMessage {
	if len(cfg) == 0 || !json.Valid(cfg) {
		return json.RawMessage("null")
	}
	return json.RawMessage(cfg)
}

func (s *server) heartbeat(w http.ResponseWriter, r *http.Request, a store.Agent) {
	var req agentapi.HeartbeatRequest
	if !decode(w, r, maxSmallBody, &req) {
		return
	}
	j, ok := s.ownJob(w, r, a, req.LeaseID)
	if !ok {
		return
	}
	id := j.ID
	cancel, err := s.q.Heartbeat(r.Context(), id, req.LeaseID, s.opts.Lease)
	if err != nil {
		s.storeError(w, r, fmt.Sprintf("heartbeat job %d", id), err)
		return
	}
	writeJSON(w, http.StatusOK, agentapi.HeartbeatResponse{Cancel: cancel, LeaseExpiresAt: s.opts.Now().Add(s.opts.Lease).UTC()})
}

func (s *server) logs(w http.ResponseWriter, r *http.Request, a store.Agent) {
	lease := r.URL.Query().Get("lease_id")
	if lease == "" {
		lease = r.Header.Get("X-Lease-Id")
	}
	offset, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if err != nil || offset < 0 {
		writeError(w, http.StatusBadRequest, "logs: ?offset=N (the log length the agent has sent so far) is required")
		return
	}
	chunk, ok := readBody(w, r, maxLogChunk)
	if !ok {
		return
	}
	j, ok := s.ownJob(w, r, a, lease)
	if !ok {
		return
	}
	id := j.ID
	// offset first: near MaxInt64 the sum would wrap below the cap.
	if offset > agentapi.MaxJobLog || offset+int64(len(chunk)) > agentapi.MaxJobLog {
		writeJSONStatus(w, http.StatusRequestEntityTooLarge, agentapi.ErrorBody{Code: agentapi.CodeLogFull,
			Error: fmt.Sprintf("job %d: the log may hold %d bytes per attempt and this chunk would end at %d: stop sending the log", id, agentapi.MaxJobLog, offset+int64(len(chunk)))})
		return
	}
	n, err := s.q.AppendLog(r.Context(), id, lease, offset, chunk)
	var om store.ErrOffsetMismatch
	if errors.As(err, &om) {
		have := om.Have
		writeJSONStatus(w, http.StatusRequestedRangeNotSatisfiable, agentapi.ErrorBody{
			Error:  fmt.Sprintf("log offset %d does not match the stored length %d: resend from %d", offset, have, have),
			Length: &have,
		})
		return
	}
	if err != nil {
		s.storeError(w, r, fmt.Sprintf("append log of job %d", id), err)
		return
	}
	writeJSON(w, http.StatusOK, agentapi.LogResponse{Length: n})
}

// putResult stores one run's result. Before reading the body it finds the
// job, bounds the body by what the job's plan can produce and takes room in
// the server's decoding budget, so no upload (a bug, or a hostile runner)
// can make the server hold more than a well-formed job needs. The lease and
// the owner are checked once the body is read (the lease is in it), with
// the answers the agent acts on (409 abandon, 403 not yours).
func (s *server) putResult(w http.ResponseWriter, r *http.Request, a store.Agent) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("job id %q is not a number", r.PathValue("id")))
		return
	}
	pre, err := s.q.GetJob(r.Context(), id)
	if err != nil {
		s.storeError(w, r, fmt.Sprintf("load job %d", id), err)
		return
	}
	plan, err := agentapi.ParsePlan(pre.Config)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("results of job %d: the job's plan cannot be read (%v), so no run of it can be stored", id, err))
		return
	}
	limit := resultLimit(plan)
	if r.ContentLength > limit {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("results of job %d: %d bytes; the plan's %d requests produce at most %d", id, r.ContentLength, max(plan.Workload.NumPrompts, plan.Warmup), limit))
		return
	}
	weight := limit
	if r.ContentLength > 0 {
		weight = r.ContentLength
	}
	release, err := s.results.take(r.Context(), weight)
	if err != nil {
		busy(w, id)
		return
	}
	defer release()
	var req agentapi.ResultRequest
	if !decode(w, r, limit, &req) {
		return
	}
	j, ok := s.ownJob(w, r, a, req.LeaseID)
	if !ok {
		return
	}
	switch {
	case req.IdempotencyKey == "":
		writeError(w, http.StatusBadRequest, "results: idempotency_key is required so a retried upload stores once")
		return
	case len(req.IdempotencyKey) > agentapi.MaxIdempotencyKey:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("results: idempotency_key is %d bytes: at most %d", len(req.IdempotencyKey), agentapi.MaxIdempotencyKey))
		return
	}
	kind := jobstate.ResultKind(req.Kind)
	if kind == "" {
		kind = jobstate.KindMeasured
	}
	if kind != jobstate.KindMeasured && kind != jobstate.KindWarmup {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("results: kind %q is neither measured nor warmup", req.Kind))
		return
	}
	if msg := checkRun(j, req); msg != "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("results of job %d: %s", id, msg))
		return
	}
	up, err := splitResult(req.Result, plan, string(kind))
	if err != nil {
		writeError(w, http.StatusBadRequest, "results: "+err.Error())
		return
	}
	up.JobID, up.LeaseID, up.IdempotencyKey, up.RunIndex, up.Kind = id, req.LeaseID, req.IdempotencyKey, req.RunIndex, kind
	up.Side, up.Pair = req.Side, req.Pair
	res, created, err := s.q.PutResult(r.Context(), up)
	if errors.Is(err, store.ErrRunStored) {
		writeJSONStatus(w, http.StatusConflict, agentapi.ErrorBody{Code: agentapi.CodeRunStored,
			Error: fmt.Sprintf("job %d: %s run %d already has a result under another idempotency key; a run is uploaded once", id, kind, req.RunIndex)})
		return
	}
	if err != nil {
		s.storeError(w, r, fmt.Sprintf("store result of job %d", id), err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, agentapi.ResultResponse{ResultID: res.ID, Attempt: res.Attempt, Created: created})
}

// checkRun says what is wrong with where an upload places its run in the
// job's plan, or "".
func checkRun(j store.Job, req agentapi.ResultRequest) string {
	plan, err := agentapi.ParsePlan(j.Config)
	if err != nil {
		return fmt.Sprintf("the job's plan cannot be read (%v), so no run of it can be stored", err)
	}
	sched := plan.Schedule()
	if req.RunIndex < 0 || req.RunIndex >= len(sched) {
		return fmt.Sprintf("run_index %d is outside the plan's %d runs (0 to %d)", req.RunIndex, len(sched), len(sched)-1)
	}
	want := sched[req.RunIndex]
	if req.Kind == string(jobstate.KindWarmup) {
		if req.Side != "" && req.Side != agentapi.SideBase && req.Side != agentapi.SideHead {
			return fmt.Sprintf("side %q: want %q, %q or none", req.Side, agentapi.SideBase, agentapi.SideHead)
		}
		return ""
	}
	if req.Side != want.Side || req.Pair != want.Pair {
		if want.Side == "" {
			return fmt.Sprintf("run %d names side %q pair %d, but the plan measures one commit: send neither", req.RunIndex, req.Side, req.Pair)
		}
		return fmt.Sprintf("run %d is the %s run of pair %d in the plan's order, not side %q pair %d", req.RunIndex, want.Side, want.Pair, req.Side, req.Pair)
	}
	return ""
}

// splitResult turns an uploaded result into what the store keeps: a
// summary without the per-request arrays (small, read by the gate), the
// environment, and the whole upload as the samples blob.
func splitResult(raw json.RawMessage, plan agentapi.Plan, kind string) (store.ResultUpload, error) {
	if len(raw) == 0 {
		return store.ResultUpload{}, errors.New("result is missing")
	}
	parsed, err := result.Parse(raw)
	if err != nil {
		// A number the types cannot hold (1e308 as a count, 0.5 as a
		// token length) is named by its path, which the decoder's error
		// does not give inside an array.
		if nerr := checkNumbers(raw); nerr != nil {
			return store.ResultUpload{}, fmt.Errorf("result refused: %w", nerr)
		}
		return store.ResultUpload{}, fmt.Errorf("result is not a benchmark result: %w", err)
	}
	if err := checkResult(parsed); err != nil {
		return store.ResultUpload{}, fmt.Errorf("result refused: %w", err)
	}
	if err := checkPlanned(plan, kind, parsed); err != nil {
		return store.ResultUpload{}, fmt.Errorf("result refused: %w", err)
	}
	// Then every number, wherever it stands, by its path: the per-request
	// arrays, the nested sections, and keys perfgate does not know (the
	// stored upload keeps them).
	if err := checkNumbers(raw); err != nil {
		return store.ResultUpload{}, fmt.Errorf("result refused: %w", err)
	}
	res := *parsed
	var env result.Environment
	sum := res
	sum.InputLens, sum.OutputLens, sum.TTFTs, sum.ITLs, sum.GeneratedTexts, sum.Errors = nil, nil, nil, nil, nil, nil
	if res.Perfgate != nil {
		env = res.Perfgate.Environment
		sec := *res.Perfgate
		sec.E2ELs, sec.TPOTs = nil, nil
		sum.Perfgate = &sec
	}
	summary, err := json.Marshal(sum)
	if err != nil {
		return store.ResultUpload{}, fmt.Errorf("encode summary: %w", err)
	}
	envJSON, err := json.Marshal(env)
	if err != nil {
		return store.ResultUpload{}, fmt.Errorf("encode environment: %w", err)
	}
	return store.ResultUpload{GPUUUID: env.GPUUUID, Summary: summary, Environment: envJSON, Samples: []byte(raw)}, nil
}

func (s *server) finish(w http.ResponseWriter, r *http.Request, a store.Agent) {
	var req agentapi.FinishRequest
	if !decode(w, r, maxSmallBody, &req) {
		return
	}
	status := jobstate.Status(req.Status)
	switch status {
	case jobstate.Succeeded, jobstate.Failed, jobstate.Cancelled:
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("finish: status %q: want succeeded, failed or cancelled", req.Status))
		return
	}
	before, ok := s.ownJob(w, r, a, req.LeaseID)
	if !ok {
		return
	}
	id := before.ID
	repeated := before.Status == status && before.LeaseID == req.LeaseID
	if status == jobstate.Succeeded && !repeated {
		if msg, err := s.allRuns(r.Context(), before); err != nil {
			s.internal(w, r, fmt.Sprintf("count the runs of job %d", id), err)
			return
		} else if msg != "" {
			writeError(w, http.StatusConflict, fmt.Sprintf("finish job %d succeeded: %s; upload the missing runs, or finish it failed with the reason", id, msg))
			return
		}
	}
	j, err := s.q.Finish(r.Context(), id, req.LeaseID, status, req.Reason)
	if err != nil {
		s.storeError(w, r, fmt.Sprintf("finish job %d", id), err)
		return
	}
	if !repeated {
		s.opts.Log.Info().Int64("job_id", j.ID).Int64("agent_id", a.ID).Str("status", string(j.Status)).
			Str("reason", j.FailureReason).Int("attempt", j.Attempts).Msg("job finished")
		if s.opts.OnJobDone != nil {
			s.opts.OnJobDone(r.Context(), j)
		}
	}
	writeJSON(w, http.StatusOK, agentapi.FinishResponse{JobID: j.ID, Status: string(j.Status), Repeated: repeated})
}

// allRuns says what a job finishing succeeded lacks of its plan, or "".
func (s *server) allRuns(ctx context.Context, j store.Job) (string, error) {
	plan, err := agentapi.ParsePlan(j.Config)
	if err != nil {
		return "", nil // a job without a readable plan was refused its results already
	}
	n, err := s.q.CountMeasuredRuns(ctx, j.ID)
	if err != nil {
		return "", err
	}
	return missingRuns(plan, n), nil
}

// ownJob parses the job id and refuses a job whose current lease is
// another agent's (403) or whose lease is no longer the one presented
// (409: the agent must abandon it). The store checks the lease again in
// the write itself; this check only makes the answers precise.
func (s *server) ownJob(w http.ResponseWriter, r *http.Request, a store.Agent, lease string) (store.Job, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("job id %q is not a number", r.PathValue("id")))
		return store.Job{}, false
	}
	if lease == "" {
		writeError(w, http.StatusBadRequest, "lease_id is required: send the lease id the claim returned")
		return store.Job{}, false
	}
	j, err := s.q.GetJob(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no job %d", id))
		return store.Job{}, false
	}
	if err != nil {
		s.internal(w, r, fmt.Sprintf("load job %d", id), err)
		return store.Job{}, false
	}
	if j.LeaseID != lease {
		writeError(w, http.StatusConflict, fmt.Sprintf("job %d: lease %s is no longer current (reaped, re-queued or cancelled): abandon the job", id, lease))
		return store.Job{}, false
	}
	if j.AgentID != a.ID {
		s.opts.Log.Warn().Int64("job_id", id).Int64("agent_id", a.ID).Int64("owner", j.AgentID).Msg("agent used another agent's lease")
		writeError(w, http.StatusForbidden, fmt.Sprintf("job %d belongs to another agent", id))
		return store.Job{}, false
	}
	return j, true
}

func (s *server) storeError(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		writeError(w, http.StatusConflict, what+": the lease is no longer current (reaped, re-queued, cancelled or finished): abandon the job")
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, what+": not found")
	default:
		s.internal(w, r, what, err)
	}
}

func (s *server) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.opts.Log.Error().Err(err).Str("path", r.URL.Path).Msg(what)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, what+" failed on the server: retry later")
}

// RunReaper takes back expired leases every interval until ctx ends: a
// lost agent's job is queued again or, out of attempts, failed; onDone
// (may be nil) gets every job the reaper finished.
func RunReaper(ctx context.Context, st interface {
	ReapExpired(ctx context.Context) ([]store.Job, error)
}, interval time.Duration, onDone func(ctx context.Context, job store.Job), log zerolog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		jobs, err := st.ReapExpired(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Error().Err(err).Msg("reap expired leases")
			}
			continue
		}
		for _, j := range jobs {
			log.Warn().Int64("job_id", j.ID).Str("status", string(j.Status)).Int("attempts", j.Attempts).
				Str("reason", j.FailureReason).Msg("lease expired: agent lost")
			if j.Status != jobstate.Queued && onDone != nil {
				onDone(ctx, j)
			}
		}
	}
}

// AgentExpiry is how long a registration may go unseen (no claim, no
// call) before it expires: its token stops working and its name is free.
// A runner that is only switched off for a while re-registers under its
// name when it comes back.
const AgentExpiry = 14 * 24 * time.Hour

// RunAgentExpiry expires stale registrations every interval until ctx ends.
func RunAgentExpiry(ctx context.Context, st interface {
	ExpireAgents(ctx context.Context, idleBefore time.Time) ([]string, error)
}, interval time.Duration, now func() time.Time, log zerolog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		names, err := st.ExpireAgents(ctx, now().Add(-AgentExpiry))
		if err != nil && ctx.Err() == nil {
			log.Error().Err(err).Msg("expire stale runner registrations")
		}
		if len(names) > 0 {
			log.Info().Strs("runners", names).Dur("unseen_for", AgentExpiry).Msg("runner registrations expired")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	tok = strings.TrimSpace(tok)
	return tok, ok && tok != ""
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes: send smaller chunks", limit))
		return nil, false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "read request body: "+err.Error())
		return nil, false
	}
	return b, true
}

func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	b, ok := readBody(w, r, limit)
	if !ok {
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		writeError(w, http.StatusBadRequest, "request body is not the expected JSON: "+err.Error())
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSONStatus(w, status, agentapi.ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) { writeJSONStatus(w, status, v) }

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
