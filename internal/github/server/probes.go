package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/perfgate/perfgate/internal/store"
)

// Healthz is the liveness probe: the process serves HTTP. It touches
// nothing else, so a database outage never restarts every replica.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
}

// jobLister is the one store method the readiness probe needs.
type jobLister interface {
	ListJobs(ctx context.Context, f store.JobFilter) ([]store.Job, error)
}

// Readyz is the readiness probe: the database answers a one-row query
// within 3 seconds. A replica whose database is away stops receiving
// traffic until it is back, and is not restarted.
func Readyz(st jobLister) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if _, err := st.ListJobs(ctx, store.JobFilter{Limit: 1}); err != nil {
			// The probe is unauthenticated: the driver's error names the
			// database's host, user and database, so it stays out of the
			// body.
			msg := "database unreachable"
			if errors.Is(err, context.DeadlineExceeded) {
				msg = "database did not answer within 3s"
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}
