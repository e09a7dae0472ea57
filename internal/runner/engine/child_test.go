package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perfgate/perfgate/internal/runner/sandbox"
	"github.com/perfgate/perfgate/internal/runner/sim"
)

// The engine tests start real processes: this test binary re-executed with
// childEnv set plays the inference server (the real sim, or a misbehaving
// one) or the docker CLI.
//
// The names are not PERFGATE_*: those never reach an engine.
const (
	childEnv      = "ENGINE_TEST_CHILD"
	pidFileEnv    = "ENGINE_TEST_PIDFILE"     // the child writes its PID (and a grandchild's) here
	delayEnv      = "ENGINE_TEST_DELAY"       // sim start-up delay
	fakeDockerEnv = "ENGINE_TEST_FAKE_DOCKER" // state of the fake docker CLI
	envDumpEnv    = "ENGINE_TEST_ENV_DUMP"    // the child writes its environment here
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// child runs one child mode; args are [port, model] for engine modes.
func child(mode string, args []string) int {
	if mode == "docker" {
		return fakeDocker(args)
	}
	if mode == "relay" {
		return fakeRelay(args)
	}
	if path := os.Getenv(envDumpEnv); path != "" {
		_ = os.WriteFile(path, []byte(strings.Join(os.Environ(), "\n")), 0o644)
	}
	if mode == "sleep" {
		time.Sleep(time.Hour)
		return 0
	}
	port, model := "0", "m"
	if len(args) >= 2 {
		port, model = args[0], args[1]
	}
	fmt.Printf("child %s pid %d CUDA_VISIBLE_DEVICES=%s HF_HUB_OFFLINE=%s\n", mode, os.Getpid(), os.Getenv("CUDA_VISIBLE_DEVICES"), os.Getenv("HF_HUB_OFFLINE"))
	writePIDs(os.Getpid())
	switch mode {
	case "sim":
		return serveSim(port, model, nil)
	case "exit-at-once":
		fmt.Fprintln(os.Stderr, "RuntimeError: CUDA error: out of memory")
		return 1
	case "never-ready":
		fmt.Println("loading weights...")
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
		if err := http.ListenAndServe("127.0.0.1:"+port, mux); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	case "crash-after-ready":
		return serveSim(port, model, func(mux *http.ServeMux) {
			mux.HandleFunc("/crash", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintln(os.Stderr, "fatal: engine worker died")
				os.Exit(2)
			})
		})
	case "group":
		// A worker in the same process group, as vLLM's are.
		exe, _ := os.Executable()
		gc := exec.Command(exe)
		gc.Env = append(os.Environ(), childEnv+"=sleep")
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		writePIDs(os.Getpid(), gc.Process.Pid)
		return serveSim(port, model, nil)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		return serveSim(port, model, nil)
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 3
}

// serveSimAt serves the sim on addr until SIGTERM and tells bound where.
func serveSimAt(addr, model string, bound func(string)) int {
	cfg := sim.DefaultConfig()
	cfg.Model = model
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := sim.Serve(ctx, cfg, addr, bound); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// serveSim runs the real simulated engine until SIGTERM, with extra
// handlers when extra is set.
func serveSim(port, model string, extra func(*http.ServeMux)) int {
	cfg := sim.DefaultConfig()
	cfg.Model = model
	if d, err := time.ParseDuration(os.Getenv(delayEnv)); err == nil {
		cfg.StartupDelay = d
	}
	sigs := []os.Signal{syscall.SIGTERM, syscall.SIGINT}
	if os.Getenv(childEnv) == "ignore-term" {
		sigs = sigs[1:] // NotifyContext would undo signal.Ignore
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	defer stop()
	addr := "127.0.0.1:" + port
	ready := func(a string) { fmt.Printf("perfgate sim listening on http://%s\n", a) }
	var err error
	if extra == nil {
		err = sim.Serve(ctx, cfg, addr, ready)
	} else {
		e, nerr := sim.New(cfg)
		if nerr != nil {
			fmt.Fprintln(os.Stderr, nerr)
			return 1
		}
		mux := http.NewServeMux()
		extra(mux)
		mux.Handle("/", e.Handler())
		srv := &http.Server{Addr: addr, Handler: mux}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		ready(addr)
		if err = srv.ListenAndServe(); errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func writePIDs(pids ...int) {
	path := os.Getenv(pidFileEnv)
	if path == "" {
		return
	}
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	_ = os.WriteFile(path, []byte(strings.Join(s, " ")), 0o644)
}

// fakeDocker is enough of the docker CLI for Start and Stop: `run` serves
// the sim on a free loopback port (its "network address"); `run --detach`
// of the relay forwards the published port to it; `stop`, `rm`, `inspect`,
// `ps` and `network …` act through files per container and network. Every
// call is logged.
func fakeDocker(args []string) int {
	dir := os.Getenv(fakeDockerEnv)
	logCall := func(s string) {
		f, err := os.OpenFile(filepath.Join(dir, "calls"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, s)
			f.Close()
		}
	}
	logCall(strings.Join(args, " "))
	pidOf := func(name string) (int, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
		if err != nil {
			return 0, false
		}
		pid, err := strconv.Atoi(string(b))
		return pid, err == nil && syscall.Kill(pid, 0) == nil
	}
	noSuch := func(what, name string) int {
		fmt.Fprintf(os.Stderr, "Error response from daemon: No such %s: %s\n", what, name)
		return 1
	}
	flag := func(name string) string {
		for i := 1; i < len(args)-1; i++ {
			if args[i] == name {
				return args[i+1]
			}
		}
		return ""
	}
	if len(args) == 0 {
		return 3
	}
	last := args[len(args)-1]
	switch args[0] {
	case "network":
		switch args[1] {
		case "create":
			_ = os.WriteFile(filepath.Join(dir, last+".net"), []byte(strings.Join(args, " ")), 0o644)
			fmt.Println("net-" + last)
		case "connect":
		case "rm":
			for _, n := range args[2:] {
				if os.Remove(filepath.Join(dir, n+".net")) != nil {
					return noSuch("network", n)
				}
			}
		case "ls":
			matches, _ := filepath.Glob(filepath.Join(dir, "*.net"))
			for _, m := range matches {
				fmt.Println(strings.TrimSuffix(filepath.Base(m), ".net"))
			}
		}
	case "run":
		name := flag("--name")
		if slicesContains(args, "--detach") {
			// The relay: forward the published port to the engine's.
			hostPort := strings.Split(flag("--publish"), ":")[1]
			exe, _ := os.Executable()
			relay := exec.Command(exe, hostPort, filepath.Join(dir, strings.TrimSuffix(name, "-relay")+".port"))
			relay.Env = append(os.Environ(), childEnv+"=relay")
			relay.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := relay.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			_ = os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(relay.Process.Pid)), 0o644)
			fmt.Println("relay-container-id")
			return 0
		}
		b, _ := json.Marshal(args)
		_ = os.WriteFile(filepath.Join(dir, "run.argv"), b, 0o644)
		_ = os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		defer os.Remove(filepath.Join(dir, name+".pid")) // --rm
		return serveSimAt("127.0.0.1:0", flag("--model"), func(addr string) {
			_, port, _ := strings.Cut(addr, ":")
			_ = os.WriteFile(filepath.Join(dir, name+".port"), []byte(port), 0o644)
		})
	case "inspect":
		pid, ok := pidOf(last)
		if !ok {
			return noSuch("container", last)
		}
		if strings.Contains(flag("--format"), "Networks") {
			fmt.Println("127.0.0.1")
			return 0
		}
		fmt.Println(pid)
	case "stop", "rm":
		pid, ok := pidOf(last)
		if !ok {
			return noSuch("container", last)
		}
		sig := syscall.SIGTERM
		if args[0] == "rm" {
			sig = syscall.SIGKILL
		}
		_ = syscall.Kill(pid, sig)
		for i := 0; i < 500 && alive(pid); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		_ = os.Remove(filepath.Join(dir, last+".pid"))
		fmt.Println(last)
	case "image":
		// No local images: a pinned digest is docker run's to pull.
		return noSuch("image", last)
	case "ps":
		matches, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, m := range matches {
			fmt.Println(strings.TrimSuffix(filepath.Base(m), ".pid"))
		}
	default:
		return 3
	}
	return 0
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// fakeRelay forwards 127.0.0.1:args[0] to the port the engine wrote to the
// file args[1], with the real relay code.
func fakeRelay(args []string) int {
	var port []byte
	for i := 0; i < 500; i++ {
		if b, err := os.ReadFile(args[1]); err == nil && len(b) > 0 {
			port = b
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := sandbox.Relay(ctx, "127.0.0.1:"+args[0], "127.0.0.1:"+string(port)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// testExe is this test binary, to re-execute as a child.
func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
