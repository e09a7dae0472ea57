package sandbox_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/poll"
	"github.com/perfgate/perfgate/internal/runner/sandbox"
)

// TestCommandEnv: a command engine's environment is the allow-list's part
// of the agent's, plus the plan's, and never a PERFGATE_* variable, even
// when the runner's own allow-list or the plan names one.
func TestCommandEnv(t *testing.T) {
	host := []string{"PATH=/usr/bin", "LANG=C.UTF-8", "PERFGATE_AGENT_TOKEN=pga_x", "PERFGATE_SERVER=https://p",
		"AWS_SECRET_ACCESS_KEY=s", "HOME=/home/agent", "EXTRA_OK=1"}
	got := sandbox.CommandEnv(host, append(sandbox.CommandAllow, "EXTRA_OK", "PERFGATE_AGENT_TOKEN"),
		map[string]string{"VLLM_X": "1", "PERFGATE_SNEAK": "y"})
	want := "EXTRA_OK=1 HF_HUB_OFFLINE=1 HOME=/home/agent LANG=C.UTF-8 PATH=/usr/bin VLLM_X=1"
	if strings.Join(got, " ") != want {
		t.Errorf("env\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if c := sandbox.ContainerEnv(map[string]string{"A": "1", "PERFGATE_AGENT_TOKEN": "x"}); strings.Join(c, " ") != "A=1 HF_HUB_OFFLINE=1 HOME=/tmp" {
		t.Errorf("container env %v", c)
	}
	if err := sandbox.CheckEnv(map[string]string{"perfgate_token": "x", "OK": "1"}); err == nil || !strings.Contains(err.Error(), "perfgate_token") {
		t.Errorf("CheckEnv: %v", err)
	}
}

// TestRelay: the relay joins each connection to the target, both ways,
// passing a half-close on, and stops with its context.
func TestRelay(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the client's half-close
				_, _ = c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sandbox.Relay(ctx, addr, backend.Addr().String()) }()
	var c net.Conn
	for i := 0; i < 100; i++ {
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello relay")); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(got) != "HELLO RELAY" {
		t.Fatalf("through the relay: %q %v", got, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-poll.Context(t).Done(): // the test's deadline, not a guess at the machine's speed
		t.Fatal("relay did not stop with its context")
	}
}

// The engine's limits are on its command line: CPU quota, the card's
// cpuset (by the card, with or without --gpus), ulimits, a capped log.
func TestRunArgvLimits(t *testing.T) {
	t.Parallel()
	sets, err := sandbox.ParseCPUSets("GPU-a=0-15,GPU-b=16-23:48-55")
	if err != nil {
		t.Fatal(err)
	}
	if sets["GPU-a"] != "0-15" || sets["GPU-b"] != "16-23,48-55" {
		t.Fatalf("cpusets %v", sets)
	}
	for _, bad := range []string{"GPU-a", "GPU-a=x", "=1"} {
		if _, err := sandbox.ParseCPUSets(bad); err == nil {
			t.Errorf("ParseCPUSets(%q) accepted", bad)
		}
	}
	p := sandbox.Policy{Memory: "1g", CPUs: "8", CPUSets: sets, NoFile: 1024, NProc: 2048, LogMaxSize: "5m", LogMaxFiles: 3,
		Host: &sandbox.Host{CPUs: 16, MemoryBytes: 64 << 30}}
	line := strings.Join(p.RunArgv(sandbox.Container{Name: "n", Network: "x", Image: "i", Card: "GPU-b"}), " ")
	for _, want := range []string{"--cpus 8", "--cpuset-cpus 16-23,48-55", "--ulimit nofile=1024:1024", "--ulimit nproc=2048:2048", "--ulimit core=0:0",
		"--log-driver json-file", "--log-opt max-size=5m", "--log-opt max-file=3"} {
		if !strings.Contains(line, want+" ") {
			t.Errorf("run line lacks %q: %s", want, line)
		}
	}
	if other := strings.Join(p.RunArgv(sandbox.Container{Name: "n", Network: "x", Image: "i", Card: "GPU-c"}), " "); strings.Contains(other, "--cpuset-cpus") {
		t.Errorf("a card without a cpuset is pinned: %s", other)
	}
	if def := strings.Join(sandbox.Policy{}.RunArgv(sandbox.Container{Name: "n", Network: "x", Image: "i"}), " "); !strings.Contains(def, "--cpus "+sandbox.DefaultCPUs()+" ") {
		t.Errorf("no default CPU bound: %s", def)
	}
}
