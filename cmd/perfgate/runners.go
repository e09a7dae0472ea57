package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/perfgate/perfgate/internal/analysis/fleet"
	"github.com/perfgate/perfgate/internal/store"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
	"github.com/perfgate/perfgate/internal/vocab/suggest"
)

func init() {
	register("runners", command{summary: "list the GPU runners (cards, state, current job, last seen); drain or undrain one", run: runRunners})
}

// The fleet commands read and write the server's database directly, as
// `perfgate baseline` does: no admin token to issue, and the database's
// own access control decides who may drain a runner.
const runnersEpilog = `Subcommands:
  perfgate runners [--db DSN] [--json]        list the runners
  perfgate runners drain NAME [--db DSN]      let NAME finish its job and take no more
  perfgate runners undrain NAME [--db DSN]    put NAME back to work
  perfgate runners revoke NAME [--db DSN]     NAME's token stops working and its name is free
                                              (a lost or leaked token; the runner registers again)

A registration under a name in use is refused unless it presents the name's
current token; a registration unseen for 14 days expires (its name is free).

The commands work on the server's database, found as perfgate serve finds it
(PERFGATE_DATABASE_URL, PERFGATE_DATA_DIR, the server config; --db overrides),
and never create one; every replica sees a drain at the runner's next claim. Exit status: 0 ok, 1 no such
runner, 3 usage or any other error.
`

