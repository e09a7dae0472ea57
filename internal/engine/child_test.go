package engine

import (
	"context"
	"encoding/json"
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

	"github.com/perfgate/perfgate/internal/sim"
)

// The engine tests start real processes: this test binary re-executed with
// childEnv set plays the inference server (the real sim, or a misbehaving
// one) or the docker CLI.
const (
	childEnv      = "PERFGATE_ENGINE_TEST_CHILD"
	pidFileEnv    = "PERFGATE_ENGINE_TEST_PIDFILE" // the child writes its PID (and a grandchild's) here
	delayEnv      = "PERFGATE_ENGINE_TEST_DELAY"   // sim start-up delay
	fakeDockerEnv = "PERFGATE_FAKE_DOCKER_DIR"     // state of the fake docker CLI
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
		if err = srv.ListenAndServe(); err == http.ErrServerClosed {
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
// the sim on the published port; `stop`, `rm -f`, `inspect` and `ps` act on
// it through a PID file per container name. Every call is logged.
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
	noSuch := func(name string) int {
		fmt.Fprintf(os.Stderr, "Error response from daemon: No such container: %s\n", name)
		return 1
	}
	if len(args) == 0 {
		return 3
	}
	last := args[len(args)-1]
	switch args[0] {
	case "run":
		var name, port, model string
		for i := 1; i < len(args)-1; i++ {
			switch args[i] {
			case "--name":
				name = args[i+1]
			case "-p":
				port = strings.Split(args[i+1], ":")[1]
			case "--model":
				model = args[i+1]
			}
		}
		b, _ := json.Marshal(args)
		_ = os.WriteFile(filepath.Join(dir, "run.argv"), b, 0o644)
		_ = os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		defer os.Remove(filepath.Join(dir, name+".pid")) // --rm
		return serveSim(port, model, nil)
	case "inspect":
		pid, ok := pidOf(last)
		if !ok {
			return noSuch(last)
		}
		fmt.Println(pid)
	case "stop", "rm":
		pid, ok := pidOf(last)
		if !ok {
			return noSuch(last)
		}
		sig := syscall.SIGTERM
		if args[0] == "rm" {
			sig = syscall.SIGKILL
		}
		_ = syscall.Kill(pid, sig)
		for i := 0; i < 500 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		_ = os.Remove(filepath.Join(dir, last+".pid"))
		fmt.Println(last)
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

// testExe is this test binary, to re-execute as a child.
func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
