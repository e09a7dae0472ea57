package baseline

import (
	"fmt"
	"strconv"
	"strings"
)

// TargetPlaceholder stands for the engine's address in a re-run recipe: the
// engine is started from the recorded image on the recorded card, wherever
// that is.
const TargetPlaceholder = "http://127.0.0.1:8000"

// BenchArgs is the `perfgate bench` command line that offers the
// baseline's load again, one run per invocation (run it len(Runs) times,
// changing --output). Every flag is written out, defaults included, so
// the recipe still holds when a default changes.
func (s Snapshot) BenchArgs(output string) []string {
	l := s.Load
	args := []string{"perfgate", "bench",
		"--target", TargetPlaceholder,
		"--endpoint", l.Endpoint,
		"--model", l.Model,
		"--dataset", l.Dataset,
	}
	if l.Dataset != "random" {
		// The file is not stored; the dataset hash in the new result must
		// equal the baseline's for the gate to compare them.
		args = append(args, "--dataset-path", "DATASET_WITH_SHA256_"+shortHash(s.DatasetHash))
	}
	if l.InputLen > 0 {
		args = append(args, "--input-len", strconv.Itoa(l.InputLen))
	}
	if l.OutputLen > 0 {
		args = append(args, "--output-len", strconv.Itoa(l.OutputLen))
	}
	args = append(args,
		"--num-prompts", strconv.Itoa(l.NumPrompts),
		"--request-rate", l.RequestRate.String(),
		"--burstiness", ftoa(l.Burstiness),
		"--max-concurrency", strconv.Itoa(l.MaxConcurrency),
		"--warmup", strconv.Itoa(s.Warmup),
		"--seed", strconv.FormatInt(l.Seed, 10),
		"--temperature", ftoa(l.Temperature),
	)
	if output != "" {
		args = append(args, "--output", output)
	}
	return args
}

// Recipe is the full re-run instruction: the environment to reproduce and
// the bench command, as lines for a terminal.
func (s Snapshot) Recipe() []string {
	var engine string
	switch {
	case s.ImageDigest == SimImage:
		engine = "the built-in simulated engine (perfgate sim), model " + s.Load.Model
	case pinnedImage.MatchString(s.ImageDigest), strings.HasPrefix(s.ImageDigest, "sha256:"):
		engine = "image " + s.ImageDigest
	default:
		engine = "the command `" + s.ImageDigest + "` in a checkout of the commit"
	}
	driver := s.Driver
	if driver == "" {
		driver = "(none recorded)"
	}
	lines := []string{
		fmt.Sprintf("# on a %s (pin GPU %s), driver %s", s.GPU, s.GPUUUID, driver),
		fmt.Sprintf("# engine: %s, serving the code at commit %s", engine, s.Commit),
		fmt.Sprintf("# dataset hash %s (sha256 of the prompts sent); repeat %d time(s), one --output per run", s.DatasetHash, len(s.Runs)),
		shellJoin(s.BenchArgs("run-1.json")),
	}
	return lines
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	if h == "" {
		return "UNKNOWN"
	}
	return h
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// shellJoin quotes what a POSIX shell would split or expand.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
