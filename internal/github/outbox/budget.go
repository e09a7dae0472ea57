package outbox

import (
	"errors"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"
)

// DefaultNoteReserve is how much of an installation's GitHub budget queue
// notes leave to verdicts and comments: with fewer calls left than this
// until the budget resets, a note waits for the reset.
const DefaultNoteReserve = 500

// budgets is what GitHub last said of each installation's rate limit:
// X-RateLimit-Remaining and -Reset of its answers (go-github's Rate), or
// a spent limit the transport gave up waiting for.
type budgets struct {
	mu sync.Mutex
	m  map[int64]budget
}

type budget struct {
	remaining int
	reset     time.Time
}

// noteRate records the budget an answer reported.
func (b *budgets) noteRate(installation int64, r github.Rate) {
	if r.Limit > 0 {
		b.set(installation, budget{r.Remaining, r.Reset.Time})
	}
}

// noteErr records a spent limit: GitHub's rate-limit error, or the
// transport's (app.RateLimitedError: wait RetryAfter).
func (b *budgets) noteErr(installation int64, err error, now time.Time) {
	var (
		rl    *github.RateLimitError
		after interface{ RetryAfter() time.Duration }
	)
	switch {
	case errors.As(err, &rl):
		b.set(installation, budget{rl.Rate.Remaining, rl.Rate.Reset.Time})
	case errors.As(err, &after):
		b.set(installation, budget{0, now.Add(after.RetryAfter())})
	}
}

func (b *budgets) set(installation int64, v budget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[int64]budget{}
	}
	b.m[installation] = v
}

// low reports until when the installation's budget is below reserve, if
// it is now.
func (b *budgets) low(installation int64, reserve int, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[installation]
	if !ok || v.remaining >= reserve || !v.reset.After(now) {
		return time.Time{}, false
	}
	return v.reset, true
}
