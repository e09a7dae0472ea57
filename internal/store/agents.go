package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

const agentCols = `id, name, labels, gpu_uuids, token_hash, created_at, last_seen_at, cards, drained, drained_at`

func scanAgent(sc scanner) (Agent, error) {
	var (
		a                      Agent
		labels, gpus, cards    string
		created, seen, drained sql.NullInt64
	)
	if err := sc.Scan(&a.ID, &a.Name, &labels, &gpus, &a.TokenHash, &created, &seen, &cards, &a.Drained, &drained); err != nil {
		return Agent{}, err
	}
	if err := json.Unmarshal([]byte(cards), &a.Cards); err != nil {
		return Agent{}, fmt.Errorf("agent %d cards: %w", a.ID, err)
	}
	a.DrainedAt = fromMicros(drained)
	var err error
	if a.Labels, err = parseList(labels); err != nil {
		return Agent{}, fmt.Errorf("agent %d labels: %w", a.ID, err)
	}
	if a.GPUUUIDs, err = parseList(gpus); err != nil {
		return Agent{}, fmt.Errorf("agent %d gpus: %w", a.ID, err)
	}
	a.CreatedAt = fromMicros(created)
	a.LastSeenAt = fromMicros(seen)
	return a, nil
}

// revokedPrefix marks a revoked token hash: no token hashes to it, so the
// runner's token stops working, and its name is free again.
const revokedPrefix = "revoked:"

// RegisterAgent creates the agent, or — when the name is registered and
// the registration presents the name's current token (PreviousTokenHash),
// or the old registration was revoked or expired — replaces its labels,
// GPUs, cards and token hash, so a re-registered agent keeps its ID (and
// its drain) and its old token stops working. Anyone else gets
// ErrNameTaken: a registration token alone cannot take over a live
// runner's name, its token and its cards.
func (s *sqlStore) RegisterAgent(ctx context.Context, reg AgentRegistration) (Agent, error) {
	if reg.Name == "" || reg.TokenHash == "" {
		return Agent{}, fmt.Errorf("register agent: name and token hash are required")
	}
	var held string
	err := s.w.QueryRowContext(ctx, s.q(`SELECT token_hash FROM agents WHERE name = ?`), reg.Name).Scan(&held)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return Agent{}, fmt.Errorf("register agent %q: %w", reg.Name, err)
	case !strings.HasPrefix(held, revokedPrefix) && held != reg.PreviousTokenHash && held != reg.TokenHash:
		return Agent{}, fmt.Errorf("register agent %q: %w", reg.Name, ErrNameTaken)
	}
	now := s.nowMicros()
	cards := "[]"
	if len(reg.Cards) > 0 {
		b, err := json.Marshal(reg.Cards)
		if err != nil {
			return Agent{}, fmt.Errorf("register agent %q: cards: %w", reg.Name, err)
		}
		cards = string(b)
	}
	a, err := scanAgent(s.w.QueryRowContext(ctx, s.q(`INSERT INTO agents (name, labels, gpu_uuids, token_hash, created_at, last_seen_at, cards)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET labels = excluded.labels, gpu_uuids = excluded.gpu_uuids,
			token_hash = excluded.token_hash, last_seen_at = excluded.last_seen_at, cards = excluded.cards
		WHERE agents.token_hash = ?
		RETURNING `+agentCols),
		reg.Name, jsonList(reg.Labels), jsonList(reg.GPUUUIDs), reg.TokenHash, now, now, cards, held))
	if errors.Is(err, sql.ErrNoRows) {
		// Another registration took the name between the look and the write.
		return Agent{}, fmt.Errorf("register agent %q: %w", reg.Name, ErrNameTaken)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("register agent %q: %w", reg.Name, err)
	}
	return a, nil
}

// AgentByTokenHash authenticates an agent: ErrNotFound for an unknown token.
func (s *sqlStore) AgentByTokenHash(ctx context.Context, tokenHash string) (Agent, error) {
	a, err := scanAgent(s.r.QueryRowContext(ctx, s.q(`SELECT `+agentCols+` FROM agents WHERE token_hash = ?`), tokenHash))
	if err != nil {
		return Agent{}, fmt.Errorf("agent by token: %w", notFound(err))
	}
	return a, nil
}

func (s *sqlStore) ListAgents(ctx context.Context) ([]Agent, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+agentCols+` FROM agents ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rows.Close()
	var out []Agent
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return out, nil
}

// SetAgentDrained drains the named agent — it finishes the job it has and
// claims no more — or, with drained false, puts it back to work.
func (s *sqlStore) SetAgentDrained(ctx context.Context, name string, drained bool) (Agent, error) {
	var at any
	if drained {
		at = s.nowMicros()
	}
	a, err := scanAgent(s.w.QueryRowContext(ctx, s.q(`UPDATE agents SET drained = ?,
			drained_at = CASE WHEN ? THEN COALESCE(drained_at, ?) ELSE NULL END
		WHERE name = ? RETURNING `+agentCols), drained, drained, at, name))
	if err != nil {
		return Agent{}, fmt.Errorf("drain agent %q: %w", name, notFound(err))
	}
	return a, nil
}

// RevokeAgent makes a runner's token stop working at once and frees its
// name (perfgate runners revoke NAME): a lost or leaked runner token is cut
// off, and the runner registers again, keeping its row (and a drain an
// operator set). A job it holds is left to the lease reaper. ErrNotFound
// for an unknown name.
func (s *sqlStore) RevokeAgent(ctx context.Context, name string) (Agent, error) {
	a, err := scanAgent(s.w.QueryRowContext(ctx, s.q(`UPDATE agents SET token_hash = CAST(? AS TEXT) || CAST(id AS TEXT)
		WHERE name = ? RETURNING `+agentCols), revokedPrefix, name))
	if err != nil {
		return Agent{}, fmt.Errorf("revoke runner %q: %w", name, notFound(err))
	}
	return a, nil
}

// ExpireAgents revokes the registrations not seen since idleBefore that
// hold no job (junk registrations, runners long gone) and returns their
// names.
func (s *sqlStore) ExpireAgents(ctx context.Context, idleBefore time.Time) ([]string, error) {
	rows, err := s.w.QueryContext(ctx, s.q(`UPDATE agents SET token_hash = CAST(? AS TEXT) || CAST(id AS TEXT)
		WHERE last_seen_at < ? AND token_hash NOT LIKE 'revoked:%'
			AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.agent_id = agents.id AND jobs.status = 'running')
		RETURNING name`), revokedPrefix, idleBefore.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("expire runners: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("expire runners: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
