package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/storetest"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// A trace larger than the agent API's small-body default goes through the
// server's own mux to the artifact directory; the dashboard serves it back
// only through a signed link to its repository; past artifacts.max_bytes
// the upload is refused with 413 naming the cap.
func TestArtifactUploadAndDownload(t *testing.T) {
	ctx := context.Background()
	gh := ghtest.New(t)
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
	if c.Artifacts.Keep.Duration() != 30*24*time.Hour {
		t.Errorf("default keep %v, want 30 days", c.Artifacts.Keep.Duration())
	}
	for v, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "forever": 0, "0": 0} {
		t.Setenv("PERFGATE_ARTIFACTS_KEEP", v)
		if c, err := LoadConfig(""); err != nil || c.Artifacts.Keep.Duration() != want {
			t.Errorf("PERFGATE_ARTIFACTS_KEEP=%s: keep %v, %v; want %v", v, c.Artifacts.Keep.Duration(), err, want)
		}
	}
	for _, v := range []string{"10m", "a month", "-3d"} {
		t.Setenv("PERFGATE_ARTIFACTS_KEEP", v)
		if _, err := LoadConfig(""); err == nil || !strings.Contains(err.Error(), "PERFGATE_ARTIFACTS_KEEP (server.yml artifacts.keep)") ||
			!strings.Contains(err.Error(), "at least 1h, e.g. 30d or 720h, or 0 or forever") {
			t.Errorf("PERFGATE_ARTIFACTS_KEEP=%s: %v", v, err)
		}
	}
	t.Setenv("PERFGATE_ARTIFACTS_KEEP", "")
	yml := filepath.Join(t.TempDir(), "server.yml")
	if err := os.WriteFile(yml, []byte("artifacts:\n  keep: 14d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadConfig(yml); err != nil || c.Artifacts.Keep.Duration() != 14*24*time.Hour {
		t.Errorf("server.yml keep: 14d: %v, %v", c.Artifacts.Keep.Duration(), err)
	}
	if err := os.WriteFile(yml, []byte("artifacts:\n  keep: soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(yml); err == nil || !strings.Contains(err.Error(), "line 2: artifacts.keep \"soon\": want a period") {
		t.Errorf("server.yml keep: soon: %v", err)
	}
	t.Setenv("PERFGATE_ARTIFACTS_MAX_BYTES", "12")
	if _, err := LoadConfig(""); err == nil || !strings.Contains(err.Error(), "PERFGATE_ARTIFACTS_MAX_BYTES (server.yml artifacts.max_bytes)") {
		t.Errorf("a 12-byte cap: %v", err)
	}
}

// The retention sweep: past artifacts.keep (the default 30 days) an
// artifact's row and file go, but a file shared with a newer row stays; a
// file no row references (its row write failed) goes; an upload still in
// tmp/ stays; a link to a swept artifact answers 404 saying why.
func TestArtifactRetentionSweep(t *testing.T) {
	ctx := context.Background()
	gh := ghtest.New(t)
	gh.SetPrivate("acme/inference", true)
	clock := storetest.NewClock()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"), store.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs bytes.Buffer
	cfg := Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken, PublicURL: "https://perfgate.example",
		Artifacts: ArtifactsConfig{Dir: filepath.Join(t.TempDir(), "artifacts")}}
	srv, err := New(cfg, st, zerolog.New(&logs), clock.Now)
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
	// upload runs a profile job and uploads the files under it.
	upload := func(files map[string]string) map[string]agentapi.ArtifactResponse {
		t.Helper()
		if _, err := st.Enqueue(ctx, store.JobSpec{Tier: "profile", Kind: agentapi.KindProfile, Repo: "acme/inference", HeadSHA: "abc",
			Labels: []string{"gpu"}, Config: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		code, b := do("POST", "/api/v1/jobs/claim", rr.Token, []byte(`{}`))
		var c agentapi.ClaimResponse
		if err := json.Unmarshal(b, &c); code != 200 || err != nil || c.JobID == 0 {
			t.Fatalf("claim: %d %s", code, b)
		}
		out := map[string]agentapi.ArtifactResponse{}
		for name, body := range files {
			code, b := do("POST", "/api/v1/jobs/"+itoa(c.JobID)+"/artifacts?side=head&name="+name+"&lease_id="+c.LeaseID, rr.Token, []byte(body))
			var up agentapi.ArtifactResponse
			if err := json.Unmarshal(b, &up); code != 201 || err != nil {
				t.Fatalf("upload %s: %d %s", name, code, b)
			}
			out[name] = up
		}
		return out
	}
	file := func(content string) string {
		sum := sha256.Sum256([]byte(content))
		h := hex.EncodeToString(sum[:])
		return filepath.Join(cfg.Artifacts.Dir, h[:2], h)
	}
	old := upload(map[string]string{"old.json": "old trace", "shared.json": "shared trace"})
	clock.Advance(31 * 24 * time.Hour)
	fresh := upload(map[string]string{"shared.json": "shared trace"})
	// A file whose row write failed, and an upload in progress.
	if _, _, err := srv.arts.Save(strings.NewReader("orphan trace")); err != nil {
		t.Fatal(err)
	}
	inProgress := filepath.Join(cfg.Artifacts.Dir, "tmp", "upload-123")
	if err := os.WriteFile(inProgress, []byte("half a tr"), 0o640); err != nil {
		t.Fatal(err)
	}
	// The stored files were written hours ago (the filesystem's clock).
	hoursAgo := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{file("old trace"), file("shared trace"), file("orphan trace")} {
		if err := os.Chtimes(p, hoursAgo, hoursAgo); err != nil {
			t.Fatal(err)
		}
	}

	if err := srv.sweepArtifacts(ctx); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{file("old trace"): false, file("shared trace"): true, file("orphan trace"): false, inProgress: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists=%v after the sweep, want %v", p, err == nil, want)
		}
	}
	for _, name := range []string{"old.json", "shared.json"} {
		link := srv.Web().ArtifactURL("acme/inference", old[name].ArtifactID, name)
		code, b := do("GET", strings.TrimPrefix(link, "https://perfgate.example"), "", nil)
		if code != 404 || !strings.Contains(string(b), "deletes profile traces 30 days after their upload (artifacts.keep)") {
			t.Errorf("download of swept %s: %d %s", name, code, b)
		}
	}
	link := srv.Web().ArtifactURL("acme/inference", fresh["shared.json"].ArtifactID, "shared.json")
	if code, b := do("GET", strings.TrimPrefix(link, "https://perfgate.example"), "", nil); code != 200 || string(b) != "shared trace" {
		t.Errorf("download of the newer row's shared file: %d %q", code, b)
	}
	// 9 + 12 bytes of rows; the orphan's 12 bytes and old trace's 9 bytes of files.
	if !strings.Contains(logs.String(), `"rows":2,"row_bytes":21,"files":2,"bytes":21,"tmp_files":0,"tmp_bytes":0,"files_kept":1,"message":"artifact retention sweep"`) {
		t.Errorf("sweep log: %s", logs.String())
	}
}
