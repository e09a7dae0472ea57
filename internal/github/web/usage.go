package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store"
)

// usageWeeks is how many weeks of GPU usage the repository page shows.
const usageWeeks = 8

// Usage is a repository's GPU usage as the API serves it.
type Usage struct {
	Repo  string           `json:"repo"`
	Weeks int              `json:"weeks"`
	Rows  []fleet.UsageRow `json:"rows"`
	// Note says what the figures do not count.
	Note string `json:"note"`
}

// usageNote is what usage figures leave out, said wherever they are shown.
const usageNote = "Cache hits count baseline reuse only: runners do not report source-cache hits yet."

func (h *Handler) usageOf(ctx context.Context, repo string, weeks int) (Usage, error) {
	rows, err := h.st.Usage(ctx, store.UsageFilter{Repo: repo, Since: fleet.WeeksBack(h.now(), weeks)})
	if err != nil {
		return Usage{}, err
	}
	if rows == nil {
		rows = []fleet.UsageRow{}
	}
	return Usage{Repo: repo, Weeks: weeks, Rows: rows, Note: usageNote}, nil
}

// apiUsage: GET /api/data/repos/{owner}/{name}/usage[?weeks=N] — GPU-hours,
// jobs, baseline reuse and regressions caught by tier and ISO week.
func (h *Handler) apiUsage(w http.ResponseWriter, r *http.Request, repo string) {
	weeks := usageWeeks
	if v := r.URL.Query().Get("weeks"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 520 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("weeks=%q: give a whole number of weeks from 1 to 520", v)})
			return
		}
		weeks = n
	}
	u, err := h.usageOf(r.Context(), repo, weeks)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}
