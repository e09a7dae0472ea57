package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// ArtifactFiles opens the files runners uploaded, by SHA-256
// (artifact.Dir, artifact.DB).
type ArtifactFiles interface {
	Open(sum string) (io.ReadSeekCloser, error)
}

// ArtifactURL is the absolute, signed link that downloads one artifact
// (a profile trace) of repo.
func (h *Handler) ArtifactURL(repo string, id int64, name string) string {
	return h.signer.Sign(repo, h.publicURL+artifactPath(repo, id, name))
}

func artifactPath(repo string, id int64, name string) string {
	return "/r/" + repo + "/artifacts/" + strconv.FormatInt(id, 10) + "/" + url.PathEscape(name)
}

// artifact serves one artifact as a download: GET
// /r/{owner}/{name}/artifacts/{id}/{file}.
func (h *Handler) artifact(w http.ResponseWriter, r *http.Request, repo string) {
	if h.artifacts == nil {
		h.fail(w, r, http.StatusNotFound, "this perfgate server keeps no artifacts.")
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("artifact %q is not a number.", r.PathValue("id")))
		return
	}
	a, err := h.st.GetArtifact(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && a.Repo != repo) {
		h.fail(w, r, http.StatusNotFound, h.noArtifact(repo, id))
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	f, err := h.artifacts.Open(a.SHA256)
	if errors.Is(err, os.ErrNotExist) {
		h.fail(w, r, http.StatusGone, fmt.Sprintf("artifact %d (%s) is recorded but its file is gone from the server's artifact store.", id, a.Name))
		return
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", a.Name))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, a.Name, a.CreatedAt, f)
}

// profileArtifacts lists the artifacts of the profiling passes of one
// commit, newest pass first, for its check run page.
func (h *Handler) profileArtifacts(r *http.Request, repo, sha string) []profileLink {
	jobs, err := h.st.ListJobs(r.Context(), store.JobFilter{Repo: repo, HeadSHA: sha, Tier: "profile", Newest: true, Limit: 5})
	if err != nil {
		return nil
	}
	var out []profileLink
	for _, j := range jobs {
		arts, err := h.st.ListArtifacts(r.Context(), j.ID)
		if err != nil {
			continue
		}
		for _, a := range arts {
			out = append(out, profileLink{Job: j.ID, Side: a.Side, Name: a.Name, Size: a.Size, URL: artifactPath(repo, a.ID, a.Name)})
		}
	}
	return out
}

type profileLink struct {
	Job        int64
	Side, Name string
	Size       int64
	URL        string
}

// noArtifact is the 404 of an artifact link that finds no row: with a
// retention period, the likely reason (the sweep deleted it) and what to do.
func (h *Handler) noArtifact(repo string, id int64) string {
	if h.artKeep <= 0 {
		return fmt.Sprintf("%s has no artifact %d.", repo, id)
	}
	keep := h.artKeep.String()
	if h.artKeep%(24*time.Hour) == 0 {
		keep = fmt.Sprintf("%d days", h.artKeep/(24*time.Hour))
	}
	return fmt.Sprintf("%s has no artifact %d: this server deletes profile traces %s after their upload (artifacts.keep), "+
		"so an older link finds nothing; profile the commit again for a new trace.", repo, id, keep)
}
