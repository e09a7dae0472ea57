package agentapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
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
