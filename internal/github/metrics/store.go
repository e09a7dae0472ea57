package metrics

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// Store wraps st so the queue gauges, job durations and agents' last-seen
// times move with every job and agent call that passes through it: no
// query per scrape. Methods it does not override pass straight through.
func (m *Metrics) Store(st store.Store) store.Store {
	return &instrumentedStore{Store: st, m: m}
}

type instrumentedStore struct {
	store.Store
	m *Metrics
}

func (s *instrumentedStore) Enqueue(ctx context.Context, spec store.JobSpec) (store.Job, error) {
	j, err := s.Store.Enqueue(ctx, spec)
	if err == nil && j.Status == jobstate.Queued {
		s.m.moveJob(j, "", jobstate.Queued)
	}
	return j, err
}

func (s *instrumentedStore) Claim(ctx context.Context, req store.ClaimRequest) (store.Job, error) {
	j, err := s.Store.Claim(ctx, req)
	if err == nil {
		s.m.moveJob(j, jobstate.Queued, jobstate.Running)
	}
	return j, err
}

func (s *instrumentedStore) Finish(ctx context.Context, jobID int64, leaseID string, status jobstate.Status, reason string) (store.Job, error) {
	j, err := s.Store.Finish(ctx, jobID, leaseID, status, reason)
	if err == nil {
		s.m.moveJob(j, jobstate.Running, j.Status)
		s.m.jobFinished(j)
	}
	return j, err
}

func (s *instrumentedStore) ReapExpired(ctx context.Context) ([]store.Job, error) {
	jobs, err := s.Store.ReapExpired(ctx)
	for _, j := range jobs {
		s.m.moveJob(j, jobstate.Running, j.Status)
		if j.Status != jobstate.Queued {
			s.m.jobFinished(j)
		}
	}
	return jobs, err
}

func (s *instrumentedStore) CancelSuperseded(ctx context.Context, repo string, pr int, sha string) (store.Superseded, error) {
	sup, err := s.Store.CancelSuperseded(ctx, repo, pr, sha)
	for _, j := range sup.Cancelled {
		s.m.moveJob(j, jobstate.Queued, jobstate.Cancelled)
	}
	return sup, err
}

func (s *instrumentedStore) CancelPRJobs(ctx context.Context, repo string, pr int, reason string) (store.Superseded, error) {
	sup, err := s.Store.CancelPRJobs(ctx, repo, pr, reason)
	for _, j := range sup.Cancelled {
		s.m.moveJob(j, jobstate.Queued, jobstate.Cancelled)
	}
	return sup, err
}

// ApplyCheck counts the jobs a check run's step queues (its added jobs and
// the base commit's) and the queued ones it cancels.
func (s *instrumentedStore) ApplyCheck(ctx context.Context, ch store.CheckChange) (store.CheckRun, bool, error) {
	var queued []store.Job
	for _, id := range ch.CancelJobs {
		if j, err := s.Store.GetJob(ctx, id); err == nil && j.Status == jobstate.Queued {
			queued = append(queued, j)
		}
	}
	cr, applied, err := s.Store.ApplyCheck(ctx, ch)
	if err != nil || !applied {
		return cr, applied, err
	}
	for _, spec := range ch.AddJobs {
		s.m.moveJob(store.Job{JobSpec: spec}, "", jobstate.Queued)
	}
	if ch.BaseJob != nil {
		s.m.moveJob(store.Job{JobSpec: *ch.BaseJob}, "", jobstate.Queued)
	}
	if ch.ProfileJob != nil {
		s.m.moveJob(store.Job{JobSpec: *ch.ProfileJob}, "", jobstate.Queued)
	}
	for _, j := range queued {
		if now, err := s.Store.GetJob(ctx, j.ID); err == nil && now.Status == jobstate.Cancelled {
			s.m.moveJob(j, jobstate.Queued, jobstate.Cancelled)
		}
	}
	return cr, applied, err
}

func (s *instrumentedStore) CancelJob(ctx context.Context, jobID int64, reason string) (store.Job, error) {
	j, err := s.Store.CancelJob(ctx, jobID, reason)
	// Only a queued job is cancelled at once; a running one is asked to
	// stop and finishes through Finish.
	if err == nil && j.Status == jobstate.Cancelled {
		s.m.moveJob(j, jobstate.Queued, jobstate.Cancelled)
	}
	return j, err
}

func (s *instrumentedStore) AgentByTokenHash(ctx context.Context, tokenHash string) (store.Agent, error) {
	a, err := s.Store.AgentByTokenHash(ctx, tokenHash)
	if err == nil {
		s.m.AgentSeen(a.Name, s.m.now())
	}
	return a, err
}

func (s *instrumentedStore) RegisterAgent(ctx context.Context, reg store.AgentRegistration) (store.Agent, error) {
	a, err := s.Store.RegisterAgent(ctx, reg)
	if err == nil {
		s.m.AgentSeen(a.Name, s.m.now())
	}
	return a, err
}

// moveJob moves j between the queued and running gauges.
func (m *Metrics) moveJob(j store.Job, from, to jobstate.Status) {
	tier, labels := j.Tier, labelKey(j.Labels)
	if from == jobstate.Queued || from == jobstate.Running {
		m.queue.WithLabelValues(string(from), tier, labels).Dec()
	}
	if to == jobstate.Queued || to == jobstate.Running {
		m.queue.WithLabelValues(string(to), tier, labels).Inc()
	}
}

func (m *Metrics) jobFinished(j store.Job) {
	if j.StartedAt.IsZero() || j.FinishedAt.Before(j.StartedAt) {
		return
	}
	m.jobDuration.WithLabelValues(j.Tier, string(j.Status)).Observe(j.FinishedAt.Sub(j.StartedAt).Seconds())
}

// labelKey is the runner labels a job requires, sorted, comma-joined;
// "any" when it requires none.
func labelKey(labels []string) string {
	if len(labels) == 0 {
		return "any"
	}
	l := slices.Clone(labels)
	slices.Sort(l)
	return strings.Join(l, ",")
}

// Lister is what Resync reads: the store's job and agent listings.
type Lister interface {
	ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error)
	ListAgents(ctx context.Context) ([]store.Agent, error)
}

// Resync sets the queue gauges and agents' last-seen times from the
// database. The server calls it once at start-up and then every few
// minutes, so transitions made by other replicas (or by store methods the
// wrapper does not see) are corrected.
func (m *Metrics) Resync(ctx context.Context, st Lister) error {
	counts := map[[3]string]int{}
	for _, status := range []jobstate.Status{jobstate.Queued, jobstate.Running} {
		jobs, err := st.ListJobs(ctx, store.JobFilter{Status: status})
		if err != nil {
			return fmt.Errorf("metrics: list %s jobs: %w", status, err)
		}
		for _, j := range jobs {
			counts[[3]string{string(status), j.Tier, labelKey(j.Labels)}]++
		}
	}
	agents, err := st.ListAgents(ctx)
	if err != nil {
		return fmt.Errorf("metrics: list agents: %w", err)
	}
	m.queue.Reset()
	m.zeroQueue()
	for k, n := range counts {
		m.queue.WithLabelValues(k[0], k[1], k[2]).Set(float64(n))
	}
	for _, a := range agents {
		if !a.LastSeenAt.IsZero() {
			m.AgentSeen(a.Name, a.LastSeenAt)
		}
	}
	return nil
}

// RunResync calls Resync every interval until ctx ends.
func (m *Metrics) RunResync(ctx context.Context, st Lister, every time.Duration, log zerolog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := m.Resync(ctx, st); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg("metrics resync failed; queue gauges keep their last values")
			}
		}
	}
}
