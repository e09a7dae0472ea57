package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/poll"
)

func TestSimCommandAnnouncesAddressFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, outW := io.Pipe()
	var stderr bytes.Buffer
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	env := &cliEnv{stdout: outW, stderr: &stderr, log: zerolog.Nop()}
	code := make(chan int, 1)
	go func() {
		code <- runSim(ctx, env, []string{"--addr", "127.0.0.1:0", "--decode-step", "0", "--base-ttft", "0", "--trace", trace})
		outW.Close()
	}()

	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read first line: %v (stderr %s)", err, stderr.String())
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "perfgate sim listening on http://")
	if !ok || strings.HasSuffix(addr, ":0") {
		t.Fatalf("first line %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	resp, err := http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a b","max_tokens":3}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion status %d", resp.StatusCode)
	}

	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d, stderr %s", c, stderr.String())
		}
	case <-poll.Context(t).Done(): // the test's deadline, not a guess at the machine's speed
		t.Fatal("sim did not stop on cancel")
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 1 || !strings.Contains(string(data), `"output_tokens":3`) {
		t.Errorf("trace file %q", data)
	}
}

func TestSimCommandRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--no-such-flag"}, 3, "no-such-flag"},
		{[]string{"extra"}, 3, "unexpected arguments"},
		{[]string{"--max-num-seqs", "0"}, 1, "max num seqs"},
		{[]string{"--slowdown", "0", "--error-rate", "2"}, 1, "error rate"},
		{[]string{"--addr", "127.0.0.1:0", "--port", "8000"}, 3, "not both"},
		{[]string{"--port", "70000"}, 3, "not a port"},
		{[]string{"--config", "testdata/no-such.yaml"}, 1, "read config"},
		{[]string{"--config", "../../testdata/sim/sim.yaml", "--prefill-eagerness", "2"}, 1, "prefill eagerness"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		env := &cliEnv{stdout: &stdout, stderr: &stderr, log: zerolog.Nop()}
		if c := runSim(context.Background(), env, tt.args); c != tt.code {
			t.Errorf("%v: exit %d, want %d", tt.args, c, tt.code)
		}
		if !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: stderr %q lacks %q", tt.args, stderr.String(), tt.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: printed %q to stdout", tt.args, stdout.String())
		}
	}
}

func TestSimCommandConfigFileAndFlags(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "sim.yaml")
	if err := os.WriteFile(conf, []byte("model: from-file\nmax_model_len: 64\nnum_gpu_blocks: 100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("decode_step: 8ms\ndecod_step: 9ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	env := &cliEnv{stdout: io.Discard, stderr: &stderr, log: zerolog.Nop()}
	if c := runSim(context.Background(), env, []string{"--config", bad}); c != 1 || !strings.Contains(stderr.String(), bad+":2:1: unknown key \"decod_step\"") {
		t.Errorf("bad config: exit %d, stderr %q", c, stderr.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, outW := io.Pipe()
	env = &cliEnv{stdout: outW, stderr: &stderr, log: zerolog.Nop()}
	code := make(chan int, 1)
	go func() {
		code <- runSim(ctx, env, []string{"--config", conf, "--model", "from-flag", "--port", "0", "--no-noise", "--decode-step", "0", "--base-ttft", "0"})
		outW.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read first line: %v (stderr %s)", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	addr := strings.TrimSpace(strings.TrimPrefix(line, "perfgate sim listening on "))
	if !strings.HasPrefix(addr, "http://127.0.0.1:") {
		t.Fatalf("first line %q", line)
	}
	resp, err := http.Get(addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The flag's model wins; the file's max_model_len stands.
	if !strings.Contains(string(body), `"id":"from-flag"`) || !strings.Contains(string(body), `"max_model_len":64`) {
		t.Errorf("models %s", body)
	}
	cancel()
	if c := <-code; c != 0 {
		t.Errorf("exit %d: %s", c, stderr.String())
	}
}