func runRunners(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) > 0 && (args[0] == "drain" || args[0] == "undrain" || args[0] == "revoke") {
		return runDrain(ctx, env, args[0], args[1:])
	}
	fs := env.flags("runners", "[drain|undrain|revoke NAME] [--db DSN] [--json]")
	db := addStoreFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	fs.epilog = runnersEpilog
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate runners: unknown subcommand %q", fs.Arg(0))
		if s := suggest.Closest(fs.Arg(0), []string{"drain", "undrain", "revoke"}); s != "" {
			fmt.Fprintf(env.stderr, "; did you mean %q?", s)
		}
		fmt.Fprintln(env.stderr, "\nRun 'perfgate runners -h' for the subcommands.")
		return 3
	}
	st, err := db.open(ctx)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate runners: %v\n", err)
		return 3
	}
	defer st.Close()
	list, err := listRunners(ctx, st, time.Now())
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate runners: %v\n", err)
		return 3
	}
	if *asJSON {
		b, err := json.MarshalIndent(map[string]any{"runners": list}, "", "  ")
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate runners: %v\n", err)
			return 3
		}
		fmt.Fprintln(env.stdout, string(b))
		return 0
	}
	if len(list) == 0 {
		fmt.Fprintln(env.stdout, "No runner has registered yet: start one with perfgate agent (docs/install.md: Runner set-up).")
		return 0
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tCARDS\tLABELS\tJOB\tLAST SEEN")
	now := time.Now()
	for _, r := range list {
		job := "-"
		if len(r.Jobs) > 0 {
			var js []string
			for _, j := range r.Jobs {
				js = append(js, fmt.Sprintf("#%d %s %s (%s)", j.ID, j.Repo, j.Tier, ago(now.Sub(j.StartedAt))))
			}
			job = strings.Join(js, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s ago\n", r.Name, r.State, cardsText(r.Cards, r.GPUUUIDs), strings.Join(r.Labels, ","), job, ago(now.Sub(r.LastSeen)))
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(env.stderr, "perfgate runners: %v\n", err)
		return 3
	}
	return 0
}

// runnerView is one runner as `perfgate runners` shows it.
type runnerView struct {
	Name      string       `json:"name"`
	State     string       `json:"state"`
	Labels    []string     `json:"labels"`
	GPUUUIDs  []string     `json:"gpu_uuids"`
	Cards     []fleet.Card `json:"cards"`
	Drained   bool         `json:"drained"`
	DrainedAt *time.Time   `json:"drained_at,omitempty"`
	LastSeen  time.Time    `json:"last_seen"`
	Jobs      []runnerJob  `json:"jobs"`
}

type runnerJob struct {
	ID        int64     `json:"id"`
	Repo      string    `json:"repo"`
	Tier      string    `json:"tier"`
	HeadSHA   string    `json:"head_sha"`
	StartedAt time.Time `json:"started_at"`
}

func listRunners(ctx context.Context, st store.Store, now time.Time) ([]runnerView, error) {
	agents, err := st.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	queue, err := st.ListQueue(ctx)
	if err != nil {
		return nil, err
	}
	jobs := map[int64][]runnerJob{}
	for _, e := range queue {
		if e.Status == jobstate.Running && e.AgentID != 0 {
			jobs[e.AgentID] = append(jobs[e.AgentID], runnerJob{ID: e.ID, Repo: e.Repo, Tier: e.Tier, HeadSHA: e.HeadSHA, StartedAt: e.StartedAt})
		}
	}
	out := make([]runnerView, 0, len(agents))
	for _, a := range agents {
		v := runnerView{Name: a.Name, Labels: a.Labels, GPUUUIDs: a.GPUUUIDs, Cards: a.Cards, Drained: a.Drained, LastSeen: a.LastSeenAt,
			Jobs: jobs[a.ID], State: fleet.RunnerState(a.Drained, len(jobs[a.ID]) > 0, a.LastSeenAt, now)}
		if a.Drained {
			at := a.DrainedAt
			v.DrainedAt = &at
		}
		if v.Jobs == nil {
			v.Jobs = []runnerJob{}
		}
		if v.Cards == nil {
			v.Cards = []fleet.Card{}
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// cardsText sums a runner's cards: "2× NVIDIA H100 80GB HBM3 (80 GiB, driver 550.54.15)".
func cardsText(cards []fleet.Card, uuids []string) string {
	if len(cards) == 0 {
		if len(uuids) == 0 {
			return "-"
		}
		return fmt.Sprintf("%d× (not reported)", len(uuids))
	}
	type kind struct {
		model, driver string
		gib           int
	}
	n := map[kind]int{}
	var order []kind
	for _, c := range cards {
		k := kind{c.Model, c.Driver, int(math.Round(float64(c.MemoryMiB) / 1024))}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	var parts []string
	for _, k := range order {
		s := fmt.Sprintf("%d× %s", n[k], orDash(k.model))
		var extra []string
		if k.gib > 0 {
			extra = append(extra, fmt.Sprintf("%d GiB", k.gib))
		}
		if k.driver != "" {
			extra = append(extra, "driver "+k.driver)
		}
		if len(extra) > 0 {
			s += " (" + strings.Join(extra, ", ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func orDash(s string) string {
	if s == "" {
		return "unknown model"
	}
	return s
}

// ago writes an age for people: "12s", "4m", "3h", "2d".
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func runDrain(ctx context.Context, env *cliEnv, sub string, args []string) int {
	fs := env.flags("runners "+sub, "NAME [--db DSN]")
	db := addStoreFlags(fs)
	fs.epilog = runnersEpilog
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(env.stderr, "perfgate runners %s: give one runner NAME (perfgate runners lists them)\n", sub)
		return 3
	}
	name := fs.Arg(0)
	st, err := db.open(ctx)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate runners %s: %v\n", sub, err)
		return 3
	}
	defer st.Close()
	var a store.Agent
	if sub == "revoke" {
		a, err = st.RevokeAgent(ctx, name)
	} else {
		a, err = st.SetAgentDrained(ctx, name, sub == "drain")
	}
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintf(env.stderr, "perfgate runners %s: no runner named %q", sub, name)
		if agents, lerr := st.ListAgents(ctx); lerr == nil {
			var names []string
			for _, a := range agents {
				names = append(names, a.Name)
			}
			if s := suggest.Closest(name, names); s != "" {
				fmt.Fprintf(env.stderr, "; did you mean %q?", s)
			}
		}
		fmt.Fprintln(env.stderr, "\nperfgate runners lists them.")
		return 1
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate runners %s: %v\n", sub, err)
		return 3
	}
	if sub == "revoke" {
		fmt.Fprintf(env.stdout, "%s is revoked: its token no longer works and the name is free; a job it holds is re-queued when its lease lapses. Register the runner again with the registration token.\n", a.Name)
		return 0
	}
	list, err := listRunners(ctx, st, time.Now())
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate runners %s: %v\n", sub, err)
		return 3
	}
	for _, r := range list {
		if r.Name != a.Name {
			continue
		}
		switch {
		case sub == "undrain":
			fmt.Fprintf(env.stdout, "%s takes jobs again (%s).\n", a.Name, r.State)
		case len(r.Jobs) > 0:
			fmt.Fprintf(env.stdout, "%s is draining: it finishes job #%d (%s %s) and takes no more.\n", a.Name, r.Jobs[0].ID, r.Jobs[0].Repo, r.Jobs[0].Tier)
		default:
			fmt.Fprintf(env.stdout, "%s is drained: it takes no more jobs (perfgate runners undrain %s puts it back).\n", a.Name, a.Name)
		}
	}
	return 0
}
