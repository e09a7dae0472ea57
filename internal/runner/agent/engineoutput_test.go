package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/runner/agent"
	"github.com/perfgate/perfgate/internal/vocab/agentapi"
	"github.com/perfgate/perfgate/internal/vocab/jobstate"
)

// spewScript prints 700 kB before it serves: more than the job's budget
// of engine output once two of its engines have started.
const spewScript = `#!/bin/sh
head -c 700000 /dev/zero | tr '\0' x | fold -w 999
exec "$1" sim --addr "127.0.0.1:$2" --model perfgate-sim --no-noise --decode-step 2ms
`

// TestEngineOutputPerJob: an interleaved job starts three engines, each
// printing 700 kB; what reaches the job log and the agent's own log is the
// job's budget (1 MiB here) all starts together, with one note, not the
// budget per start (the issue: ~8.9 MB of agent log per engine start).
func TestEngineOutputPerJob(t *testing.T) {
	skipShort(t)
	t.Parallel()
	r := newRepo(t)
	r.write("inference_engine/serve.sh", spewScript)
	base := r.commit("engine")
	r.write("README", "head\n")
	head := r.commit("head")

	e := newEnv(t, 10*time.Second)
	e.withGitHub(r)
	p := plan(agentapi.SimEngine{}, 8, 0, 0, 0)
	p.HeadSHA, p.BaseSHA = head, base
	p.Interleave = &agentapi.Interleave{Pairs: 2}
	p.Engine = agentapi.Engine{Command: []string{"sh", "{{.Workdir}}/inference_engine/serve.sh", perfgateBin, "{{.Port}}"},
		Model: "perfgate-sim", StartTimeout: agentapi.Duration(30 * time.Second)}
	job := e.enqueueAt(p, "merge", 1)
	own := &syncBuffer{}
	const budget = 1 << 20
	e.runAgentWith("spew", "GPU-spew", func(c *agent.Config) {
		c.AllowUncontained, c.LogOutput, c.EngineOutput = true, own, budget
	})
	waitFor(t, "the interleaved job", 2*time.Minute, func() bool { return finished(e.job(job.ID)) })
	if j := e.job(job.ID); j.Status != jobstate.Succeeded {
		t.Fatalf("job: %s %q\n%.4000s", j.Status, j.FailureReason, e.log(job.ID))
	}
	jobLog := e.log(job.ID)
	for name, log := range map[string]string{"job log": jobLog, "agent log": own.String()} {
		starts := strings.Count(log, `"message":"engine starting"`)
		var engineBytes int
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, `"source":"engine"`) {
				engineBytes += len(line) + 1
			}
		}
		notes := strings.Count(log, "reached its limit for this job")
		t.Logf("%s: %d engine starts, %d bytes of engine lines (JSON), %d notes, %d bytes in all", name, starts, engineBytes, notes, len(log))
		if starts < 3 {
			t.Errorf("%s: %d engine starts, want 3 (two pairs)", name, starts)
		}
		// The budget counts the engine's bytes; each 999-byte line gains
		// its JSON fields (~100 bytes).
		if engineBytes > budget*12/10 || notes != 1 {
			t.Errorf("%s: %d bytes of engine output and %d notes; want at most the job's budget %d (+ JSON) and one note", name, engineBytes, notes, budget)
		}
	}
}
