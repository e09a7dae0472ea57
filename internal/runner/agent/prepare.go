package agent

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/runner/source"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/result"
	"github.com/perfgate/perfgate/internal/vocab/rev"
)

// side is one commit of a job made ready to start its engine: its
// checkout, what its build made, and how it will be contained.
type side struct {
	name     string // agentapi.SideBase, SideHead, or "" for a one-commit job
	sha      string
	checkout *source.Checkout // nil for the sim, or a plan without a commit
	built    string           // the image a build step made ("" if none)
	sandbox  string           // "container", "uncontained" or "" (sim)
	// profileDir, in a profiling pass, is where the engine writes traces.
	profileDir string
	// knobChanges, on the head side, are the lines its tree adds against
	// the base's that set an engine knob (found once, at the first run).
	knobChanges []result.KnobChange
}

// errUncontained is the refusal of a command engine on a commit's code by
// a runner that does not allow it.
var errUncontained = errors.New("this runner runs a commit's code only inside its sandbox, and the repository's engine is a command (server.command): " +
	"use a pinned server.image, or start the agent with --allow-uncontained on a runner whose repositories you trust")

// prepare fetches the side's commit through the server (never from GitHub
// directly: the agent has no credential) and runs the build step.
func (a *Agent) prepare(ctx context.Context, c *agentapi.ClaimResponse, p agentapi.Plan, name, uuid string, log zerolog.Logger) (*side, error) {
	s := &side{name: name, sha: p.Commit(name)}
	e := p.Engine
	if e.Sim != nil {
		return s, nil // the in-process sim runs no commit's code
	}
	if e.Image != "" {
		s.sandbox = "container"
	} else {
		s.sandbox = "uncontained"
	}
	if s.sha == "" {
		// A plan that names no commit runs only the configured engine.
		return s, nil
	}
	if e.Image == "" && !a.cfg.AllowUncontained {
		return nil, errUncontained
	}
	label := s.sha
	if name != "" {
		label = name + " " + s.sha
	}
	co, err := a.cache.Get(ctx, s.sha, func(ctx context.Context) (io.ReadCloser, error) {
		log.Info().Str("sha", s.sha).Str("side", name).Msg("fetching the commit's source through the server")
		return a.client.Source(ctx, c.JobID, c.LeaseID, s.sha)
	})
	if err != nil {
		return nil, fmt.Errorf("source of %s: %w", label, err)
	}
	s.checkout = co
	log.Info().Str("sha", s.sha).Str("side", name).Str("tree", co.Tree.Digest).Int("files", co.Tree.Files).
		Int64("bytes", co.Tree.Bytes).Bool("cached", co.Reused).Msg("checkout ready")
	if e.Build != nil {
		built, err := a.build(ctx, c, p, s, uuid, log)
		if err != nil {
			co.Release()
			return nil, fmt.Errorf("build of %s: %w", label, err)
		}
		s.built = built
	}
	return s, nil
}

// release lets the side's checkout be evicted again.
func (s *side) release() {
	if s.checkout != nil {
		s.checkout.Release()
	}
}

// workdir is the side's checkout on the host, or "".
func (s *side) workdir() string {
	if s.checkout == nil {
		return ""
	}
	return s.checkout.Dir
}

func (s *side) tree() string {
	if s.checkout == nil {
		return ""
	}
	return s.checkout.Tree.Digest
}

// sidesOf lists a plan's sides in the order its schedule first uses them.
func sidesOf(p agentapi.Plan) []string {
	var out []string
	for _, s := range p.Schedule() {
		if !contains(out, s.Side) {
			out = append(out, s.Side)
		}
	}
	return out
}

func describeSide(name, sha string) string {
	if name == "" {
		return rev.Log(sha)
	}
	return name + " " + rev.Log(sha)
}
