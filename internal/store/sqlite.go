package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // registers driver "sqlite"
)

// openSQLite opens the file with WAL (readers never block the writer), a
// busy timeout (another process holding the lock waits instead of failing)
// and two pools: one connection for writes, several for reads.
func openSQLite(ctx context.Context, dsn string, o options) (Store, error) {
	path, query := sqlitePath(dsn)
	if path == "" {
		return nil, fmt.Errorf("open sqlite %q: no file path", dsn)
	}
	memory := path == ":memory:" || strings.Contains(query, "mode=memory")
	if o.existing && !memory {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if abs, aerr := filepath.Abs(path); aerr == nil {
				path = abs
			}
			return nil, fmt.Errorf("%w at %s", ErrNoDatabase, path)
		} else if err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
	}
	if !memory {
		// The database holds webhook payloads, tokens' hashes and the
		// audit log: readable by its owner only. SQLite gives the -wal and
		// -shm files the database file's mode.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
		_ = f.Close()
	}
	base := "file:" + path + "?"
	if query != "" {
		base += query + "&"
	}
	common := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"

	writeDSN := base + common + "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	// This process's writers take turns at SQLite's one write lock
	// (sqliteturn.go): the connection below, and the webhooks' own.
	turn := &writeTurn{}
	wc, err := newTurnConnector(writeDSN, turn, false)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w := sql.OpenDB(wc)
	// SQLite has one writer. One connection makes this process's writers
	// wait their turn in Go rather than spin on SQLITE_BUSY, and
	// _txlock=immediate takes the write lock at BEGIN, so a transaction that
	// reads then writes (a claim) cannot be overtaken by another process.
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	s := &sqlStore{d: sqliteDialect, w: w, r: w, now: o.now, shares: o.shares, instance: o.instance}
	if err := migrate(ctx, s); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if !memory {
		// Webhooks' inserts have connections of their own, first in the
		// turn: an answer waits for the writer in progress, not for every
		// writer queued; several, so that acks arriving together queue in
		// the turn's order rather than at random for one connection (an
		// in-memory database is one connection's).
		ac, err := newTurnConnector(writeDSN, turn, true)
		if err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
		s.ack = sql.OpenDB(ac)
		s.ack.SetMaxOpenConns(4)
		s.ack.SetConnMaxIdleTime(0)
	}
	if !memory {
		// Opened after the writer switched the file to WAL, so these
		// connections read a snapshot while a write is in progress.
		r, err := sql.Open("sqlite", base+common+"&_pragma=query_only(1)")
		if err != nil {
			_ = w.Close()
			_ = s.ack.Close()
			return nil, fmt.Errorf("open sqlite %s for reading: %w", path, err)
		}
		r.SetMaxOpenConns(4)
		s.r = r
	}
	return s, nil
}

// sqlitePath splits "sqlite://path?q", "file:path?q" or "path" into the
// file path and its query.
func sqlitePath(dsn string) (path, query string) {
	rest := dsn
	switch {
	case strings.HasPrefix(rest, "sqlite://"):
		rest = strings.TrimPrefix(rest, "sqlite://")
	case strings.HasPrefix(rest, "sqlite:"):
		rest = strings.TrimPrefix(rest, "sqlite:")
	case strings.HasPrefix(rest, "file:"):
		rest = strings.TrimPrefix(rest, "file:")
	}
	path, query, _ = strings.Cut(rest, "?")
	if q, err := url.ParseQuery(query); err == nil && len(q) == 0 {
		query = ""
	}
	return path, query
}
