package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/agentapi"
	"github.com/perfgate/perfgate/internal/githubtest"
	"github.com/perfgate/perfgate/internal/store"
)

// A trace larger than the agent API's small-body default goes through the
// server's own mux to the artifact directory; the dashboard serves it back
// only through a signed link to its repository; past artifacts.max_bytes
// the upload is refused with 413 naming the cap.
func TestArtifactUploadAndDownload(t *testing.T) {
	ctx := context.Background()
	gh := githubtest.New(t)
	gh.SetPrivate("acme/inference", true)
	gh.SetPrivate("acme/other", true)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken, PublicURL: "https://perfgate.example",
		Artifacts: ArtifactsConfig{Dir: filepath.Join(t.TempDir(), "artifacts"), MaxBytes: 256 << 10}}
	srv, err := New(cfg, st, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	do := func(method, path, token string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	reg, _ := json.Marshal(agentapi.RegisterRequest{Name: "r", Labels: []string{"gpu"}})
	code, b := do("POST", "/api/v1/agents/register", testToken, reg)
	var rr agentapi.RegisterResponse
	if err := json.Unmarshal(b, &rr); code != 200 || err != nil {
		t.Fatalf("register: %d %s", code, b)
	}
	if _, err := st.Enqueue(ctx, store.JobSpec{Tier: "profile", Kind: agentapi.KindProfile, Repo: "acme/inference", HeadSHA: "abc",
		Labels: []string{"gpu"}, Config: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	code, b = do("POST", "/api/v1/jobs/claim", rr.Token, []byte(`{}`))
	var c agentapi.ClaimResponse
	if err := json.Unmarshal(b, &c); code != 200 || err != nil {
		t.Fatalf("claim: %d %s", code, b)
	}
	trace := []byte(`{"traceEvents":[` + strings.Repeat(`{"ph":"i","ts":1,"pid":1,"tid":1,"name":"x"},`, 3000) + `{"ph":"i","ts":1,"pid":1,"tid":1,"name":"x"}]}`)
	if len(trace) < 100<<10 {
		t.Fatalf("test trace of %d bytes is not over the 64 KiB default", len(trace))
	}
	path := "/api/v1/jobs/" + itoa(c.JobID) + "/artifacts?side=head&name=trace.json&lease_id=" + c.LeaseID
	code, b = do("POST", path, rr.Token, trace)
	var up agentapi.ArtifactResponse
	if err := json.Unmarshal(b, &up); code != 201 || err != nil || up.Size != int64(len(trace)) {
		t.Fatalf("upload of %d bytes: %d %s", len(trace), code, b)
	}
	code, b = do("POST", strings.Replace(path, "trace.json", "big.json", 1), rr.Token, bytes.Repeat([]byte("x"), 300<<10))
	if code != 413 || !strings.Contains(string(b), "cap of 262144 bytes") {
		t.Errorf("upload over artifacts.max_bytes: %d %s", code, b)
	}

	link := srv.Web().ArtifactURL("acme/inference", up.ArtifactID, "trace.json")
	if !strings.HasPrefix(link, "https://perfgate.example/r/acme/inference/artifacts/") || !strings.Contains(link, "access=") {
		t.Fatalf("artifact link %q", link)
	}
	local := strings.TrimPrefix(link, "https://perfgate.example")
	if code, b := do("GET", local, "", nil); code != 200 || !bytes.Equal(b, trace) {
		t.Errorf("download through the signed link: %d, %d bytes", code, len(b))
	}
	if code, _ := do("GET", strings.Split(local, "?")[0], "", nil); code != 404 {
		t.Errorf("download of a private repository's trace without a grant: %d, want 404", code)
	}
	other := srv.Web().ArtifactURL("acme/other", up.ArtifactID, "trace.json")
	if code, _ := do("GET", strings.TrimPrefix(other, "https://perfgate.example"), "", nil); code != 404 {
		t.Errorf("another repository's grant opened the trace: %d, want 404", code)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestArtifactSettings(t *testing.T) {
	clearEnv(t)
	t.Setenv("PERFGATE_ARTIFACTS_DIR", "/var/lib/perfgate/traces")
	t.Setenv("PERFGATE_ARTIFACTS_MAX_BYTES", "1048576")
	c, err := LoadConfig("")
	if err != nil || c.Artifacts.Dir != "/var/lib/perfgate/traces" || c.Artifacts.MaxBytes != 1<<20 {
		t.Fatalf("config %+v, %v", c.Artifacts, err)
	}
	t.Setenv("PERFGATE_ARTIFACTS_MAX_BYTES", "12")
	if _, err := LoadConfig(""); err == nil || !strings.Contains(err.Error(), "PERFGATE_ARTIFACTS_MAX_BYTES (server.yml artifacts.max_bytes)") {
		t.Errorf("a 12-byte cap: %v", err)
	}
}
