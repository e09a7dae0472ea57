package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/poll"
)

// TestServeKeepsTheDashboardUp runs `demo --serve`: after the loop, the
// server stays up with a month of history whose planted step is a change
// point, and the printed dashboard link opens.
func TestServeKeepsTheDashboardUp(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: measures the simulated engine for ~30 s")
	}
	t.Parallel()
	ctx, cancel := context.WithCancel(poll.Context(t))
	defer cancel()
	var out strings.Builder
	done := make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		_, err := Run(ctx, Options{Dir: t.TempDir(), Slowdown: 1.3, Perfgate: perfgateBin, Log: zerolog.Nop(), Out: &out, Serve: "127.0.0.1:0",
			Ready: func(u string) { ready <- u }})
		done <- err
	}()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		t.Fatalf("demo ended before serving: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "Dashboard: "+url) {
		t.Errorf("the dashboard URL is not printed:\n%s", out.String())
	}
	body := fetch(t, url)
	// The seeded nights are commits of the demo repository: the change
	// point's first bad commit is the one that made the engine slower,
	// so a bisect from it has real commits to measure.
	dir := regexp.MustCompile(`a real git repository at (\S+)\)`).FindStringSubmatch(out.String())
	if dir == nil {
		t.Fatalf("the repository's directory is not printed:\n%s", out.String())
	}
	r := &gitRepo{dir: dir[1]}
	bad, err := r.git("rev-parse", fmt.Sprintf("main~%d", History.Days-1-History.StepDay))
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := r.git("log", "-1", "--format=%s", bad); err != nil || !strings.Contains(msg, "slower") {
		t.Errorf("night %d's commit %s: %q, %v; want the planted slowdown", History.StepDay, bad, msg, err)
	}
	for _, want := range []string{"Open regressions", "output_throughput", bad[:7], "nightly", "quick", "issue #1"} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "issue(s) opened") && !strings.Contains(out.String(), "1 issue(s) opened") {
		t.Errorf("one planted step should open one issue:\n%s", out.String())
	}
	series := strings.Replace(url, "/r/"+History.Repo+"?", "/api/data/repos/"+History.Repo+"/series/points?key=nightly/c=1&metric=output_throughput&", 1)
	if s := fetch(t, series); strings.Count(s, `"date"`) < History.Days || !strings.Contains(s, `"bad_commit": "`+bad) {
		t.Errorf("series API: %.500s", s)
	}
	cancel()
	if err := <-done; err != nil {
		// The dashboard is what this test is about; a pull request the gate
		// could not decide on a busy machine ends the story with its
		// explanation (exit 2), which is allowed here.
		if u, ok := gateUndecided(err); ok {
			t.Logf("the gate could not decide a pull request on this machine: %s", u.Explanation)
		} else {
			t.Fatalf("demo --serve after interrupt: %v", err)
		}
	}
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %.300s", url, resp.StatusCode, b)
	}
	return string(b)
}
