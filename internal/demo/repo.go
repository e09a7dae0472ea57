package demo

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/perfgate/perfgate/internal/vocab/config"
)

// gitRepo is the demo's repository, a real git repository on disk that the
// local GitHub serves (its files, its tarballs): main, and two pull
// requests — #17 changes the engine's knobs in inference_engine/sim.yaml
// so that every step is slower, #18 only edits a README next to it.
type gitRepo struct {
	dir string
	// Main is the base commit of both pull requests; Slow and Docs are
	// their heads.
	Main, Slow, Docs string
	// Slowdown is what #17 sets the sim engine's slowdown knob to.
	Slowdown float64
	// story says what the two pull requests change.
	story string
	// docsWhat says what #18 does.
	docsWhat string
}

// The demo's pull requests.
const (
	slowPR = 17
	docsPR = 18
)

// simKnobs is inference_engine/sim.yaml: the simulated engine's "code".
// Everything not set keeps the sim's defaults, GPU-like noise included;
// the card (instance_seed) is the demo runner's one GPU.
func simKnobs(slowdown float64) string {
	return fmt.Sprintf(`# The engine's knobs. perfgate's runner starts the engine from the commit's
# own checkout (perfgate sim --config inference_engine/sim.yaml), so a pull
# request that changes them measures its own engine.
model: perfgate-sim
decode_step: 8ms
per_seq_cost: 40us
prefill_step_overhead: 3ms
base_ttft: 12ms
prefill_per_token: 20us
slowdown: %s
instance_seed: 7
`, strconv.FormatFloat(slowdown, 'g', -1, 64))
}

// repoConfig is the repository's .github/perfgate.yml: the engine is the
// command perfgate (the binary at perfgate) runs in each commit's
// checkout, with that checkout's knobs. Each engine start gets its own
// session noise (the port the runner picked is its seed).
func repoConfig(perfgate string) string {
	return simEngineYAML(perfgate) + `workload:
  dataset: random
  input_len: 256
  output_len: 48
  max_concurrency: 50
  endpoint: /v1/completions
tiers:
  quick:
    prompts: 100
    repeats: 3
    warmup: 16
cost:
  gpu_hour_usd: 4.10
  gpus: 10
`
}

// simEngineYAML is the head of the demo repositories' perfgate.yml: the
// paths and the engine, perfgate sim started from the commit's checkout
// with that checkout's knobs.
func simEngineYAML(perfgate string) string {
	q, err := json.Marshal(perfgate) // a JSON string is a YAML string
	if err != nil {
		panic(err) // a Go string always marshals
	}
	return fmt.Sprintf(`paths: ["model/**", "inference_engine/**"]
server:
  command: [%s, "sim", "--config", "{{.Workdir}}/inference_engine/sim.yaml", "--port", "{{.Port}}", "--seed", "{{.Port}}"]
  model: perfgate-sim
`, q)
}

// repoLayout is what the demo repository holds: main's files, and the
// files each pull request's branch changes.
type repoLayout struct {
	main                map[string]string
	slowBranch, slowMsg string
	slow                map[string]string
	docsBranch, docsMsg string
	docs                map[string]string
	// docsWhat says what #18 does ("" : "only edits a README").
	docsWhat string
	story    string // "PR #%d %s … ; PR #%d %s …": what the two pull requests change
}

// simLayout is the repository of the simulated engine: #17 sets the
// engine's slowdown knob, #18 edits a README.
func simLayout(slowdown float64) repoLayout {
	return repoLayout{
		main: map[string]string{
			"inference_engine/sim.yaml":      simKnobs(1),
			"inference_engine/README.md":     "# inference_engine\n\nThe serving engine. Its knobs are in sim.yaml.\n",
			"model/README.md":                "# model\n",
			"README.md":                      "# acme/inference\n",
			"inference_engine/scheduler.txt": "continuous batching, chunked prefill\n",
		},
		slowBranch: "fused-softmax",
		slowMsg:    "inference_engine: fuse the attention softmax (every step slower)",
		slow:       map[string]string{"inference_engine/sim.yaml": simKnobs(slowdown)},
		docsBranch: "engine-docs",
		docsMsg:    "inference_engine: document the knobs",
		docs: map[string]string{
			"inference_engine/README.md": "# inference_engine\n\nThe serving engine. Its knobs are in sim.yaml: decode_step is the time of one decoding step.\n",
		},
		story: "PR #%d %s sets inference_engine/sim.yaml slowdown: " + strconv.FormatFloat(slowdown, 'g', -1, 64) + "; PR #%d %s edits inference_engine/README.md",
	}
}

// makeRepoLayout creates the demo repository in dir: main with the
// layout's files and perfgateYML, and the two pull requests' branches.
func makeRepoLayout(dir, perfgateYML string, l repoLayout) (*gitRepo, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("the demo makes a real git repository and needs git: %w", err)
	}
	r := &gitRepo{dir: dir, story: l.story, docsWhat: l.docsWhat}
	if r.docsWhat == "" {
		r.docsWhat = "only edits a README"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := r.git("init", "--quiet", "--initial-branch=main"); err != nil {
		return nil, err
	}
	files := map[string]string{config.DefaultPath: perfgateYML}
	for k, v := range l.main {
		files[k] = v
	}
	var err error
	if r.Main, err = r.commit("an inference engine and its perfgate config", files); err != nil {
		return nil, err
	}
	if r.Slow, err = r.branch(l.slowBranch, l.slowMsg, l.slow); err != nil {
		return nil, err
	}
	if r.Docs, err = r.branch(l.docsBranch, l.docsMsg, l.docs); err != nil {
		return nil, err
	}
	return r, nil
}

// Branch commits files on a new branch off main and returns its head.
func (r *gitRepo) Branch(name, message string, files map[string]string) (string, error) {
	return r.branch(name, message, files)
}

// branch commits files on a new branch off main and returns to main.
func (r *gitRepo) branch(name, message string, files map[string]string) (string, error) {
	if _, err := r.git("checkout", "--quiet", "-b", name, "main"); err != nil {
		return "", err
	}
	sha, err := r.commit(message, files)
	if err != nil {
		return "", err
	}
	_, err = r.git("checkout", "--quiet", "main")
	return sha, err
}

func (r *gitRepo) commit(message string, files map[string]string) (string, error) {
	for path, body := range files {
		full := filepath.Join(r.dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	if _, err := r.git("add", "--all"); err != nil {
		return "", err
	}
	if _, err := r.git("commit", "--quiet", "--message", message); err != nil {
		return "", err
	}
	return r.git("rev-parse", "HEAD")
}

// changed lists the files a branch head changes against main, as GitHub's
// pull request files API would.
func (r *gitRepo) changed(head string) ([]string, error) {
	out, err := r.git("diff", "--name-only", r.Main+"..."+head)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

func (r *gitRepo) git(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=demo", "GIT_AUTHOR_EMAIL=demo@example.com",
		"GIT_COMMITTER_NAME=demo", "GIT_COMMITTER_EMAIL=demo@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+r.dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}
