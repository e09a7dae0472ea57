package agentserver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/perfgate/perfgate/internal/github/tarball"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// sourceWriteTime bounds streaming one tree to an agent: a large
// repository over a slow link, not a stuck one (the server's own write
// timeout is shorter and meant for small answers).
const sourceWriteTime = 30 * time.Minute

// source streams the tree of one of the job's commits to its agent:
// GET /api/v1/jobs/{id}/source?sha=…&lease_id=… (or X-Lease-Id). The
// answer is GitHub's tarball as GitHub sent it, copied through a small
// buffer and never held whole; the agent checks and unpacks it.
func (s *server) source(w http.ResponseWriter, r *http.Request, a store.Agent) {
	lease := r.URL.Query().Get("lease_id")
	if lease == "" {
		lease = r.Header.Get("X-Lease-Id")
	}
	j, ok := s.ownJob(w, r, a, lease)
	if !ok {
		return
	}
	if j.Status != jobstate.Running {
		writeError(w, http.StatusConflict, fmt.Sprintf("source: job %d is %s: abandon it", j.ID, j.Status))
		return
	}
	sha := r.URL.Query().Get("sha")
	if !agentapi.IsCommitID(sha) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("source: sha=%q is not a commit id (lower-case hex)", sha))
		return
	}
	if commits := jobCommits(j); !slices.Contains(commits, sha) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("source: job %d measures %v, not %s: an agent may fetch only its job's commits", j.ID, commits, sha))
		return
	}
	if s.opts.Source == nil {
		writeError(w, http.StatusNotImplemented, "source: this server cannot fetch repository trees (it has no GitHub App configured); jobs that start an engine from a commit cannot run here")
		return
	}
	start := s.opts.Now()
	body, err := s.opts.Source.Tarball(r.Context(), j.InstallationID, j.Repo, sha)
	if errors.Is(err, tarball.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("source: %s has no commit %s (force-pushed away, or the app cannot read the repository): %v", j.Repo, sha, err))
		return
	}
	if err != nil {
		s.opts.Log.Error().Err(err).Int64("job_id", j.ID).Str("repo", j.Repo).Str("sha", sha).Msg("fetch source tarball")
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusBadGateway, fmt.Sprintf("source: fetching %s@%s from GitHub failed: %v; retry later", j.Repo, sha, err))
		return
	}
	defer body.Close()
	// The default write timeout would cut a large tree short.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(sourceWriteTime))
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("X-Perfgate-Commit", sha)
	w.WriteHeader(http.StatusOK)
	n, err := io.CopyBuffer(w, body, make([]byte, 64<<10))
	ev := s.opts.Log.Info()
	if err != nil {
		ev = s.opts.Log.Warn().Err(err)
	}
	ev.Int64("job_id", j.ID).Int64("agent_id", a.ID).Str("repo", j.Repo).Str("sha", sha).Int64("bytes", n).
		Dur("took", s.opts.Now().Sub(start)).Msg("source served")
}

// jobCommits are the commits a job may fetch: those its plan measures,
// or its head when the plan cannot be read.
func jobCommits(j store.Job) []string {
	if p, err := agentapi.ParsePlan(j.Config); err == nil {
		if c := p.Commits(); len(c) > 0 {
			return c
		}
	}
	if j.HeadSHA != "" {
		return []string{j.HeadSHA}
	}
	return nil
}
