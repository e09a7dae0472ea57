package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
)

// dialect holds the few places where SQLite and PostgreSQL SQL differ.
// Queries are written with ? placeholders; PostgreSQL rebinds them to $n.
type dialect struct {
	name string
	// dollar: rebind ? to $1, $2, …
	dollar bool
	// skipLocked is appended to a SELECT that picks rows to change, so
	// concurrent claimers on PostgreSQL pass over each other's rows. SQLite
	// needs nothing: its write transactions are serial.
	skipLocked string
	// forUpdate locks a row read before it is changed in a transaction
	// (PostgreSQL); SQLite's write transactions are already exclusive.
	forUpdate string
	// claimMatch is the WHERE fragment "job j's labels ⊆ agent labels and
	// its GPU pin is absent or among the agent's GPUs"; it takes two
	// parameters, both JSON arrays of strings: labels, then GPU UUIDs.
	claimMatch string
	// greatest is the two-argument maximum function.
	greatest string
}

var sqliteDialect = dialect{
	name:     "sqlite",
	greatest: "MAX",
	claimMatch: `NOT EXISTS (SELECT 1 FROM json_each(j.required_labels) r
	                 WHERE r.value NOT IN (SELECT value FROM json_each(?)))
	             AND (j.gpu_uuid = '' OR j.gpu_uuid IN (SELECT value FROM json_each(?)))`,
}

var postgresDialect = dialect{
	name:       "postgres",
	dollar:     true,
	skipLocked: " FOR UPDATE SKIP LOCKED",
	forUpdate:  " FOR UPDATE",
	greatest:   "GREATEST",
	// The CASE hides the predicate's selectivity from the planner. Bare,
	// jsonb <@ is estimated to keep ~0 rows, so without fresh statistics
	// PostgreSQL bitmap-scans and sorts the whole queue on every claim
	// (O(queue), ~60 ms at 10,000 jobs) instead of walking jobs_queued in id
	// order and stopping at the first match.
	claimMatch: `CASE WHEN j.required_labels <@ ?::jsonb
	                   AND (j.gpu_uuid = '' OR jsonb_build_array(j.gpu_uuid) <@ ?::jsonb)
	             THEN TRUE ELSE FALSE END`,
}

// sqlStore implements Store over database/sql for both backends.
type sqlStore struct {
	d dialect
	// w takes every write. On SQLite it has one connection and begins
	// transactions with BEGIN IMMEDIATE, so writers queue here instead of
	// failing with SQLITE_BUSY; on PostgreSQL r and w are the same pool.
	w *sql.DB
	r *sql.DB
	// ack takes a webhook's insert (AcceptDelivery) when set: on a SQLite
	// file, a connection of its own that goes before every waiting writer
	// (sqliteturn.go). Otherwise w does.
	ack *sql.DB

	now    func() time.Time
	shares fleet.Shares
	// instance prefixes the server's own leases (WithInstance).
	instance string
	wake     notifier
	closed   sync.Once
	// holder names this handle when it takes a singleton's turn.
	holderOnce sync.Once
	holder     string
	// listener wakes the long polls when another replica queues a job
	// (PostgreSQL; listen.go).
	listener *listener
}

// ackDB is where a webhook's insert goes.
func (s *sqlStore) ackDB() *sql.DB {
	if s.ack != nil {
		return s.ack
	}
	return s.w
}

func (s *sqlStore) Close() error {
	var err error
	s.closed.Do(func() {
		s.stopListening()
		err = s.w.Close()
		if s.ack != nil {
			if aerr := s.ack.Close(); err == nil {
				err = aerr
			}
		}
		if s.r != s.w {
			if rerr := s.r.Close(); err == nil {
				err = rerr
			}
		}
	})
	return err
}

// Notify returns a channel closed at the next Enqueue or requeue in this
// process and, on PostgreSQL, in any replica (LISTEN/NOTIFY; listen.go).
// Long-poll handlers take it before Claim and wait on it after ErrNoJob.
func (s *sqlStore) Notify() <-chan struct{} { return s.wake.wait() }

// q rewrites a query's placeholders for the backend.
func (s *sqlStore) q(query string) string { return s.d.rebind(query) }

// rebind rewrites a query's ? placeholders as the backend wants them.
func (d dialect) rebind(query string) string {
	if !d.dollar {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// errNoRowsCommit, returned by a tx function, commits the transaction and
// is then returned by tx: "nothing found, but keep what was written".
var errNoRowsCommit = errors.New("no rows; commit")

// tx runs fn in a write transaction and commits when fn returns nil or
// errNoRowsCommit.
func (s *sqlStore) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	ferr := fn(tx)
	if ferr != nil && !errors.Is(ferr, errNoRowsCommit) {
		_ = tx.Rollback()
		return ferr
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return ferr
}

// Shared: PostgreSQL is the database several replicas share.
func (s *sqlStore) Shared() bool { return s.d.dollar }

// nowMicros is the store clock as stored: UTC microseconds since the epoch.
func (s *sqlStore) nowMicros() int64 { return s.now().UnixMicro() }

// notifier is a broadcast: every waiter's channel closes on the next wake.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) broadcast() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// Stored representations. Times are BIGINT microseconds (NULL = unset) in
// both backends so comparisons against the injected clock are plain integer
// comparisons; string lists and JSON documents are JSON text.

func micros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMicro(v.Int64).UTC()
}

func jsonList(v []string) string {
	if len(v) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(v) // []string always marshals
	return string(b)
}

func parseList(s string) ([]string, error) {
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("decode list %q: %w", s, err)
	}
	return v, nil
}

func jsonInts(v []int64) string {
	if len(v) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func parseInts(s string) ([]int64, error) {
	var v []int64
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("decode id list %q: %w", s, err)
	}
	return v, nil
}

// jsonDoc stores a document; empty means JSON null so the column stays
// valid jsonb on PostgreSQL.
func jsonDoc(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "null", nil
	}
	if !json.Valid(raw) {
		return "", fmt.Errorf("invalid JSON document (%d bytes)", len(raw))
	}
	return string(raw), nil
}

func parseDoc(s string) json.RawMessage {
	if s == "" || s == "null" {
		return nil
	}
	return json.RawMessage(s)
}

func blob(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// serverLeaseID is a lease this server process takes (inbox, outbox,
// judge): its instance name, '/', a random ID.
func (s *sqlStore) serverLeaseID() (string, error) {
	id, err := newLeaseID()
	if err != nil || s.instance == "" {
		return id, err
	}
	return s.instance + "/" + id, nil
}

func newLeaseID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lease id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// notFound turns sql.ErrNoRows into ErrNotFound, keeping other errors.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// scanner is *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}
