package baseline

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/analysis/gate"
	"github.com/perfgate/perfgate/internal/vocab/result"
)

// provenance is what a baseline row records about where its runs came
// from, read from the runs once trace found them complete.
type provenance struct {
	commit, image, gpu, gpuUUID, driver string
	load                                result.Load
	datasetHash                         string
	warmup                              int
}

var (
	// pinnedImage is an image pinned by content, as the engine and the
	// config require: a tag could move under a stored baseline.
	pinnedImage = regexp.MustCompile(`^[^@\s]+@sha256:[0-9a-f]{64}$`)
	gitSHA      = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
)

// trace lists what keeps runs from being a traceable baseline. Each
// missing field is reported once with the runs that lack it, so one
// refusal says everything to fix.
func trace(runs []*result.Result, commit string) (provenance, []string) {
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

	var p provenance
	p.commit = strings.ToLower(strings.TrimSpace(commit))
	cs := make([]string, 0, len(commits))
	for c := range commits {
		cs = append(cs, c)
	}
	sort.Strings(cs)
	if p.commit == "" && len(cs) > 1 {
		problems = append(problems, fmt.Sprintf("the runs were measured at different commits (%s)", strings.Join(cs, ", ")))
	} else {
		if p.commit == "" && len(cs) == 1 {
			p.commit = cs[0]
		}
		for _, c := range cs {
			switch {
			case !sameCommit(p.commit, c):
				problems = append(problems, fmt.Sprintf("a run was measured at commit %s, not %s", c, p.commit))
			case len(c) > len(p.commit):
				p.commit = c // keep the full SHA where a run has it
			}
		}
	}
	switch {
	case p.commit == "":
		problems = append(problems, "no commit: pass the commit the runs measured (--commit SHA)")
	case !gitSHA.MatchString(p.commit):
		problems = append(problems, fmt.Sprintf("commit %q is not a git SHA (7 to 40 hex digits)", p.commit))
	}
	if len(problems) > 0 {
		return provenance{}, problems
	}
	first := runs[0].Perfgate
	p.image = engineIdentity(first.Environment)
	p.gpu, p.gpuUUID, p.driver = first.Environment.GPUName, first.Environment.GPUUUID, first.Environment.Driver
	p.load, p.datasetHash, p.warmup = first.Load, first.DatasetHash, first.Warmup
	return p, nil
}

// engineTraceable reports whether a run names the engine it measured well
// enough to start it again: an image pinned by digest; an image a build
// step made from the commit (its id); or a command the runner ran in the
// commit's checkout, whose tree digest the run records. The commit itself
// is checked with the other fields.
func engineTraceable(env result.Environment) bool {
	switch {
	case pinnedImage.MatchString(env.EngineImage), env.EngineBuild != "":
		return true
	}
	return env.EngineImage != "" && env.SourceTree != "" && env.Commit != ""
}

// engineIdentity is what a baseline stores as its engine: the sim marker,
// the image a build made from the commit, or the pinned image or command
// that ran (the commit is stored beside it).
func engineIdentity(env result.Environment) string {
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
