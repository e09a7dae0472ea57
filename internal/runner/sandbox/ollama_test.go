package sandbox_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/demo"
	"github.com/perfgate/perfgate/internal/runner/bench"
	"github.com/perfgate/perfgate/internal/runner/engine"
)

// TestOllamaInSandbox runs the real engine as an image engine: the image
// BuildOllamaImage makes from the host's ollama binary (FROM scratch, no
// registry), started by engine.Start as the agent starts any image engine
// (the checkout read-only at /workspace, the sandbox's network, relay and
// limits), its serve.sh creating the model under the container's /tmp.
// perfgate bench's load then gets real tokens back through the relay, and
// the probe (mounted with the models, so the image is the one built)
// checks the container has every restriction of the sandbox. For
// comparison it logs the same checkout's uncontained start.
//
//	go test -run TestOllamaInSandbox -v ./internal/runner/sandbox
func TestOllamaInSandbox(t *testing.T) {
	needDocker(t)
	ollama, err := demo.FindOllama()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run the real engine in the sandbox: %v", err)
		}
		t.Skipf("no ollama binary, so no real engine to contain: %v", err)
	}
	_, relayImage := buildImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	begin := time.Now()
	img, err := demo.BuildOllamaImage(ctx, "docker", ollama)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s (%s): %.1f MB, %d host files, built in %s", img.Pin, demo.OllamaIdentity(ollama),
		float64(img.Size)/1e6, len(img.Files), time.Since(begin).Round(time.Millisecond))

	// The checkout and the models directory, readable by the container's
	// nobody; the probe comes in with the models, read-only.
	checkout := filepath.Join(t.TempDir(), "tree")
	models := filepath.Join(t.TempDir(), "models")
	if err := demo.WriteOllamaMain(checkout); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(models, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(checkout), checkout, filepath.Dir(models), models} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	probeBin, err := os.ReadFile(filepath.Join(filepath.Dir(images.bin), "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(models, "probe"), probeBin, 0o755); err != nil { //nolint:gosec // the probe runs inside the container
		t.Fatal(err)
	}

	token := randomToken(t)
	t.Setenv("PERFGATE_AGENT_TOKEN", token)
	api := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ReadHeaderTimeout: time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go api.Serve(ln) //nolint:errcheck // closed below
	t.Cleanup(func() { api.Close() })
	_, apiPort, _ := net.SplitHostPort(ln.Addr().String())

	job := "ollama-" + token[4:12]
	spec := demo.OllamaImageSpec(checkout, img.Pin, relayImage, job)
	spec.Agent = "sandbox-test"
	spec.ModelsDir = models
	srv, err := engine.Start(ctx, spec, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop(context.Background())
		}
	})
	contained := srv.StartupDuration()

	cpu0, cpuOK := srv.CPUTime()
	runStart := time.Now()
	res, err := bench.Run(ctx, bench.Options{Target: srv.BaseURL(), Model: demo.OllamaModel, Dataset: "random", InputLen: 16, OutputLen: 8,
		NumPrompts: 40, MaxConcurrency: 4, Warmup: 4, Seed: 1, IgnoreEOS: true, Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatalf("perfgate bench against ollama in the sandbox: %v\n%s", err, srv.Logs())
	}
	wall := time.Since(runStart)
	// The quick tier's gated metric: the engine's CPU per output token,
	// read from the container's processes on the host.
	cpu1, _ := srv.CPUTime()
	if !cpuOK || cpu1 <= cpu0 {
		t.Errorf("the contained engine's CPU time: %s then %s (known %v); the quick tier's engine_cpu_per_token needs it", cpu0, cpu1, cpuOK)
	}
	if res.Completed != 40 || res.Failed != 0 || res.TotalOutputTokens != 40*8 {
		t.Errorf("completed %d, failed %d, %d output tokens; want 40 requests of 8 real tokens", res.Completed, res.Failed, res.TotalOutputTokens)
	}
	ttft, _ := res.Metric("median_ttft_ms")
	tpot, _ := res.Metric("median_tpot_ms")
	t.Logf("in the sandbox: engine start + model create %s; 40 prompts (+4 warm-up) in %s (bench duration %.2f s), median TTFT %.1f ms, TPOT %.2f ms, %.1f tok/s, engine CPU %.2f ms per measured output token (warm-up's CPU included)",
		contained.Round(time.Millisecond), wall.Round(time.Millisecond), res.Duration, ttft, tpot, res.OutputThroughput,
		float64((cpu1-cpu0).Microseconds())/1e3/float64(max(1, res.TotalOutputTokens)))

	r := probeContained(t, engine.ContainerName(job), "/models/probe", token, apiPort)
	if len(r.TokenFoundIn) > 0 {
		t.Errorf("the agent token is readable inside the sandbox: %v", r.TokenFoundIn)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true

	// The same checkout, uncontained (the demo's default path), for the
	// start-up comparison only.
	plain, err := demo.StartOllama(ctx, checkout, ollama, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("uncontained: engine start + model create %s (contained %s); %d CPUs", plain.StartupDuration().Round(time.Millisecond),
		contained.Round(time.Millisecond), runtime.NumCPU())
	if err := plain.Stop(ctx); err != nil {
		t.Error(err)
	}
}
