package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/analysis/profile"
	"github.com/perfgate/perfgate/internal/github/githubtest/ghtest"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/store/storetest"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
)

// replica is one server process on a shared database.
type replica struct {
	t   *testing.T
	srv *Server
	st  store.Store
	ts  *httptest.Server
}

// newReplicas starts n servers on one fresh PostgreSQL database, with no
// data directory and no artifacts.dir: what they keep, they keep in it.
func newReplicas(t *testing.T, n int) []*replica {
	t.Helper()
	dsn := storetest.PostgresDSN(t)
	gh := ghtest.New(t)
	gh.SetPrivate("acme/inference", true)
	var out []*replica
	for range n {
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg := Config{GitHub: gh.AppConfig(), AgentRegistrationToken: testToken, PublicURL: "https://perfgate.example"}
		srv, err := New(cfg, st, zerolog.Nop(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		out = append(out, &replica{t: t, srv: srv, st: st, ts: ts})
	}
	return out
}

func (r *replica) do(method, path, token string, body []byte) (int, []byte) {
	r.t.Helper()
	req, _ := http.NewRequest(method, r.ts.URL+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func gunzipFixture(t *testing.T, name string) []byte {
	t.Helper()
	f, err := os.Open("../../../testdata/profile/" + name + ".trace.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Two replicas on one PostgreSQL database: the base and head traces a
// runner uploads through the first are downloaded through the second's
// signed links, byte for byte, and the second's judge reads them and
// writes the same diff the profile package's golden file holds. Before,
// each replica kept traces on its own disk and the second answered 410.
func TestReplicasShareArtifacts(t *testing.T) {
	if testing.Short() {
		t.Skip("two servers on PostgreSQL")
	}
	ctx := context.Background()
	rs := newReplicas(t, 2)
	one, two := rs[0], rs[1]
	reg, _ := json.Marshal(agentapi.RegisterRequest{Name: "r", Labels: []string{"gpu"}})
	code, b := one.do("POST", "/api/v1/agents/register", testToken, reg)
	var rr agentapi.RegisterResponse
	if err := json.Unmarshal(b, &rr); code != 200 || err != nil {
		t.Fatalf("register: %d %s", code, b)
	}
	if _, err := one.st.Enqueue(ctx, store.JobSpec{Tier: "profile", Kind: agentapi.KindProfile, Repo: "acme/inference", HeadSHA: "abc",
		Labels: []string{"gpu"}, Config: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	code, b = one.do("POST", "/api/v1/jobs/claim", rr.Token, []byte(`{}`))
	var c agentapi.ClaimResponse
	if err := json.Unmarshal(b, &c); code != 200 || err != nil {
		t.Fatalf("claim: %d %s", code, b)
	}
	traces := map[string][]byte{agentapi.SideBase: gunzipFixture(t, "base"), agentapi.SideHead: gunzipFixture(t, "eager")}
	ids := map[string]int64{}
	for side, body := range traces {
		code, b := one.do("POST", "/api/v1/jobs/"+itoa(c.JobID)+"/artifacts?side="+side+"&name=trace.json&lease_id="+c.LeaseID, rr.Token, body)
		var up agentapi.ArtifactResponse
		if err := json.Unmarshal(b, &up); code != 201 || err != nil || up.Size != int64(len(body)) {
			t.Fatalf("upload %s (%d bytes) through replica one: %d %s", side, len(body), code, b)
		}
		ids[side] = up.ArtifactID
	}
	for side, body := range traces {
		link := two.srv.Web().ArtifactURL("acme/inference", ids[side], "trace.json")
		code, b := two.do("GET", strings.TrimPrefix(link, "https://perfgate.example"), "", nil)
		if code != 200 || !bytes.Equal(b, body) {
			t.Errorf("download of the %s trace through replica two: %d, %d bytes (want %d)", side, code, len(b), len(body))
		}
	}
	// The judge's path (dispatch's profileDiff): the traces as replica
	// two's dispatcher opens them.
	arts, err := two.st.ListArtifacts(ctx, c.JobID)
	if err != nil || len(arts) != 2 {
		t.Fatalf("artifacts of job %d = %v, %v", c.JobID, arts, err)
	}
	parsed := map[string]*profile.Trace{}
	for _, a := range arts {
		f, err := traceFiles{two.srv.arts}.Open(a.SHA256)
		if err != nil {
			t.Fatalf("replica two opens the %s trace: %v", a.Side, err)
		}
		tr, err := profile.Parse(f)
		f.Close()
		if err != nil {
			t.Fatalf("parse the %s trace: %v", a.Side, err)
		}
		parsed[a.Side] = tr
	}
	d := profile.Compare(parsed[agentapi.SideBase], parsed[agentapi.SideHead])
	golden, err := os.ReadFile("../../../testdata/profile/diff-eager.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Markdown(); got != string(golden) {
		t.Errorf("replica two's diff differs from testdata/profile/diff-eager.md:\n%s", got)
	}
}

// Two replicas on one PostgreSQL database fire the same timers at (about)
// the same time — their clocks 2 s apart — and each periodic job runs in
// one of them: the change-point pass, the nightly schedule, the artifact
// retention sweep and the queue notes; the next period runs once again.
func TestReplicasRunSingletonsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("two servers on PostgreSQL")
	}
	ctx := context.Background()
	rs := newReplicas(t, 2)
	const noteEvery = 20 * time.Second
	jobs := []struct {
		name string
		run  func(r *replica, at time.Time) (bool, error)
	}{
		{"change-point pass", func(r *replica, at time.Time) (bool, error) { return r.srv.ChangePoints().RunTurn(ctx, at) }},
		{"nightly", func(r *replica, at time.Time) (bool, error) {
			return r.srv.dispatch.NightlyTurn(ctx, at, nil, r.srv.App().ClientCreator())
		}},
		{"artifact retention", func(r *replica, at time.Time) (bool, error) { return r.srv.sweepTurn(ctx, at, time.Hour) }},
		{"queue notes", func(r *replica, at time.Time) (bool, error) { return r.srv.dispatch.QueueNotesTurn(ctx, at, noteEvery) }},
		// Ticks 5 s apart here so that the replicas' 2 s skew falls in one
		// period (the default, 1 s: at most once a second across them).
		{"start sync", func(r *replica, at time.Time) (bool, error) {
			return r.srv.dispatch.StartSyncTurn(ctx, at, 5*time.Second)
		}},
	}
	fire := time.Date(2026, 12, 4, 5, 30, 0, 0, time.UTC)
	for _, j := range jobs {
		t.Run(j.name, func(t *testing.T) {
			for day := range 2 {
				at := fire.Add(time.Duration(day) * 24 * time.Hour)
				ran := 0
				for i, r := range rs {
					skew := time.Duration(i) * 2 * time.Second // the second replica's clock is ahead
					ok, err := j.run(r, at.Add(skew))
					if err != nil {
						t.Fatalf("replica %d, day %d: %v", i+1, day, err)
					}
					if ok {
						ran++
					}
				}
				if ran != 1 {
					t.Errorf("day %d: %s ran in %d of 2 replicas, want 1", day, j.name, ran)
				}
			}
		})
	}
}
