package web_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/github/artifact"
	"github.com/perfgate/perfgate/internal/github/history"
	"github.com/perfgate/perfgate/internal/github/web"
	"github.com/perfgate/perfgate/internal/store"
)

// The check page of a profiled commit lists its traces under "Profiles",
// each a download; another repository's path does not serve it.
func TestProfileArtifacts(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	dir, err := artifact.NewDir(filepath.Join(t.TempDir(), "artifacts"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	h, err := web.New(web.Options{Store: f.st, Visibility: web.StaticVisibility{repo: true}, Signer: f.signer,
		PublicURL: "https://perfgate.example", Artifacts: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	bad := history.Commit(repo, stepDay)
	if _, err := f.st.Enqueue(ctx, store.JobSpec{Tier: "profile", Kind: "profile", Repo: repo, HeadSHA: bad, Labels: []string{"profiler"}, Config: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	j, err := f.st.Claim(ctx, store.ClaimRequest{Labels: []string{"profiler"}, Lease: time.Minute})
	if err != nil || j.HeadSHA != bad {
		t.Fatalf("claim %+v %v", j, err)
	}
	body := []byte(`{"traceEvents":[]}`)
	sum, n, err := dir.Save(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.st.PutArtifact(ctx, store.ArtifactUpload{JobID: j.ID, LeaseID: j.LeaseID, Side: "head", SHA: bad, Name: "perfgate-sim.trace.json", Size: n, SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	code, page, _ := get(t, nil, srv.URL+"/r/"+repo+"/checks/"+bad+"/nightly")
	link := "/r/" + repo + "/artifacts/" + itoa(a.ID) + "/perfgate-sim.trace.json"
	if code != 200 || !strings.Contains(page, "<h2>Profiles</h2>") || !strings.Contains(page, `href="`+link+`"`) {
		t.Fatalf("check page %d lacks the profile link %s", code, link)
	}
	code, got, hdr := get(t, nil, srv.URL+link)
	if code != 200 || got != string(body) || !strings.Contains(hdr.Get("Content-Disposition"), "perfgate-sim.trace.json") {
		t.Errorf("download: %d %q %v", code, got, hdr)
	}
	if code, _, _ := get(t, nil, srv.URL+"/r/acme/elsewhere/artifacts/"+itoa(a.ID)+"/perfgate-sim.trace.json"); code != 404 {
		t.Errorf("the trace under another repository's path: %d, want 404", code)
	}
	if u := h.ArtifactURL(private, a.ID, "x.json"); !strings.HasPrefix(u, "https://perfgate.example/r/"+private+"/artifacts/") || !strings.Contains(u, "access=") {
		t.Errorf("signed artifact link %q", u)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
