package agentapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"time"

	"github.com/perfgate/perfgate/internal/artifact"
	"github.com/perfgate/perfgate/internal/store"
)

// ProfilePlan makes a job a profiling pass instead of measured runs: for
// each commit it names (BaseSHA, then HeadSHA), the agent starts the
// engine from the commit's checkout with profiling on, sends the plan's
// warm-up, records Requests requests with the engine's profiler
// (POST /start_profile … /stop_profile, vLLM's and perfgate sim's) or
// Command, and uploads the trace files it finds as the job's artifacts.
type ProfilePlan struct {
	Requests int `json:"requests"`
	// Command, when set, is the profile.command template run with the load
	// instead of the engine's endpoints (config.ProfilePlaceholders).
	Command []string `json:"command,omitempty"`
	Timeout Duration `json:"timeout,omitempty"`
	// MaxBytes caps one uploaded file; the server refuses past its own.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// KindProfile is the job kind of a profiling pass.
const KindProfile = "profile"

// ProfileSides lists the sides a profiling plan profiles, base first.
func (p Plan) ProfileSides() []string {
	if p.BaseSHA != "" && p.BaseSHA != p.HeadSHA {
		return []string{SideBase, SideHead}
	}
	return []string{SideHead}
}

// ArtifactResponse is a stored artifact.
type ArtifactResponse struct {
	ArtifactID int64  `json:"artifact_id"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
}

// CodeArtifactTooLarge: the upload is over the server's cap (413).
const CodeArtifactTooLarge = "artifact_too_large"

// ErrArtifactTooLarge is the server's refusal of a file over its cap.
var ErrArtifactTooLarge = errors.New("artifact over the server's size cap")

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
	if side != "" && side != SideBase && side != SideHead {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("artifacts: side %q: want %q, %q or none", side, SideBase, SideHead))
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
		writeJSONStatus(w, http.StatusRequestEntityTooLarge, ErrorBody{Code: CodeArtifactTooLarge,
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
	if side == SideBase {
		sha = j.BaseSHA
	}
	if plan, err := ParsePlan(j.Config); err == nil && plan.Commit(side) != "" {
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
	writeJSON(w, http.StatusCreated, ArtifactResponse{ArtifactID: row.ID, Size: size, SHA256: sum})
}

func tooLarge(w http.ResponseWriter, jobID int64, name string, n, limit int64) {
	what := "is"
	if n >= 0 {
		what = fmt.Sprintf("of %d bytes is", n)
	}
	writeJSONStatus(w, http.StatusRequestEntityTooLarge, ErrorBody{Code: CodeArtifactTooLarge,
		Error: fmt.Sprintf("job %d: artifact %s %s over the server's cap of %d bytes: profile fewer requests (profile.requests) or raise the server's artifact_max_bytes", jobID, name, what, limit)})
}

// PutArtifact uploads the file at path as one of the job's artifacts;
// ErrArtifactTooLarge when the server's cap refuses it.
func (c *Client) PutArtifact(ctx context.Context, jobID int64, lease, side, path, name string) (ArtifactResponse, error) {
	var out ArtifactResponse
	var opened []*os.File
	defer func() {
		for _, f := range opened {
			f.Close()
		}
	}()
	body := func() io.Reader {
		f, err := os.Open(path)
		if err != nil {
			return errReader{err}
		}
		opened = append(opened, f)
		return io.NopCloser(f)
	}
	q := url.Values{"lease_id": {lease}, "side": {side}, "name": {name}}
	_, _, err := c.send(ctx, request{op: "artifacts", method: http.MethodPost, path: jobPath(jobID, "artifacts"), q: q,
		body: body, out: &out, agentAuth: true, timeout: max(c.cfg.Timeout, 10*time.Minute)})
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusRequestEntityTooLarge {
			return out, fmt.Errorf("upload artifact %s of job %d: %w (%s)", name, jobID, ErrArtifactTooLarge, se.Msg)
		}
		return out, fmt.Errorf("upload artifact %s of job %d: %w", name, jobID, err)
	}
	return out, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
