package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// openPostgres opens a pgx pool through database/sql. Several replicas may
// share the database: claims use FOR UPDATE SKIP LOCKED and migrations hold
// an advisory lock.
func openPostgres(ctx context.Context, dsn string, o options) (Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: parse DSN: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(o.maxConns)
	db.SetMaxIdleConns(o.maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)

	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres %s:%d/%s: %w", cfg.Host, cfg.Port, cfg.Database, err)
	}
	s := &sqlStore{d: postgresDialect, w: db, r: db, now: o.now, shares: o.shares, instance: o.instance}
	if err := migrate(ctx, s); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres %s:%d/%s: %w", cfg.Host, cfg.Port, cfg.Database, err)
	}
	if err := s.listen(pingCtx, cfg); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres %s:%d/%s: %w", cfg.Host, cfg.Port, cfg.Database, err)
	}
	return s, nil
}
