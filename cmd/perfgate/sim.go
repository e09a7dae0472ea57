package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/perfgate/perfgate/internal/runner/sim"
)

func init() {
	register("sim", command{summary: "run a simulated OpenAI-compatible inference engine", run: runSim})
}

// runSim serves a simulated engine until the context (SIGINT/SIGTERM) ends.
// The first stdout line announces the bound address; tools that start the
// simulator parse it, so nothing may be printed before it.
func runSim(ctx context.Context, env *cliEnv, args []string) int {
	fs := env.flags("sim", "[--config FILE] [--port N | --addr HOST:PORT] [flags]")
	configPath := fs.String("config", "", "YAML file of engine knobs (e.g. a checkout's inference_engine/sim.yaml); flags override it")
	addr := fs.String("addr", "", "listen address (port 0 picks a free port); default "+sim.DefaultAddr)
	host := fs.String("host", "", "listen host, as vLLM's --host (default 127.0.0.1; 0.0.0.0 inside a container)")
	port := fs.Int("port", -1, "listen port, as vLLM's --port (0 picks a free port)")
	tracePath := fs.String("trace", "", "write one JSON line per finished request to this file")
	profileDir := fs.String("profile-dir", "", "where POST /stop_profile writes its Chrome trace (default $VLLM_TORCH_PROFILER_DIR, as vLLM; a runner's profiling pass sets it)")
	noNoise := fs.Bool("no-noise", false, "no jitter and no GPU-like noise: step times follow the cost model exactly (flags after it may add some back)")
	noPrefixCaching := fs.Bool("no-enable-prefix-caching", false, "turn prefix caching off, as vLLM's flag of that name")
	overlay := sim.BindFlags(fs.FlagSet)
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "perfgate sim: unexpected arguments %q\n", fs.Args())
		return 3
	}
	listen, err := listenAddr(*addr, *host, *port)
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate sim: %v\n", err)
		return 3
	}

	cfg := sim.DefaultConfig()
	if *configPath != "" {
		data, err := os.ReadFile(*configPath)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate sim: read config: %v\n", err)
			return 1
		}
		if cfg, err = sim.ParseConfig(*configPath, data, cfg); err != nil {
			fmt.Fprintf(env.stderr, "perfgate sim: %v\n", err)
			return 1
		}
	}
	if *noNoise {
		cfg = cfg.Quiet()
	}
	cfg = overlay(cfg)
	if *noPrefixCaching {
		cfg.PrefixCaching = false
	}
	cfg.ProfileDir = *profileDir
	if cfg.ProfileDir == "" {
		cfg.ProfileDir = os.Getenv("VLLM_TORCH_PROFILER_DIR")
	}

	var trace *os.File
	if *tracePath != "" {
		f, err := os.Create(*tracePath)
		if err != nil {
			fmt.Fprintf(env.stderr, "perfgate sim: create trace file: %v\n", err)
			return 1
		}
		trace = f
		cfg.Trace = f
	}
	err = sim.Serve(ctx, cfg, listen, func(bound string) {
		fmt.Fprintf(env.stdout, "perfgate sim listening on http://%s\n", bound)
		env.log.Info().Str("addr", bound).Str("model", cfg.Model).Str("config", *configPath).
			Dur("decode_step", cfg.DecodeStep).Int("max_num_seqs", cfg.MaxNumSeqs).
			Float64("prefill_eagerness", cfg.PrefillEagerness).Bool("prefix_caching", cfg.PrefixCaching).
			Float64("slowdown", cfg.Slowdown).Msg("sim engine ready")
	})
	if trace != nil {
		if cerr := trace.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close trace file: %w", cerr)
		}
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "perfgate sim: %v\n", err)
		return 1
	}
	env.log.Info().Msg("sim engine stopped")
	return 0
}

// listenAddr combines --addr with vLLM's --host and --port.
func listenAddr(addr, host string, port int) (string, error) {
	if addr != "" && (host != "" || port >= 0) {
		return "", errors.New("give either --addr or --host/--port, not both")
	}
	if addr != "" {
		return addr, nil
	}
	if host == "" && port < 0 {
		return sim.DefaultAddr, nil
	}
	if port > 65535 {
		return "", fmt.Errorf("--port %d is not a port", port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(max(port, 0))), nil
}
