package demo

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/history"
)

// TestServeKeepsTheDashboardUp runs `demo --serve`: after the loop, the
// server stays up with a month of history whose planted step is a change
// point, and the printed dashboard link opens.
func TestServeKeepsTheDashboardUp(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: measures the simulated engine for ~30 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	bad := history.Commit(History.Repo, History.StepDay)
	for _, want := range []string{"Open change points", "output_throughput", bad[:7], "nightly", "quick"} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	series := strings.Replace(url, "/r/"+History.Repo+"?", "/api/data/repos/"+History.Repo+"/series/points?key=nightly/c=1&metric=output_throughput&", 1)
	if s := fetch(t, series); strings.Count(s, `"date"`) < History.Days || !strings.Contains(s, `"bad_commit": "`+bad) {
		t.Errorf("series API: %.500s", s)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("demo --serve after interrupt: %v", err)
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
