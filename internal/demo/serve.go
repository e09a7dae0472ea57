package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/perfgate/perfgate/internal/github/githubtest"
	"github.com/perfgate/perfgate/internal/github/history"
)

// History is what `demo --serve` seeds: a month of nightlies of two matrix
// cells, 8% slower from night 20 (a planted step), a release on night 8.
var History = history.Spec{Repo: repo, Cells: []string{"c=1", "c=32"}, Days: 30, StepDay: 20, Step: 0.08, Noise: 0.01,
	Requests: 100, Runs: 5, ReleaseDay: 8, ReleaseTag: "v0.3.0", InstallationID: githubtest.InstallationID, Seed: 11}

// serve seeds the history, runs the change-point pass once, and serves
// the dashboard on ln until ctx ends.
func (h *Harness) serve(ctx context.Context, ln net.Listener, o Options) error {
	fmt.Fprintf(o.Out, "\n4. Writing a month of nightly history (%d nights × %d cells, %.0f%% slower from night %d) and looking for change points…\n",
		History.Days, len(History.Cells), 100*History.Step, History.StepDay)
	spec := History
	spec.End = h.clock.now()
	commits, err := h.Repo.nights(spec.Days, spec.StepDay, spec.Step)
	if err != nil {
		return fmt.Errorf("seed history: %w", err)
	}
	spec.Commits = commits
	fmt.Fprintf(o.Out, "   each night is a commit on main of the demo repository (%s..%s); night %d's sets inference_engine/sim.yaml slowdown: %g, so the change point's bisect finds it\n",
		short(commits[0]), short(commits[len(commits)-1]), spec.StepDay, 1+spec.Step)
	if _, err := history.Seed(ctx, h.Store, spec); err != nil {
		return fmt.Errorf("seed history: %w", err)
	}
	sum, err := h.Server.ChangePoints().Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "   %d series, %d change points in %d event(s); %d issue(s) opened on the local GitHub, one bisect asked per event:\n",
		sum.Series, sum.Found, sum.Events, sum.IssuesOpened)
	for _, is := range h.GitHub.Issues() {
		fmt.Fprintf(o.Out, "   #%d %s\n", is.Number, is.Title)
	}
	hs := &http.Server{Handler: h.Server.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	url := h.Server.Web().RepoURL(repo)
	fmt.Fprintf(o.Out, "\nDashboard: %s\n", url)
	fmt.Fprintf(o.Out, "  a series with its change point: %s\n", h.Server.Web().SeriesURL(repo, "nightly/c=1", "output_throughput"))
	if cs := h.GitHub.CheckRuns(); len(cs) > 0 {
		fmt.Fprintf(o.Out, "  the PR's check run (its Details link): %s\n", h.Server.Web().CheckRunURL(repo, cs[0].HeadSHA, "quick"))
	}
	fmt.Fprintf(o.Out, "Serving until interrupted (Ctrl-C).\n")
	if o.Ready != nil {
		o.Ready(url)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdown)
	return nil
}

// publicURL is a browsable URL for a listening address (":8080" →
// "http://localhost:8080").
func publicURL(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// nights commits one commit per night on main: a line in the engine's
// changelog each night, and on night step the engine made slower by step
// (the planted regression a bisect is to find).
func (r *gitRepo) nights(days, step int, slower float64) ([]string, error) {
	out := make([]string, 0, days)
	log := ""
	for d := range days {
		log += fmt.Sprintf("night %d\n", d)
		files := map[string]string{"inference_engine/CHANGELOG.txt": log}
		msg := fmt.Sprintf("inference_engine: nightly change %d", d)
		if d == step {
			files["inference_engine/sim.yaml"] = simKnobs(1 + slower)
			msg = fmt.Sprintf("inference_engine: recompute the KV cache layout each step (%.0f%% slower)", 100*slower)
		}
		sha, err := r.commit(msg, files)
		if err != nil {
			return nil, err
		}
		out = append(out, sha)
	}
	return out, nil
}
