package agentserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"

	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// ArtifactFiles keeps uploaded files (artifact.Dir).
type ArtifactFiles interface {
	Save(r io.Reader) (sum string, size int64, err error)
	MaxBytes() int64
}

// ArtifactRows records whose a file is (store.Artifacts).
type ArtifactRows interface {
	PutArtifact(ctx context.Context, a store.ArtifactUpload) (store.Artifact, error)
	ListArtifacts(ctx context.Context, jobID int64) ([]store.Artifact, error)
}

// artifactName is a file's base name as uploaded: no path, no surprises
// in a download's Content-Disposition.
var artifactName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$`)

// artifacts stores one uploaded file: POST /api/v1/jobs/{id}/artifacts
// ?lease_id=…&side=head&name=trace.json with the file as the body.
func (s *server) artifacts(w http.ResponseWriter, r *http.Request, a store.Agent) {
	files, rows := s.opts.ArtifactFiles, s.opts.ArtifactRows
	if files == nil || rows == nil {
		writeError(w, http.StatusNotImplemented, "this server keeps no artifacts: set its artifacts directory")
		return
	}
	q := r.URL.Query()
	lease, side, name := q.Get("lease_id"), q.Get("side"), q.Get("name")
	if !artifactName.MatchString(name) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("artifacts: name %q: a file name of letters, digits, '.', '_', '+' or '-'", name))
		return
	}
	if side != "" && side != agentapi.SideBase && side != agentapi.SideHead {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("artifacts: side %q: want %q, %q or none", side, agentapi.SideBase, agentapi.SideHead))
		return
	}
	j, ok := s.ownJob(w, r, a, lease)
	if !ok {
		return
	}
	if r.ContentLength > files.MaxBytes() {
		tooLarge(w, j.ID, name, r.ContentLength, files.MaxBytes())
		return
	}
	// One job's files together stay within the job's budget: the body may
	// bring at most what is left of it.
	stored, err := rows.ListArtifacts(r.Context(), j.ID)
	if err != nil {
		s.internal(w, r, fmt.Sprintf("list artifacts of job %d", j.ID), err)
		return
	}
	budget := s.opts.ArtifactJobBytes
	if budget <= 0 {
		budget = 2 * files.MaxBytes()
	}
	left := budget
	for _, a := range stored {
		left -= a.Size
	}
	overBudget := func() {
		writeJSONStatus(w, http.StatusRequestEntityTooLarge, agentapi.ErrorBody{Code: agentapi.CodeArtifactTooLarge,
			Error: fmt.Sprintf("job %d: its artifacts would pass the job's budget of %d bytes (%d stored in %d files): profile fewer requests or raise the server's artifact budget", j.ID, budget, budget-left, len(stored))})
	}
	if left <= 0 || r.ContentLength > left {
		overBudget()
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, left)
	sum, size, err := files.Save(r.Body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) && mbe.Limit == left && left < files.MaxBytes():
		overBudget()
		return
	case errors.As(err, &mbe):
		tooLarge(w, j.ID, name, -1, mbe.Limit)
		return
	case errors.Is(err, artifact.ErrTooLarge):
		tooLarge(w, j.ID, name, -1, files.MaxBytes())
		return
	case err != nil:
		s.internal(w, r, fmt.Sprintf("save artifact of job %d", j.ID), err)
		return
	}
	sha := j.HeadSHA
	if side == agentapi.SideBase {
		sha = j.BaseSHA
	}
	if plan, err := agentapi.ParsePlan(j.Config); err == nil && plan.Commit(side) != "" {
		sha = plan.Commit(side)
	}
	row, err := rows.PutArtifact(r.Context(), store.ArtifactUpload{JobID: j.ID, LeaseID: lease, Side: side, SHA: sha,
		Name: name, Size: size, SHA256: sum})
	if err != nil {
		s.storeError(w, r, fmt.Sprintf("store artifact of job %d", j.ID), err)
		return
	}
	s.opts.Log.Info().Int64("job_id", j.ID).Int64("artifact_id", row.ID).Str("side", side).Str("name", name).
		Int64("bytes", size).Msg("artifact stored")
	writeJSON(w, http.StatusCreated, agentapi.ArtifactResponse{ArtifactID: row.ID, Size: size, SHA256: sum})
}

func tooLarge(w http.ResponseWriter, jobID int64, name string, n, limit int64) {
	what := "is"
	if n >= 0 {
		what = fmt.Sprintf("of %d bytes is", n)
	}
	writeJSONStatus(w, http.StatusRequestEntityTooLarge, agentapi.ErrorBody{Code: agentapi.CodeArtifactTooLarge,
		Error: fmt.Sprintf("job %d: artifact %s %s over the server's cap of %d bytes: profile fewer requests (profile.requests) or raise the server's artifact_max_bytes", jobID, name, what, limit)})
}
