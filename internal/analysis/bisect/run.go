package bisect

import (
	"context"
	"errors"
	"fmt"

	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// ErrUnmeasurable marks a Measure error for a commit that cannot be built,
// started or measured: the bisect skips it, as git bisect skips on exit 125.
// Wrap it: fmt.Errorf("%w: engine did not start", bisect.ErrUnmeasurable).
var ErrUnmeasurable = errors.New("commit cannot be measured")

// Measurer measures one commit against its reference: req.Pairs pairs of
// runs of the benchmark interleaved on one card (ABBA), returning one value
// of the bisect's metric per run of each.
// perfgate's server implements it with queued GPU jobs; req.Seq, with the
// bisect's id, makes the job idempotent across restarts.
type Measurer interface {
	Measure(ctx context.Context, req Request) (Measurement, error)
}

// SaveFunc persists the state. Run calls it after every change and before
// every measurement, so a restart resumes with the same pending request.
type SaveFunc func(ctx context.Context, s *State) error

// Run drives s to its end with m, saving after each step. An error other
// than ErrUnmeasurable stops it with the state saved: call Run again (after a
// restart, on the loaded state) to go on where it stopped.
func Run(ctx context.Context, s *State, m Measurer, save SaveFunc) (*Result, error) {
	for {
		req, ok := s.Next()
		if save != nil {
			if err := save(ctx, s); err != nil {
				return nil, fmt.Errorf("save bisect state: %w", err)
			}
		}
		if !ok {
			return s.Result, nil
		}
		values, err := m.Measure(ctx, req)
		switch {
		case errors.Is(err, ErrUnmeasurable):
			if ferr := s.Fail(req, err.Error()); ferr != nil {
				return nil, ferr
			}
		case err != nil:
			return nil, fmt.Errorf("measure %s (request %d): %w", rev.Short(req.SHA), req.Seq, err)
		default:
			if oerr := s.Observe(req, values); oerr != nil {
				return nil, oerr
			}
		}
	}
}
