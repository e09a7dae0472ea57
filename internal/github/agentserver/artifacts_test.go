package agentserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/github/agentserver"
	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// TestArtifacts: a runner uploads a trace under its lease; a retried
// upload stores once; past the server's cap it is refused with 413 saying
// the cap; a stale lease, another agent and a bad name are refused.
func TestArtifacts(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(agentserver.NewServer(st, agentserver.Options{RegistrationToken: regToken, Lease: time.Minute,
		ArtifactFiles: dir, ArtifactRows: st}))
	defer ts.Close()
	a, b := register(t, ts, "a"), register(t, ts, "b")
	job, err := st.Enqueue(ctx, store.JobSpec{Tier: "profile", Kind: agentapi.KindProfile, Repo: "o/r", HeadSHA: "abc", Labels: []string{"gpu"},
		GPUUUID: "GPU-a", Config: testPlan(t)})
	if err != nil {
		t.Fatal(err)
	}
	var c agentapi.ClaimResponse
	if code := call(t, ts, a.Token, "/api/v1/jobs/claim", struct{}{}, &c); code != 200 || c.JobID != job.ID {
		t.Fatalf("claim: %d %+v", code, c)
	}
	client, err := agentapi.NewClient(agentapi.ClientConfig{Server: ts.URL, Token: a.Token, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(t.TempDir(), "trace.json")
	if err := os.WriteFile(small, []byte(`{"traceEvents":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	up, err := client.PutArtifact(ctx, c.JobID, c.LeaseID, agentapi.SideHead, small, "trace.json")
	if err != nil || up.ArtifactID == 0 || up.Size != 18 {
		t.Fatalf("upload = %+v, %v", up, err)
	}
	again, err := client.PutArtifact(ctx, c.JobID, c.LeaseID, agentapi.SideHead, small, "trace.json")
	if err != nil || again.ArtifactID != up.ArtifactID {
		t.Errorf("retried upload = %+v, %v; want artifact %d again", again, err, up.ArtifactID)
	}
	row, err := st.GetArtifact(ctx, up.ArtifactID)
	if err != nil || row.SHA != "abc" || row.Side != "head" || row.Repo != "o/r" {
		t.Errorf("stored row %+v, %v", row, err)
	}
	f, err := dir.Open(row.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(f)
	f.Close()
	if string(body) != `{"traceEvents":[]}` {
		t.Errorf("stored bytes %q", body)
	}

	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 2<<10)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutArtifact(ctx, c.JobID, c.LeaseID, agentapi.SideBase, big, "big.json"); !errors.Is(err, agentapi.ErrArtifactTooLarge) ||
		!strings.Contains(err.Error(), "cap of 1024 bytes") {
		t.Errorf("upload over the cap: %v, want ErrArtifactTooLarge naming the cap", err)
	}
	// Chunked (no Content-Length): the cap still holds.
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/v1/jobs/"+itoa(c.JobID)+"/artifacts?lease_id="+c.LeaseID+"&name=big.json",
		io.MultiReader(strings.NewReader(strings.Repeat("y", 2<<10))))
	req.Header.Set("Authorization", "Bearer "+a.Token)
	if resp, err := ts.Client().Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != 413 || resp.ContentLength == 0 {
		t.Errorf("chunked upload over the cap: %d, want 413", resp.StatusCode)
	}
	for _, tc := range []struct {
		token, query string
		want         int
	}{
		{a.Token, "lease_id=stale&name=t.json", 409},
		{b.Token, "lease_id=" + c.LeaseID + "&name=t.json", 403},
		{a.Token, "lease_id=" + c.LeaseID + "&name=../etc/passwd", 400},
		{a.Token, "lease_id=" + c.LeaseID + "&name=t.json&side=middle", 400},
	} {
		if code := call(t, ts, tc.token, "/api/v1/jobs/"+itoa(c.JobID)+"/artifacts?"+tc.query, []byte("x"), nil); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.query, code, tc.want)
		}
	}
	if list, err := st.ListArtifacts(ctx, c.JobID); err != nil || len(list) != 1 {
		t.Errorf("artifacts after the refusals: %+v, %v; want the one trace", list, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
