package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"modernc.org/sqlite"
)

// writeTurn hands SQLite's one write lock round this process's writers in
// turn, so none of them waits on the lock in SQLite's busy handler (which
// sleeps and polls). A webhook's insert (urgent) goes before every other
// writer waiting; the others go first come, first served. A writer holds
// its turn for one statement, or from BEGIN to COMMIT.
//
// Without it the acknowledgement of a delivery waited, behind the inbox's,
// outbox's and judge's writes, for a turn database/sql hands out at
// random: 330 ms at p99 with a 4,000-delivery backlog (docs/operations.md,
// Acknowledging webhooks).
type writeTurn struct {
	mu     sync.Mutex
	held   bool
	urgent []chan struct{}
	normal []chan struct{}
}

// acquire waits for the turn, or for ctx to end.
func (w *writeTurn) acquire(ctx context.Context, urgent bool) error {
	w.mu.Lock()
	if !w.held {
		w.held = true
		w.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if urgent {
		w.urgent = append(w.urgent, ch)
	} else {
		w.normal = append(w.normal, ch)
	}
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		w.mu.Lock()
		if removeWaiter(&w.urgent, ch) || removeWaiter(&w.normal, ch) {
			w.mu.Unlock()
			return ctx.Err()
		}
		w.mu.Unlock()
		// Handed the turn as ctx ended: pass it on.
		<-ch
		w.release()
		return ctx.Err()
	}
}

// release hands the turn to the next writer: urgent ones first.
func (w *writeTurn) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next chan struct{}
	switch {
	case len(w.urgent) > 0:
		next, w.urgent = w.urgent[0], w.urgent[1:]
	case len(w.normal) > 0:
		next, w.normal = w.normal[0], w.normal[1:]
	default:
		w.held = false
		return
	}
	close(next) // held stays true: the turn passes straight on
}

func removeWaiter(q *[]chan struct{}, ch chan struct{}) bool {
	for i, c := range *q {
		if c == ch {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}

// turnConnector opens SQLite connections that take turn before each
// write: a statement outside a transaction, or a transaction.
type turnConnector struct {
	base   driver.Connector
	turn   *writeTurn
	urgent bool
}

func newTurnConnector(dsn string, turn *writeTurn, urgent bool) (driver.Connector, error) {
	base, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return &turnConnector{base: base, turn: turn, urgent: urgent}, nil
}

func (c *turnConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &turnConn{inner: conn, turn: c.turn, urgent: c.urgent}, nil
}

func (c *turnConnector) Driver() driver.Driver { return c.base.Driver() }

// turnConn is one connection. database/sql uses a connection from one
// goroutine at a time, so inTx needs no lock.
type turnConn struct {
	inner  driver.Conn
	turn   *writeTurn
	urgent bool
	inTx   bool
}

// The optional interfaces every modernc connection implements.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

var errNotFull = errors.New("sqlite connection lacks an interface perfgate's write turn forwards")

func (c *turnConn) full() (fullConn, error) {
	f, ok := c.inner.(fullConn)
	if !ok {
		return nil, fmt.Errorf("%w (%T)", errNotFull, c.inner)
	}
	return f, nil
}

// Unwrap is the driver's own connection (modernc's Limit sees through).
func (c *turnConn) Unwrap() driver.Conn { return c.inner }

func (c *turnConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *turnConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	// perfgate runs no prepared statements; database/sql prepares only
	// when ExecContext or QueryContext answer driver.ErrSkip, which
	// modernc's do not. A statement prepared here would write outside the
	// turn, so refuse it.
	return nil, errors.New("store: prepared statements bypass the SQLite write turn; use ExecContext or QueryContext")
}

func (c *turnConn) Close() error { return c.inner.Close() }

func (c *turnConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *turnConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	f, err := c.full()
	if err != nil {
		return nil, err
	}
	if err := c.turn.acquire(ctx, c.urgent); err != nil {
		return nil, err
	}
	tx, err := f.BeginTx(ctx, opts)
	if err != nil {
		c.turn.release()
		return nil, err
	}
	c.inTx = true
	return &turnTx{inner: tx, c: c}, nil
}

func (c *turnConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	f, err := c.full()
	if err != nil {
		return nil, err
	}
	if c.inTx {
		return f.ExecContext(ctx, query, args)
	}
	if err := c.turn.acquire(ctx, c.urgent); err != nil {
		return nil, err
	}
	defer c.turn.release()
	return f.ExecContext(ctx, query, args)
}

func (c *turnConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	f, err := c.full()
	if err != nil {
		return nil, err
	}
	if c.inTx {
		return f.QueryContext(ctx, query, args)
	}
	// A write with RETURNING holds the lock until its rows are closed.
	if err := c.turn.acquire(ctx, c.urgent); err != nil {
		return nil, err
	}
	rows, err := f.QueryContext(ctx, query, args)
	if err != nil {
		c.turn.release()
		return nil, err
	}
	return &turnRows{Rows: rows, release: c.turn.release}, nil
}

func (c *turnConn) Ping(ctx context.Context) error {
	f, err := c.full()
	if err != nil {
		return err
	}
	return f.Ping(ctx)
}

func (c *turnConn) ResetSession(ctx context.Context) error {
	f, err := c.full()
	if err != nil {
		return err
	}
	return f.ResetSession(ctx)
}

func (c *turnConn) IsValid() bool {
	f, err := c.full()
	return err == nil && f.IsValid()
}

type turnTx struct {
	inner driver.Tx
	c     *turnConn
	once  sync.Once
}

func (t *turnTx) Commit() error {
	defer t.end()
	return t.inner.Commit()
}

func (t *turnTx) Rollback() error {
	defer t.end()
	return t.inner.Rollback()
}

func (t *turnTx) end() {
	t.once.Do(func() {
		t.c.inTx = false
		t.c.turn.release()
	})
}

type turnRows struct {
	driver.Rows
	once    sync.Once
	release func()
}

func (r *turnRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(r.release)
	return err
}
