package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/perfgate/perfgate/internal/store"
)

type failingLister struct{ err error }

func (f failingLister) ListJobs(context.Context, store.JobFilter) ([]store.Job, error) {
	return nil, f.err
}

// /readyz is unauthenticated: a database outage answers 503 without the
// driver's error, which names the database's host, user and database.
func TestReadyzBodyNamesNoIdentity(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{errors.New(`failed to connect to user=perfgate database=perfgate host=db.internal: dial error`), "database unreachable"},
		{fmt.Errorf("query user=perfgate: %w", context.DeadlineExceeded), "database did not answer within 3s"},
	} {
		rec := httptest.NewRecorder()
		Readyz(failingLister{tt.err}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		body := rec.Body.String()
		if rec.Code != http.StatusServiceUnavailable || strings.TrimSpace(body) != tt.want || strings.Contains(body, "perfgate") {
			t.Errorf("%v: %d %q, want 503 %q", tt.err, rec.Code, body, tt.want)
		}
	}
}
