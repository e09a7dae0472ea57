package fleet

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Queued is one queued job as the estimate sees it. Estimate takes them in
// claim order.
type Queued struct {
	ID      int64
	Tier    string
	Labels  []string // the runner labels the job requires
	GPUUUID string   // the card it is pinned to, if any
	// Priority is its class (Priority); Tenant, Tag and Cost are its
	// place in the class's fair share: who it is charged to, its start
	// tag and what it moved its tenant's finish by (see the store).
	Priority  int
	Tenant    string
	Tag, Cost float64
	// AgesIn is how long from now until it goes ahead of the strict
	// order (AgeAfter; ≤ 0: it has); meaningful when Ages.
	AgesIn time.Duration
	Ages   bool
}

// Pool is the set of runners a job can go to, named by what it asks:
// its labels, sorted, and its card pin ("gpu,h100" or "gpu@GPU-1234…").
func (q Queued) Pool() string { return Pool(q.Labels, q.GPUUUID) }

// Pool names the pool of a job requiring labels and pinned to gpu ("" for
// none).
func Pool(labels []string, gpu string) string {
	l := slices.Clone(labels)
	slices.Sort(l)
	p := strings.Join(slices.Compact(l), ",")
	if gpu != "" {
		p += "@" + gpu
	}
	return p
}

// Runner is a runner as the estimate sees it.
type Runner struct {
	Name     string
	Labels   []string
	GPUUUIDs []string
	// Available: online (seen recently) and not drained. Others take no
	// new work.
	Available bool
	// Job is what it runs now (nil: idle, or see BusyFor).
	Job *RunningJob
	// BusyFor is how much longer its current job runs, when Job is nil;
	// 0 when idle.
	BusyFor time.Duration
}

// RunningJob is a runner's current job as the estimate sees it: its tier
// and pool, and how long it has run.
type RunningJob struct {
	Tier, Pool string
	Ran        time.Duration
	// Priority and Tag: its class and fair-share start tag.
	Priority int
	Tag      float64
}

// CanRun reports whether the runner can take the job: it has every label
// the job asks for and, for a pinned job, the card.
func (r Runner) CanRun(q Queued) bool {
	for _, l := range q.Labels {
		if !slices.Contains(r.Labels, l) {
			return false
		}
	}
	return q.GPUUUID == "" || slices.Contains(r.GPUUUIDs, q.GPUUUID)
}

// Note is the line a queued check shows: "3 ahead, about 12 min". Times
// are rounded (to the minute under 10 min, to 5 min under an hour, to 10
// min beyond) so that the line changes only when the wait really moves.
func (p Place) Note(q Queued) string {
	ahead := "next in line"
	switch {
	case p.Ahead == 1:
		ahead = "1 ahead"
	case p.Ahead > 1:
		ahead = fmt.Sprintf("%d ahead", p.Ahead)
	}
	if p.NoRunner {
		return ahead + ", " + waitingFor(q)
	}
	if p.Wait < 30*time.Second {
		if p.Ahead == 0 {
			return ahead + ", starting now"
		}
		return ahead + ", under a minute"
	}
	if p.Beyond {
		return ahead + ", more than " + Minutes(p.Wait)
	}
	return ahead + ", about " + Span(p.Low, p.High)
}

// Span writes a range of waits for people: "12–20 min", "50 min–1 h 20
// min", "up to 5 min"; one figure when both ends round alike.
func Span(lo, hi time.Duration) string {
	l, h := Minutes(lo), Minutes(hi)
	switch {
	case l == h:
		return h
	case lo < 30*time.Second:
		return "up to " + h
	case strings.HasSuffix(l, " min") && strings.HasSuffix(h, " min") && !strings.Contains(h, " h "):
		return strings.TrimSuffix(l, " min") + "–" + h
	}
	return l + "–" + h
}

func waitingFor(q Queued) string {
	if q.GPUUUID != "" {
		return "waiting for card " + q.GPUUUID + " (its runner is offline or drained)"
	}
	if len(q.Labels) == 0 {
		return "waiting for a runner (none is online)"
	}
	return "waiting for a runner labelled " + strings.Join(q.Labels, ", ") + " (none is online and undrained)"
}

// Minutes writes a duration for people, rounded: "4 min", "25 min",
// "1 h 20 min".
func Minutes(d time.Duration) string {
	m := int((d + 30*time.Second) / time.Minute)
	switch {
	case m < 1:
		return "under a minute"
	case m < 10:
		return fmt.Sprintf("%d min", m)
	case m < 60:
		m = (m + 2) / 5 * 5
		if m < 60 {
			return fmt.Sprintf("%d min", m)
		}
	}
	m = (m + 5) / 10 * 10
	if m%60 == 0 {
		return fmt.Sprintf("%d h", m/60)
	}
	return fmt.Sprintf("%d h %d min", m/60, m%60)
}
