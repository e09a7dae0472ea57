package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Wake-ups across replicas. A long poll waits on Notify after an empty
// claim; a job queued (or requeued) through another replica used to reach
// it only at its next re-poll. On PostgreSQL every transaction that makes
// a job claimable sends NOTIFY on queueChannel (delivered at commit), and
// each store handle LISTENs on a connection of its own and wakes its
// long polls.

const queueChannel = "perfgate_queue"

// notifyQueued asks PostgreSQL to wake every replica's long polls when tx
// commits. Identical notifications of one transaction are sent once.
func (s *sqlStore) notifyQueued(ctx context.Context, tx txer) error {
	if !s.d.dollar {
		return nil // one process: the local wake-up is enough
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify('`+queueChannel+`', '')`); err != nil {
		return fmt.Errorf("notify replicas: %w", err)
	}
	return nil
}

// listener holds the LISTEN connection of one store handle.
type listener struct {
	cfg    *pgx.ConnConfig
	cancel context.CancelFunc
	done   chan struct{}
}

// listen opens the LISTEN connection (so a job queued once Open returns
// wakes this handle) and wakes s's long polls at every notification until
// Close. A broken connection is opened again, and the polls are woken
// then: a notification may have been missed.
func (s *sqlStore) listen(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := dialListen(ctx, cfg)
	if err != nil {
		return err
	}
	// The listener outlives the call that opens the store: it ends at Close.
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.listener = &listener{cfg: cfg, cancel: cancel, done: make(chan struct{})}
	go func() { //nolint:gosec // G118: the listener outlives the opening call by design; it ends at Close (cancel)
		defer close(s.listener.done)
		for {
			for conn != nil {
				if _, err := conn.WaitForNotification(lctx); err != nil {
					_ = conn.Close(context.Background())
					conn = nil
					break
				}
				s.wake.broadcast()
			}
			select {
			case <-lctx.Done():
				return
			case <-time.After(time.Second): // PostgreSQL restarting: try again
			}
			dctx, dcancel := context.WithTimeout(lctx, 10*time.Second)
			conn, _ = dialListen(dctx, cfg)
			dcancel()
			s.wake.broadcast()
		}
	}()
	return nil
}

func dialListen(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("listen for queued jobs: %w", err)
	}
	if _, err := conn.Exec(ctx, `LISTEN `+queueChannel); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("listen for queued jobs: %w", err)
	}
	return conn, nil
}

// stopListening ends the LISTEN connection.
func (s *sqlStore) stopListening() {
	if s.listener != nil {
		s.listener.cancel()
		<-s.listener.done
	}
}
