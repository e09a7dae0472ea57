// Package promotion holds the rules a baseline is promoted under, as pure
// functions of runs and reports: every baseline is traceable (Trace,
// Check), a baseline only moves up (WorseMetrics), and which stored
// baselines are the noise history of a comparison (Sessions). The store
// edge that reads and writes baselines is internal/github/baseline.
package promotion

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// Provenance is what a baseline row records about where its runs came
// from, read from the runs once Trace found them complete.
type Provenance struct {
	Commit, Image, GPU, GPUUUID, Driver string
	Load                                result.Load
	DatasetHash                         string
	Warmup                              int
}

// SimImage is what a baseline of the built-in simulated engine stores as
// its image digest: the sim has no image, and its behaviour is fixed by the
// perfgate build recorded in each run's "tool".
const SimImage = "sim"

var (
	// PinnedImage is an image pinned by content, as the engine and the
	// config require: a tag could move under a stored baseline.
	PinnedImage = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)
	gitSHA      = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
)

// Trace lists what keeps runs from being a traceable baseline. Each
// missing field is reported once with the runs that lack it, so one
// refusal says everything to fix.
func Trace(runs []*result.Result, commit string) (Provenance, []string) {
	var problems []string
	if len(runs) < gate.MinRuns {
		problems = append(problems, fmt.Sprintf("%d run(s): a baseline needs at least %d (its median and spread need three)", len(runs), gate.MinRuns))
	}
	lacking := map[string][]int{}
	var order []string
	lack := func(what string, i int) {
		if _, seen := lacking[what]; !seen {
			order = append(order, what)
		}
		lacking[what] = append(lacking[what], i+1)
	}
	commits := map[string]bool{}
	for i, r := range runs {
		if r == nil || r.Perfgate == nil {
			lack("perfgate's section (a plain vLLM result records no GPU, driver, image or load; run perfgate bench)", i)
			continue
		}
		env, load := r.Perfgate.Environment, r.Perfgate.Load
		if env.GPUName == "" {
			lack("GPU name (environment.gpu_name)", i)
		}
		if env.GPUUUID == "" {
			lack("GPU UUID (environment.gpu_uuid)", i)
		}
		if !env.Sim {
			if env.Driver == "" {
				lack("driver version (environment.driver_version)", i)
			}
			if !engineTraceable(env) {
				lack(fmt.Sprintf("engine identity (environment.engine_image is %q; want an image pinned by digest, name@sha256:<64 hex>; "+
					"a built image (environment.engine_build); or the commit's tree the engine ran from (environment.source_tree) — or the sim marker)", env.EngineImage), i)
			}
		}
		if load.Model == "" {
			lack("load.model", i)
		}
		if load.Endpoint == "" {
			lack("load.endpoint", i)
		}
		if load.Dataset == "" {
			lack("load.dataset", i)
		}
		if load.NumPrompts <= 0 {
			lack("load.num_prompts", i)
		}
		if load.RequestRate == 0 {
			lack("load.request_rate", i)
		}
		if r.Perfgate.DatasetHash == "" {
			lack("dataset hash (dataset_hash)", i)
		}
		if env.Commit != "" {
			commits[strings.ToLower(env.Commit)] = true
		}
	}
	for _, what := range order {
		problems = append(problems, fmt.Sprintf("no %s in %s", what, runList(lacking[what], len(runs))))
	}

	var p Provenance
	p.Commit = strings.ToLower(strings.TrimSpace(commit))
	cs := make([]string, 0, len(commits))
	for c := range commits {
		cs = append(cs, c)
	}
	sort.Strings(cs)
	if p.Commit == "" && len(cs) > 1 {
		problems = append(problems, fmt.Sprintf("the runs were measured at different commits (%s)", strings.Join(cs, ", ")))
	} else {
		if p.Commit == "" && len(cs) == 1 {
			p.Commit = cs[0]
		}
		for _, c := range cs {
			switch {
			case !sameCommit(p.Commit, c):
				problems = append(problems, fmt.Sprintf("a run was measured at commit %s, not %s", c, p.Commit))
			case len(c) > len(p.Commit):
				p.Commit = c // keep the full SHA where a run has it
			}
		}
	}
	switch {
	case p.Commit == "":
		problems = append(problems, "no commit: pass the commit the runs measured (--commit SHA)")
	case !gitSHA.MatchString(p.Commit):
		problems = append(problems, fmt.Sprintf("commit %q is not a git SHA (7 to 40 hex digits)", p.Commit))
	}
	if len(problems) > 0 {
		return Provenance{}, problems
	}
	first := runs[0].Perfgate
	p.Image = EngineIdentity(first.Environment)
	p.GPU, p.GPUUUID, p.Driver = first.Environment.GPUName, first.Environment.GPUUUID, first.Environment.Driver
	p.Load, p.DatasetHash, p.Warmup = first.Load, first.DatasetHash, first.Warmup
	return p, nil
}

// engineTraceable reports whether a run names the engine it measured well
// enough to start it again: an image pinned by digest; an image a build
// step made from the commit (its id); or a command the runner ran in the
// commit's checkout, whose tree digest the run records. The commit itself
// is checked with the other fields.
func engineTraceable(env result.Environment) bool {
	switch {
	case PinnedImage.MatchString(env.EngineImage), env.EngineBuild != "":
		return true
	}
	return env.EngineImage != "" && env.SourceTree != "" && env.Commit != ""
}

// EngineIdentity is what a baseline stores as its engine: the sim marker,
// the image a build made from the commit, or the pinned image or command
// that ran (the commit is stored beside it).
func EngineIdentity(env result.Environment) string {
	switch {
	case env.Sim:
		return SimImage
	case env.EngineBuild != "":
		return env.EngineBuild
	}
	return env.EngineImage
}

// sameCommit accepts a short SHA for its full one.
func sameCommit(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(a) >= 7 && strings.HasPrefix(b, a)
}

func runList(idx []int, total int) string {
	if len(idx) == total && total > 1 {
		return "any run"
	}
	sort.Ints(idx)
	s := make([]string, len(idx))
	for i, n := range idx {
		s[i] = strconv.Itoa(n)
	}
	if len(idx) == 1 {
		return "run " + s[0]
	}
	return "runs " + strings.Join(s, ", ")
}
