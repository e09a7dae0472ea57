// Package metrics is perfgate's Prometheus instrumentation: webhook
// deliveries and their processing, GitHub API calls and rate limits, the
// job queue, agents, and check run conclusions. Other packages are not
// edited to count: they are wrapped (an HTTP middleware, a GitHub client
// transport, a store decorator) or given a small observer.
package metrics

import (
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/perfgate/perfgate/internal/vocab/check"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// Metrics holds every collector on its own registry.
type Metrics struct {
	reg *prometheus.Registry
	now func() time.Time

	deliveries  *prometheus.CounterVec
	processing  *prometheus.HistogramVec
	apiCalls    *prometheus.CounterVec
	rateLimit   *prometheus.GaugeVec
	queue       *prometheus.GaugeVec
	jobDuration *prometheus.HistogramVec
	lastSeen    *prometheus.GaugeVec
	conclusions *prometheus.CounterVec

	agentsMu sync.Mutex
	agents   map[string]time.Time // agent name → last request
}

// ConnectedWithin is how recently an agent must have called the server to
// count as connected. Agents long-poll at most 30 s apart.
const ConnectedWithin = 2 * time.Minute

// New registers perfgate's collectors, plus the Go runtime and process
// collectors, on a fresh registry. now is the clock (nil: time.Now).
func New(now func() time.Time) *Metrics {
	if now == nil {
		now = time.Now
	}
	m := &Metrics{reg: prometheus.NewRegistry(), now: now, agents: map[string]time.Time{}}
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "perfgate_webhook_deliveries_total",
		Help: "Webhook deliveries received, by event and outcome (accepted, bad_signature, invalid, too_large, no_capacity, error).",
	}, []string{"event", "outcome"})
	m.processing = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "perfgate_webhook_processing_seconds",
		Help:    "Time to process one accepted webhook event, by event and outcome (ok, error).",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"event", "outcome"})
	m.apiCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "perfgate_github_api_requests_total",
		Help: "GitHub REST API requests (each attempt), by method and HTTP status (\"error\" when no response came).",
	}, []string{"method", "status"})
	m.rateLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "perfgate_github_rate_limit_remaining",
		Help: "X-RateLimit-Remaining on the latest GitHub API response, by rate-limit resource.",
	}, []string{"resource"})
	m.queue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "perfgate_jobs",
		Help: "Jobs queued or running, by tier and required runner labels; kept as jobs move and re-read from the database every few minutes.",
	}, []string{"state", "tier", "labels"})
	m.jobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "perfgate_job_duration_seconds",
		Help:    "Duration of a job's final attempt, claim to finish, by tier and final status.",
		Buckets: []float64{10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	}, []string{"tier", "status"})
	m.lastSeen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "perfgate_agent_last_seen_timestamp_seconds",
		Help: "Unix time of each runner agent's latest call to the server.",
	}, []string{"agent"})
	connected := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "perfgate_agents_connected",
		Help: "Runner agents that called the server within the last 2 minutes.",
	}, m.connected)
	m.conclusions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "perfgate_check_run_conclusions_total",
		Help: "Check runs concluded on GitHub, by check name and conclusion.",
	}, []string{"check", "conclusion"})
	m.reg.MustRegister(m.deliveries, m.processing, m.apiCalls, m.rateLimit, m.queue, m.jobDuration,
		m.lastSeen, connected, m.conclusions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.zero()
	return m
}

// zero creates the series dashboards and alerts read before their first
// event, so that a quiet server shows 0 instead of "no data", rate() has a
// starting point and an alert can be written the day the server starts:
// every webhook event and outcome, the processing histogram for each
// event, the GitHub calls perfgate makes (GET answered 200, POST 201,
// PATCH 200, and each failing without an answer), the queue, job
// durations and check conclusions of every tier perfgate knows (the
// default runner label; a repository's own labels appear with their first
// job), and the core rate limit as NaN — unknown, not exhausted: a 0
// would fire a "rate limit low" alert, NaN compares false. Only an
// agent's last-seen time waits for its agent (Resync seeds the registered
// ones at start-up; perfgate_agents_connected is 0 before).
func (m *Metrics) zero() {
	for e := range knownEvents {
		for _, o := range []string{"accepted", "bad_signature", "invalid", "too_large", "no_capacity", "error"} {
			m.deliveries.WithLabelValues(e, o)
		}
		for _, o := range []string{"ok", "error"} {
			m.processing.WithLabelValues(e, o)
		}
	}
	for _, c := range [][2]string{{"GET", "200"}, {"POST", "201"}, {"PATCH", "200"}, {"GET", "error"}, {"POST", "error"}, {"PATCH", "error"}} {
		m.apiCalls.WithLabelValues(c[0], c[1])
	}
	m.zeroQueue()
	for _, t := range knownTiers {
		for _, s := range []jobstate.Status{jobstate.Succeeded, jobstate.Failed, jobstate.Cancelled} {
			m.jobDuration.WithLabelValues(string(t), string(s))
		}
		for _, c := range knownConclusions {
			m.conclusions.WithLabelValues(check.CheckName(t), c)
		}
	}
	m.rateLimit.WithLabelValues("core").Set(math.NaN())
}

// zeroQueue creates the queue gauges of every known tier, queued and
// running, for jobs on the default runner label.
func (m *Metrics) zeroQueue() {
	for _, t := range knownTiers {
		for _, s := range []jobstate.Status{jobstate.Queued, jobstate.Running} {
			m.queue.WithLabelValues(string(s), string(t), defaultLabels)
		}
	}
}

// The label values zero creates series for.
var (
	knownTiers       = []check.Tier{check.TierQuick, check.TierMerge, check.TierNightly, check.TierCapacity, check.TierSoak}
	knownConclusions = []string{"success", "neutral", "skipped", "cancelled", "action_required", "failure"}
	// defaultLabels is the runner labels of a repository that names none
	// (config.Default's runner: gpu), as labelKey writes them.
	defaultLabels = "gpu"
)

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// EventHandled records one webhook event's processing; it satisfies the
// app's event observer.
func (m *Metrics) EventHandled(event string, elapsed time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.processing.WithLabelValues(eventLabel(event), outcome).Observe(elapsed.Seconds())
}

// AgentSeen records a call from agent name.
func (m *Metrics) AgentSeen(name string, at time.Time) {
	m.agentsMu.Lock()
	if at.After(m.agents[name]) {
		m.agents[name] = at
	}
	m.agentsMu.Unlock()
	m.lastSeen.WithLabelValues(name).Set(float64(at.UnixNano()) / 1e9)
}

func (m *Metrics) connected() float64 {
	cut := m.now().Add(-ConnectedWithin)
	m.agentsMu.Lock()
	defer m.agentsMu.Unlock()
	n := 0
	for _, at := range m.agents {
		if at.After(cut) {
			n++
		}
	}
	return float64(n)
}

// knownEvents bounds the event label: the header is sender-controlled.
var knownEvents = map[string]bool{
	"check_run": true, "check_suite": true, "issue_comment": true, "merge_group": true, "pull_request": true,
	"pull_request_review": true, "release": true, "installation": true, "installation_repositories": true, "ping": true,
}

func eventLabel(e string) string {
	if knownEvents[e] {
		return e
	}
	return "other"
}
