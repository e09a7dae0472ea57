package ollama_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/demo"
	"github.com/perfgate/perfgate/internal/runner/bench"
)

// TestProfileScript runs the real-engine repository's profile.command,
// inference_engine/profile.sh, against a running Ollama under load, the
// way the runner does for an engine without /start_profile: it must
// leave a perf profile whose report names llama.cpp's own kernels (ggml)
// and perf stat's software counters. It needs perf (Debian's linux-perf).
func TestProfileScript(t *testing.T) {
	if _, err := exec.LookPath("perf"); err != nil {
		t.Skip("no perf here (Debian: apt-get install linux-perf)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	srv := startOllamaIn(t, ctx, dir)
	out := t.TempDir()
	load := func(seed int64) error {
		_, err := bench.Run(ctx, bench.Options{Target: srv.BaseURL(), Model: demo.OllamaModel, Dataset: "random", InputLen: 16,
			OutputLen: 32, NumPrompts: 16, MaxConcurrency: 4, Seed: seed, IgnoreEOS: true, Timeout: time.Minute})
		return err
	}
	// Warm up first, as the runner does: Ollama starts its llama.cpp
	// runner process at the first request, and profile.sh samples the
	// processes the engine has when it starts.
	if err := load(-1); err != nil {
		t.Fatalf("warm-up: %v", err)
	}

	// Load until the profile is written, so the two overlap however slowly
	// either starts.
	profiled := make(chan error, 1)
	go func() {
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, "inference_engine", "profile.sh"), strconv.Itoa(srv.PID()), out, "3")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("profile.sh: %s", b)
		}
		profiled <- err
	}()
	var perr error
	runs := 0
load:
	for {
		select {
		case perr = <-profiled:
			break load
		default:
		}
		if err := load(int64(runs)); err != nil {
			t.Fatalf("load: %v", err)
		}
		runs++
	}
	if perr != nil {
		t.Fatalf("profile.sh: %v", perr)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if st, err := os.Stat(filepath.Join(out, "perf.data")); err != nil || st.Size() == 0 {
		t.Errorf("perf.data: %v", err)
	}
	if rep := read("perf-report.txt"); !strings.Contains(rep, "ggml") {
		t.Errorf("perf report names no ggml kernel:\n%.2000s", rep)
	}
	if stat := read("perf-stat.txt"); !strings.Contains(stat, "task-clock") {
		t.Errorf("perf stat:\n%s", stat)
	}
	t.Logf("profiled beside %d load runs", runs)
}
