package drift

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultCron runs the pass daily, after a typical nightly has finished.
const DefaultCron = "30 5 * * *"

// Schedule runs the pass on the configured cron until ctx ends; stop
// waits for a running pass.
func (p *Pass) Schedule(ctx context.Context) (stop func(), err error) {
	spec := p.o.Config.Cron
	if spec == "" {
		spec = DefaultCron
	}
	c := cron.New()
	if _, err := c.AddFunc(spec, func() {
		if _, err := p.RunTurn(ctx, p.o.Now()); err != nil {
			p.o.Log.Error().Err(err).Msg("change-point pass")
		}
	}); err != nil {
		return nil, fmt.Errorf("change-point schedule %q: %w", spec, err)
	}
	c.Start()
	return func() { <-c.Stop().Done() }, nil
}

// TurnName is the change-point pass's turn among replicas
// (store.Singletons).
const TurnName = "change-points"

// passTimeout bounds one pass; a turn is held as long.
const passTimeout = 30 * time.Minute

// Turns decides which replica runs a scheduled pass (store.Singletons).
type Turns interface {
	TakeTurn(ctx context.Context, name string, period time.Time, hold time.Duration) (bool, error)
	TurnDone(ctx context.Context, name string, period time.Time) error
}

// RunTurn runs the pass scheduled at at (the cron's firing time, the same
// in every replica) if this replica takes its turn — with Options.Turns
// unset, always — and reports whether it ran. With two replicas the pass
// runs once: its issue and Slack writes are not made twice.
func (p *Pass) RunTurn(ctx context.Context, at time.Time) (bool, error) {
	period := at.Round(time.Minute) // replicas' clocks differ by a little
	if p.o.Turns != nil {
		ok, err := p.o.Turns.TakeTurn(ctx, TurnName, period, passTimeout)
		if err != nil || !ok {
			return false, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, passTimeout)
	defer cancel()
	if _, err := p.Run(rctx); err != nil {
		return true, err
	}
	if p.o.Turns != nil {
		return true, p.o.Turns.TurnDone(ctx, TurnName, period)
	}
	return true, nil
}
