// Package completion takes finished jobs from the queue and hands each to
// the consumer of its kind: a check run's jobs to the check-run judge, a
// bisect's measurements to the bisect, a profiling pass to the profile
// findings. A job waits in the store until its consumer has taken it; a
// consumer that fails is called again with backoff, and one that keeps
// failing is asked to give the job up (a check concludes saying why), so no
// job is lost to a crash between its finish and its consumer.
package completion

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/backoff"
	"github.com/perfgate/perfgate/internal/store"
)

// Queue is the part of the store the router uses: the finished jobs not yet
// taken, leased to one router at a time.
type Queue interface {
	ClaimFinishedJobs(ctx context.Context, limit int, lease time.Duration) ([]store.JudgeClaim, error)
	RetryJudge(ctx context.Context, jobID int64, leaseID string, at time.Time) error
	JobJudged(ctx context.Context, jobID int64, leaseID string) error
}

// Consumer takes the finished jobs of its kinds, cancelled ones too (it
// decides what a cancelled job means). An error is retried with backoff.
type Consumer func(ctx context.Context, job store.Job) error

// Abandoner is told that a job its consumer kept failing on is given up,
// with the last error; the job counts as taken once it returns nil.
// Optional: without one the job is given up with a log line.
type Abandoner func(ctx context.Context, job store.Job, cause error) error

// Lease bounds one consumer call (the gate, a store write, perhaps one
// GitHub read); another replica takes the job over after it.
const Lease = 2 * time.Minute

// Options configure a Router.
type Options struct {
	Queue Queue
	// Policy spaces the calls for a job whose consumer failed; after its
	// MaxAttempts the job is given up. Default: 1 s doubling to 2 minutes,
	// 8 attempts.
	Policy backoff.Policy
	// Poll is how often an idle router looks for finished jobs (1 s).
	Poll time.Duration
	Now  func() time.Time
	Log  zerolog.Logger
}

// Router hands finished jobs to their consumers.
type Router struct {
	o        Options
	wake     chan struct{}
	mu       sync.RWMutex
	kinds    map[string]route
	fallback route
}

type route struct {
	take    Consumer
	abandon Abandoner
}

// New builds a Router; route the kinds before Run.
func New(o Options) *Router {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Policy.Base <= 0 {
		o.Policy = backoff.Policy{Base: time.Second, Max: 2 * time.Minute, MaxAttempts: 8}
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return &Router{o: o, wake: make(chan struct{}, 1), kinds: map[string]route{}}
}

// Route sends finished jobs of kind to take (abandon may be nil).
func (r *Router) Route(kind string, take Consumer, abandon Abandoner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[kind] = route{take, abandon}
}

// Otherwise sends the jobs of every kind not routed to take (the check-run
// judge: a check's jobs have the kinds of their triggers).
func (r *Router) Otherwise(take Consumer, abandon Abandoner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fallback = route{take, abandon}
}

// Wake makes an idle router look for finished jobs now.
func (r *Router) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run hands over finished jobs until ctx ends.
func (r *Router) Run(ctx context.Context) {
	t := time.NewTicker(r.o.Poll)
	defer t.Stop()
	for {
		for {
			n, err := r.Pass(ctx)
			if err != nil && ctx.Err() == nil {
				r.o.Log.Error().Err(err).Msg("finished-jobs pass")
			}
			if n == 0 || err != nil || ctx.Err() != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-t.C:
		}
	}
}

// Pass hands over a batch of finished jobs and returns how many it
// claimed.
func (r *Router) Pass(ctx context.Context) (int, error) {
	claims, err := r.o.Queue.ClaimFinishedJobs(ctx, 16, Lease)
	if err != nil {
		return 0, err
	}
	for _, c := range claims {
		r.take(ctx, c)
	}
	return len(claims), nil
}

func (r *Router) routeOf(kind string) route {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if rt, ok := r.kinds[kind]; ok {
		return rt
	}
	return r.fallback
}

func (r *Router) take(ctx context.Context, c store.JudgeClaim) {
	job := c.Job
	log := r.o.Log.With().Int64("job_id", job.ID).Str("kind", job.Kind).Str("repo", job.Repo).Int("pr", job.PRNumber).
		Str("tier", job.Tier).Int("attempt", c.Attempt).Logger()
	rt := r.routeOf(job.Kind)
	jctx, cancel := context.WithTimeout(log.WithContext(ctx), Lease)
	defer cancel()
	var err error
	if rt.take != nil {
		err = rt.take(jctx, job)
	}
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		d := r.o.Policy.Next(r.o.Now(), c.Attempt, err)
		if !d.GiveUp {
			log.Warn().Err(err).Time("retry_at", d.At).Msg("taking a finished job failed; will retry")
			if rerr := r.o.Queue.RetryJudge(ctx, job.ID, c.LeaseID, d.At); rerr != nil {
				log.Warn().Err(rerr).Msg("reschedule a finished job")
			}
			return
		}
		log.Error().Err(err).Msg("cannot take a finished job: giving it up")
		if rt.abandon != nil {
			if aerr := rt.abandon(jctx, job, err); aerr != nil {
				log.Error().Err(aerr).Msg("give up a finished job")
				if rerr := r.o.Queue.RetryJudge(ctx, job.ID, c.LeaseID, r.o.Now().Add(r.o.Policy.Max)); rerr != nil {
					log.Warn().Err(rerr).Msg("reschedule a finished job")
				}
				return
			}
		}
	}
	if err := r.o.Queue.JobJudged(ctx, job.ID, c.LeaseID); err != nil {
		log.Warn().Err(err).Msg("record a taken job")
	}
}
